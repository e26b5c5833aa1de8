// client/stream_growth.h: the rule that opens more connections where loss limits each one
// (issue 25 item 2), fed with synthetic TCP_INFO sums as client/parallel.cpp's sampler feeds it.
#include "client/stream_growth.h"

#include <gtest/gtest.h>

#include <functional>

namespace aesxfer::client {
namespace {

// Samples every kSampleMs from `ms` on, for `seconds`: `rate(conns)` bytes/s delivered in all,
// `resent` of the bytes sent sent again, the smoothed round trip `rtt_ratio` times the base one
// (100 ms). Each call of step() that asks for more "opens" them (conns grows).
struct Path {
  StreamGrowth rule;
  int64_t ms = 0;
  double acked = 0, sent = 0, resent_bytes = 0;
  int conns = 0;
  double rtt_ratio = 1.02;
  double late_ratio = 0;   // when set, every other sample's round trip (a busy host's late wake-ups)
  std::vector<int> asked;  // each non-zero answer of step()

  void run(double seconds, const std::function<double(int)>& rate, double resent, int max) {
    for (int64_t end = ms + int64_t(seconds * 1000); ms < end; ms += StreamGrowth::kSampleMs) {
      const double moved = rate(conns) * StreamGrowth::kSampleMs / 1000.0;
      acked += moved;
      sent += moved * (1 + resent);
      resent_bytes += moved * resent;
      StreamGrowth::Sample s;
      s.ms = ms;
      s.acked = uint64_t(acked);
      s.sent = uint64_t(sent);
      s.resent = uint64_t(resent_bytes);
      s.base_rtt_us = 100000;
      s.srtt_us =
          uint32_t(100000 * (late_ratio > 0 && (ms / StreamGrowth::kSampleMs) % 2 ? late_ratio : rtt_ratio));
      s.conns = conns;
      s.max = max;
      const int want = rule.step(s);
      if (want > 0) {
        asked.push_back(want);
        conns += want;
      }
    }
  }
};

// Mathis: under random loss each connection moves about the same, until the link is full.
std::function<double(int)> loss_limited(double per_conn, double link) {
  return [=](int n) { return std::min(per_conn * n, link); };
}

TEST(StreamGrowth, WithoutLossNothingIsAdded) {
  Path p;
  p.conns = 8;
  p.run(30, loss_limited(14e6, 118e6), 0.0, 16);
  EXPECT_TRUE(p.asked.empty());
  EXPECT_TRUE(p.rule.stopped());
  EXPECT_EQ(p.rule.last().conns, 8);
  EXPECT_NEAR(p.rule.last().rate, 112e6, 1e6);
  EXPECT_EQ(p.rule.last().why, StreamGrowth::Stop::kLittleLoss);
}

TEST(StreamGrowth, NothingIsDecidedBeforeSettlingAndMeasuring) {
  Path p;
  p.conns = 4;
  p.run((StreamGrowth::kSettleMs + StreamGrowth::kMeasureMs) / 1000.0 - 0.25, loss_limited(1e6, 118e6), 0.01,
        16);
  EXPECT_TRUE(p.asked.empty());
  EXPECT_FALSE(p.rule.stopped());
  p.run(0.5, loss_limited(1e6, 118e6), 0.01, 16);
  ASSERT_EQ(p.asked.size(), 1u);
  EXPECT_EQ(p.asked[0], 4) << "doubles";
}

// Loss-limited connections: doubled while each added one brings its share, then kept when the
// link is full (the added ones brought almost nothing).
TEST(StreamGrowth, GrowsWhileEachAddedConnectionPaysThenStops) {
  Path p;
  p.conns = 2;
  p.run(30, loss_limited(1.2e6, 5e6), 0.01, 16);
  EXPECT_EQ(p.asked, (std::vector<int>{2, 4}));  // 2 -> 4 (4.8 MB/s) -> 8 (5 MB/s: full)
  EXPECT_EQ(p.conns, 8);
  EXPECT_TRUE(p.rule.stopped());
  EXPECT_EQ(p.rule.last().why, StreamGrowth::Stop::kNoGain);
}

TEST(StreamGrowth, BoundedByTheCallersMaximumAndSixteen) {
  Path p;
  p.conns = 4;
  p.run(30, loss_limited(1e6, 1e9), 0.01, 6);  // two parts left: 6 connections at most
  EXPECT_EQ(p.asked, (std::vector<int>{2}));
  EXPECT_EQ(p.conns, 6);
  EXPECT_EQ(p.rule.last().why, StreamGrowth::Stop::kCap);
  Path q;
  q.conns = 8;
  q.run(60, loss_limited(1e6, 1e9), 0.01, 100);
  EXPECT_EQ(q.asked, (std::vector<int>{8}));
  EXPECT_EQ(q.conns, StreamGrowth::kMaxStreams);
  EXPECT_EQ(q.rule.last().why, StreamGrowth::Stop::kCap);
}

TEST(StreamGrowth, LittleLossIsNotWorthMoreConnections) {
  Path p;
  p.conns = 8;
  p.run(30, loss_limited(1e6, 1e9), StreamGrowth::kMinResent / 2, 16);
  EXPECT_TRUE(p.asked.empty());
  EXPECT_TRUE(p.rule.stopped());
  EXPECT_EQ(p.rule.last().why, StreamGrowth::Stop::kLittleLoss);
}

// Loss from a full bottleneck (its queue stands: the round trip is inflated) is not the path's:
// more connections would only share the same rate.
TEST(StreamGrowth, LossAtAFullQueueIsNotWorthMoreConnections) {
  Path p;
  p.conns = 4;
  p.rtt_ratio = 3;
  p.run(30, loss_limited(30e6, 12e6), 0.01, 16);
  EXPECT_TRUE(p.asked.empty());
  EXPECT_TRUE(p.rule.stopped());
  EXPECT_NEAR(p.rule.last().rtt_ratio, 3, 0.01);
  EXPECT_EQ(p.rule.last().why, StreamGrowth::Stop::kQueue);
}

// A busy host (CPU-bound neighbours starving the network's soft interrupts) inflates some
// samples of the round trip, not all of them as a standing queue does: the lowest one sampled
// while measuring is judged (Netns.LossyCubicPathGrowsTheConnections once stopped at "a queue
// stands (round trip 2.51 times the base)" beside two busy loops, on a 1 Gbit/s relay that cubic
// at 1 % loss fills to a few percent).
TEST(StreamGrowth, ARoundTripInflatedNowAndThenIsNotAQueue) {
  Path p;
  p.conns = 2;
  p.late_ratio = 2.5;
  p.run(30, loss_limited(1.2e6, 5e6), 0.01, 16);
  EXPECT_EQ(p.asked, (std::vector<int>{2, 4}));
  EXPECT_EQ(p.rule.last().why, StreamGrowth::Stop::kNoGain);
  EXPECT_LT(p.rule.last().rtt_ratio, 1.1);
  // Every sample inflated: a queue stands.
  Path q;
  q.conns = 2;
  q.rtt_ratio = 1.6;
  q.late_ratio = 2.5;
  q.run(30, loss_limited(1.2e6, 5e6), 0.01, 16);
  EXPECT_TRUE(q.asked.empty());
  EXPECT_EQ(q.rule.last().why, StreamGrowth::Stop::kQueue);
  EXPECT_NEAR(q.rule.last().rtt_ratio, 1.6, 0.01);
}

TEST(StreamGrowth, AServerThatTurnsOneAwayEndsTheGrowth) {
  Path p;
  p.conns = 2;
  p.run(3.5, loss_limited(1e6, 1e9), 0.01, 16);
  ASSERT_EQ(p.asked.size(), 1u);
  p.conns -= 1;  // one of the two was refused
  p.rule.refused();
  p.run(30, loss_limited(1e6, 1e9), 0.01, 16);
  EXPECT_EQ(p.asked.size(), 1u);
  EXPECT_TRUE(p.rule.stopped());
  EXPECT_EQ(p.rule.last().why, StreamGrowth::Stop::kRefused);
}

}  // namespace
}  // namespace aesxfer::client
