// What the sessions of a retried recv -r remember of the server's names (client::SeenSet).
#include <gtest/gtest.h>
#include <malloc.h>

#include <string>

#include "client/recv_tree.h"

namespace aesxfer::client {
namespace {

TEST(SeenSet, SaysWhetherAStringWasSeen) {
  SeenSet s;
  EXPECT_FALSE(s.contains("t/a"));
  EXPECT_TRUE(s.insert("t/a"));
  EXPECT_FALSE(s.insert("t/a"));
  EXPECT_TRUE(s.contains("t/a"));
  EXPECT_FALSE(s.contains("t/a\n"));
  EXPECT_TRUE(s.insert(std::string("t/a\0b", 5)));  // every byte counts
  EXPECT_TRUE(s.insert(""));
  EXPECT_FALSE(s.insert(""));
}

// A fifty-fourth re-attack (C54-1): the lines and paths were kept whole, and a hostile server's
// 16,000 long names a session grew the client by about 250 MB each session. 16,000 lines of 16 KB
// (256 MB as strings) cost the set a small node each.
TEST(SeenSet, KeepsNoCopyOfWhatItSaw) {
  SeenSet s;
  std::string line(16384, 'x');
  const size_t before = ::mallinfo2().uordblks;
  for (int i = 0; i < 16000; ++i) {
    line.replace(0, 8, std::to_string(10000000 + i));
    ASSERT_TRUE(s.insert(line));
  }
  const size_t after = ::mallinfo2().uordblks;
  EXPECT_LT(after - std::min(after, before), size_t(4) << 20) << "bytes allocated for 16,000 entries";
  EXPECT_FALSE(s.insert(line));
}

// A fifty-fifth re-attack (C55-3): a million new names a session still grew the client with every
// retry. The set stops at kMaxEntries; past it a new string is said to be new and not kept.
TEST(SeenSet, StopsGrowingAtItsBound) {
  SeenSet s;
  for (size_t i = 0; i < SeenSet::kMaxEntries; ++i) ASSERT_TRUE(s.insert(std::to_string(i)));
  EXPECT_EQ(s.size(), SeenSet::kMaxEntries);
  EXPECT_FALSE(s.insert("0"));  // still known
  EXPECT_TRUE(s.insert("new"));
  EXPECT_TRUE(s.insert("new"));  // not kept
  EXPECT_FALSE(s.contains("new"));
  EXPECT_EQ(s.size(), SeenSet::kMaxEntries);
}

}  // namespace
}  // namespace aesxfer::client
