// How the parts of one parallel-stream file are handed out (client/part_queue.h).
#include "client/part_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace aesxfer::client {
namespace {

// A busy machine starts connection 0's thread last: the others must not take part 0, or
// connection 0's session never joins the transfer and the server refuses the commit it carries
// ("no such transfer on this connection", seen once under load in Streams.ClientKilled...).
TEST(PartQueue, ConnectionZeroTakesPartZeroEvenWhenItAsksLast) {
  PartQueue q(3);
  size_t i = 99;
  ASSERT_TRUE(q.next(1, &i));
  EXPECT_EQ(i, 1u);
  ASSERT_TRUE(q.next(2, &i));
  EXPECT_EQ(i, 2u);
  EXPECT_FALSE(q.next(1, &i));
  EXPECT_FALSE(q.empty());  // part 0 is still connection 0's
  ASSERT_TRUE(q.next(0, &i));
  EXPECT_EQ(i, 0u);
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.next(0, &i));
}

TEST(PartQueue, EveryPartOnceInOrderAcrossThreads) {
  for (size_t parts : {1u, 2u, 5u, 64u}) {
    PartQueue q(parts);
    std::vector<std::vector<size_t>> got(4);
    std::vector<std::thread> ts;
    for (size_t c = 0; c < got.size(); ++c)
      ts.emplace_back([&, c] {
        for (size_t i; q.next(c, &i);) got[c].push_back(i);
      });
    for (auto& t : ts) t.join();
    std::multiset<size_t> all;
    for (const auto& g : got) {
      all.insert(g.begin(), g.end());
      for (size_t k = 1; k < g.size(); ++k) EXPECT_LT(g[k - 1], g[k]);  // each connection in order
    }
    ASSERT_EQ(all.size(), parts);
    for (size_t k = 0; k < parts; ++k) EXPECT_EQ(all.count(k), 1u) << k;
    ASSERT_FALSE(got[0].empty());
    EXPECT_EQ(got[0].front(), 0u);
    EXPECT_TRUE(q.empty());
  }
}

}  // namespace
}  // namespace aesxfer::client
