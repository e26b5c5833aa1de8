// server::ListingMemory: listings that together pass serve --max-list-memory. The youngest one
// still walking gives way and the older ones get its room, so listings that start together are
// served in their order for as long as they fit (a forty-first re-attack, A-F2: four started
// together were all refused although two fitted, since each one's next charge failed at once).
#include "server/listing_memory.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "proto/failure.h"
#include "proto/messages.h"

namespace aesxfer::test {
namespace {

using server::ListingMemory;
using Clock = std::chrono::steady_clock;

// Calls add(0) on s until it is refused busy (true) or 5 s pass: the youngest listing learns at
// its next charge that an older one waits for its room.
bool refused_at_next_charge(ListingMemory::Share& s) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    try {
      s.add(0);
    } catch (const proto::Failure& f) {
      EXPECT_EQ(f.status, proto::Status::busy);
      EXPECT_NE(std::string(f.what()).find("--max-list-memory"), std::string::npos) << f.what();
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(ListingMemory, TheYoungestWalkingListingGivesWayAndTheOlderOnesGetTheRoom) {
  ListingMemory m;
  auto a = std::make_unique<ListingMemory::Share>(m, 100);
  auto b = std::make_unique<ListingMemory::Share>(m, 100);
  auto c = std::make_unique<ListingMemory::Share>(m, 100);
  a->add(40);
  b->add(30);
  c->add(20);
  // a passes the bound: it waits, and c (the youngest) is refused at its next charge.
  auto a_more = std::async(std::launch::async, [&] { a->add(30); });
  ASSERT_TRUE(refused_at_next_charge(*c));
  EXPECT_EQ(a_more.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "a went on before c gave its charge back";
  c->release(~uint64_t(0));  // the refusal's clean-up (TreeLister::drop)
  a_more.get();              // a has its room now
  EXPECT_EQ(m.used(), 100u);
  // b is the youngest still walking: over the bound it gives way itself, at once.
  const auto t0 = Clock::now();
  EXPECT_THROW(b->add(1), proto::Failure);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(500));
  // A listing whose walk is over holds its charge (until its pages are sent) and is never told
  // to give way; a new one is refused while the room is taken.
  a->walked();
  b.reset();
  c.reset();
  EXPECT_EQ(m.used(), 70u);
  ListingMemory::Share d(m, 100);
  d.add(30);
  EXPECT_THROW(d.add(1), proto::Failure);
  a.reset();
  d.release(~uint64_t(0));
  EXPECT_EQ(m.used(), 0u);
}

// The wait is bounded: a youngest listing that makes no further charge (a slow disk under its
// walk) lets the older one wait ListingMemory::kMaxWait, not for ever.
TEST(ListingMemory, AnOlderListingWaitsForTheRoomAtMostKMaxWait) {
  ListingMemory m;
  ListingMemory::Share a(m, 100), b(m, 100);
  a.add(40);
  b.add(60);
  const auto t0 = Clock::now();
  EXPECT_THROW(a.add(10), proto::Failure);
  const auto waited = Clock::now() - t0;
  EXPECT_GE(waited, ListingMemory::kMaxWait - std::chrono::milliseconds(50));
  EXPECT_LT(waited, ListingMemory::kMaxWait + std::chrono::seconds(5));
  a.release(~uint64_t(0));
  b.add(40);  // a gave way and back: b fits
  EXPECT_EQ(m.used(), 100u);
  // More than the bound alone is refused without a wait, older or not.
  ListingMemory n;
  ListingMemory::Share c(n, 100), d(n, 100);
  d.add(10);
  const auto t1 = Clock::now();
  EXPECT_THROW(c.add(101), proto::Failure);
  EXPECT_LT(Clock::now() - t1, std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace aesxfer::test
