// The WAN lab's path: a user-space relay between two TUN devices, one per
// network namespace, that emulates a long, lossy link (this kernel has no netem). Per direction:
// random loss, a bottleneck of `rate_bps` with a bounded FIFO in front of it (tail drop, as a
// router's buffer), then `delay` of propagation. Packets live in one preallocated ring per direction
// (no allocation per packet), are read in batches and written when due, up to `slack` early, so a
// 1 Gbit/s path costs tens of wake-ups per millisecond, not one per packet.
//
// Used by tests/netns_test.cpp (Netns.*) and by the wan_relay program (tests/wan_relay.cpp) that
// bench/wan runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace aesxfer::test {

struct LinkParams {
  std::chrono::microseconds delay{0};     // one way
  double rate_bps = 0;                    // bits per second; 0: no bottleneck
  double loss = 0;                        // probability that a packet is dropped, in [0, 1]
  uint64_t queue_bytes = 0;               // bottleneck buffer; 0: one bandwidth-delay product
  std::chrono::microseconds slack{200};   // how early a packet may leave (fewer wake-ups)
  uint64_t seed = 0x243f6a8885a308d3ull;  // loss pattern (each direction derives its own)
  uint32_t max_packet = 65536;            // the largest packet (the TUN devices' MTU at most)
  // Run the relay's threads SCHED_FIFO (needs root; the netns tests have it), so that a loaded
  // machine does not add its scheduling delay to the path's round trip: a wire does not slow
  // down when the CPUs are busy. For tests that judge the round trip; the kernel's RT throttling
  // still leaves the rest of the machine 5 % of each second.
  bool realtime = false;
};

struct LinkStats {
  std::atomic<uint64_t> packets{0};          // forwarded
  std::atomic<uint64_t> bytes{0};            // forwarded
  std::atomic<uint64_t> lost{0};             // dropped at random
  std::atomic<uint64_t> overflow{0};         // dropped because the bottleneck's queue was full
  std::atomic<uint64_t> cut{0};              // dropped while the path was cut (blackhole)
  std::atomic<uint64_t> max_queue{0};        // the deepest the bottleneck queue got, bytes
  std::atomic<uint64_t> cpu_us{0};           // the direction's thread CPU (user + system), set at stop
  std::atomic<bool> realtime_failed{false};  // LinkParams::realtime was asked and refused
};

class TunRelay {
 public:
  // a and b: the TUN file descriptors (non-blocking; not owned). Starts one thread per direction.
  TunRelay(int a, int b, const LinkParams& params);
  ~TunRelay();
  TunRelay(const TunRelay&) = delete;
  TunRelay& operator=(const TunRelay&) = delete;

  // Stops both threads (idempotent); the stats stay readable.
  void stop();
  // Drops every packet, both ways, for `d` from now: a dead path (a middlebox losing its state).
  void blackhole(std::chrono::milliseconds d);

  const LinkStats& a_to_b() const { return ab_; }
  const LinkStats& b_to_a() const { return ba_; }
  // Drops for any reason, both directions.
  uint64_t dropped() const;
  // One line: packets, drops and CPU per direction.
  std::string summary() const;

 private:
  void pump(int from, int to, LinkStats* st, uint64_t seed);
  int a_, b_;
  LinkParams p_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> blackhole_until_ns_{0};
  LinkStats ab_, ba_;
  std::thread t1_, t2_;
};

// Opens a TUN device named `name` inside network namespace `ns` (/run/netns/NS, from a
// short-lived thread that enters it); -1 and *err on failure.
int open_tun_in(const std::string& ns, const std::string& name, std::string* err);

}  // namespace aesxfer::test
