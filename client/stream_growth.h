// More connections where loss, not the window, limits each one. Under a
// loss-based congestion control (cubic, reno) a connection that loses packets at random moves
// about MSS / (RTT * sqrt(loss)) whatever its window (Mathis et al., 1997): on a 100 ms path with
// 1 % loss, about 1 MB/s at MTU 9000. More connections then move more, until the link is full,
// which is what GridFTP and bbcp users tune by hand with -p and -s. bbr does not need it.
//
// StreamGrowth is the rule, pure (fed with samples, no sockets, no clock): client/parallel.cpp
// samples the TCP_INFO of a put's connections (bytes acknowledged, sent and sent again) every
// kSampleMs and opens what step() asks for. The rule, per phase (a fixed number of connections):
//
//   settle   kSettleMs after the phase began (new connections leave slow start), then
//   measure  kMeasureMs: the phase's delivery rate R (bytes acknowledged per second, all
//            connections) and the share of bytes sent again;
//   decide   the first phase grows when the share is at least kMinResent and the path's queue
//            is not standing (the lowest smoothed RTT sampled while measuring at most
//            kMaxRttRatio times the base RTT: a queue that stands inflates every sample, where a
//            busy host's late wake-ups inflate some (beside two busy loops one sample came to 2.5
//            times the base, and the growth stopped on a path that had no queue); the loss is
//            the path's, not a full bottleneck's, where more connections would only share the
//            same rate); a later one grows again only when its added connections each brought at
//            least kMinGain of what a connection of the phase before moved on average (the link
//            is not full yet), on the same two conditions. Growing doubles the connections, up
//            to `max`; otherwise the rule stops for good (the connections opened stay for later
//            files).
//
// `max` is the caller's bound: the parts still queued for connections to take (a new connection
// needs a part; the wire allows 16 parts a file, PROTOCOL.md 3.9), and at most kMaxStreams. The
// server agrees to each connection as to any session (serve --max-sessions, --max-startups): one
// that it turns away ends the growth.
#pragma once

#include <cstdint>

namespace aesxfer::client {

class StreamGrowth {
 public:
  static constexpr int kSampleMs = 250;
  static constexpr int kSettleMs = 1000;
  static constexpr int kMeasureMs = 2000;
  static constexpr double kMinResent = 0.0005;  // 0.05 % of the bytes sent, sent again
  static constexpr double kMinGain = 0.5;       // of an average connection's rate, per added one
  static constexpr double kMaxRttRatio = 1.25;  // smoothed / base RTT above which a queue stands
  static constexpr int kMaxStreams = 16;

  // Why the rule stopped (for -v): none yet; too little was sent again (loss does not limit);
  // a queue stands (the round trip is above kMaxRttRatio times the base); the last connections
  // added brought less than kMinGain each; the cap was reached; the server turned one away.
  enum class Stop { kNone, kLittleLoss, kQueue, kNoGain, kCap, kRefused };

  // What step() saw in the last phase it decided on (for -v).
  struct Phase {
    int conns = 0;
    double rate = 0;       // bytes/s delivered
    double resent = 0;     // share of the bytes sent that were sent again
    double rtt_ratio = 0;  // smoothed / base round trip at the decision
    Stop why = Stop::kNone;
  };

  // One sample: milliseconds since the transfer began; the sums over every connection open at
  // that moment of the bytes acknowledged, sent and sent again (each connection counted from when
  // it was first sampled, so the sums only grow); the connections' mean smoothed round trip and
  // the lowest base round trip any of them saw (0: unknown); how many connections are open, and
  // the most allowed in all.
  struct Sample {
    int64_t ms = 0;
    uint64_t acked = 0, sent = 0, resent = 0;
    uint32_t srtt_us = 0, base_rtt_us = 0;
    int conns = 0, max = 0;
  };
  // Returns how many connections to open now (0: none).
  int step(const Sample& s);
  // The caller opened fewer than asked (the server turned one away): no more growth.
  void refused() {
    stopped_ = true;
    last_.why = Stop::kRefused;
  }
  bool stopped() const { return stopped_; }
  const Phase& last() const { return last_; }

 private:
  bool stopped_ = false;
  bool have_prev_ = false;
  Phase prev_, last_;
  int phase_conns_ = 0;
  int64_t phase_start_ = 0;
  bool measuring_ = false;
  int64_t m_ms_ = 0;
  uint64_t m_acked_ = 0, m_sent_ = 0, m_resent_ = 0;
  uint32_t m_min_srtt_ = 0;  // the lowest smoothed round trip sampled while measuring
};

}  // namespace aesxfer::client
