#include "server/listing_memory.h"

#include <algorithm>
#include <optional>

#include "proto/failure.h"
#include "proto/messages.h"

namespace aesxfer::server {

namespace {

[[noreturn]] void refuse_busy() {
  throw proto::Failure(
      "server busy: the listings in progress hold all the memory the server allows them (serve "
      "--max-list-memory); try again later",
      proto::Status::busy);
}

}  // namespace

uint64_t ListingMemory::used() const {
  std::lock_guard<std::mutex> g(mu_);
  return used_;
}

ListingMemory::Share::Share(ListingMemory& m, uint64_t cap) : m_(m), cap_(cap) {
  std::lock_guard<std::mutex> g(m_.mu_);
  seq_ = m_.next_seq_++;
  m_.walking_.emplace(seq_, this);
}

ListingMemory::Share::~Share() {
  walked();
  release(~uint64_t(0));
}

void ListingMemory::Share::add(uint64_t n) {
  std::unique_lock<std::mutex> lk(m_.mu_);
  const auto deadline = std::chrono::steady_clock::now() + kMaxWait;
  // The listing this one asked to give way, while it waits, by its number: it may have given
  // way and gone meanwhile.
  std::optional<uint64_t> asked;
  auto stop_asking = [&] {
    if (!asked) return;
    if (const auto it = m_.walking_.find(*asked); it != m_.walking_.end()) --it->second->asked_;
    asked.reset();
  };
  while (asked_ == 0 && walking_ && n <= cap_) {  // more than the bound alone: refused at once
    if (m_.used_ + n <= cap_) {
      stop_asking();
      m_.used_ += n;
      held_ += n;
      return;
    }
    // Over the bound. While a listing that gave way still holds its charge, the room is coming:
    // wait for it. Else the youngest listing still walking gives way: this one, when it is that
    // listing; else the youngest is asked to, and this one waits for what it gives back.
    if (m_.giving_back_ == 0) {
      Share* youngest = m_.walking_.rbegin()->second;
      if (youngest == this) break;
      if (asked != youngest->seq_) {
        stop_asking();
        asked = youngest->seq_;
        ++youngest->asked_;
      }
    }
    if (m_.cv_.wait_until(lk, deadline) == std::cv_status::timeout) break;
  }
  stop_asking();                          // a listing asked by none (this one gone) goes on
  if (walking_) m_.walking_.erase(seq_);  // out of the line: the next youngest gives way next
  walking_ = false;
  if (held_ > 0 && !gave_way_) ++m_.giving_back_;
  gave_way_ = true;
  m_.cv_.notify_all();
  lk.unlock();
  refuse_busy();
}

void ListingMemory::Share::release(uint64_t n) noexcept {
  std::lock_guard<std::mutex> g(m_.mu_);
  n = std::min(n, held_);
  m_.used_ -= n;
  held_ -= n;
  if (gave_way_ && held_ == 0 && n > 0) --m_.giving_back_;
  if (n) m_.cv_.notify_all();
}

void ListingMemory::Share::walked() noexcept {
  std::lock_guard<std::mutex> g(m_.mu_);
  if (walking_) m_.walking_.erase(seq_);
  walking_ = false;
  m_.cv_.notify_all();
}

}  // namespace aesxfer::server
