// wan_relay: the WAN lab's path as a program, for bench/wan (tests/tun_relay.h).
//
// usage: wan_relay NS_A:TUN_A NS_B:TUN_B [--delay-ms D] [--rate-mbit R] [--loss P] [--queue-kb Q]
//                  [--mtu M] [--report-ms N]
// Opens the two TUN devices (one in each existing namespace /run/netns/NS), prints "ready" once
// both exist (the caller then configures addresses and brings them up), relays until SIGTERM,
// SIGINT or end of standard input, and prints one JSON line of statistics, with the relay's CPU.
// The devices go away with the process. SIGUSR1 cuts the path (every packet dropped) for 2 s.
// --report-ms N: every N ms a line "bytes MS AB BA", the bytes delivered each way so far (what
// bench/wan measures each tool by, the same way for all).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "tests/tun_relay.h"

using namespace aesxfer::test;

namespace {
volatile sig_atomic_t g_stop = 0, g_cut = 0;
void on_stop(int) { g_stop = 1; }
void on_cut(int) { g_cut = 1; }

int usage() {
  std::fprintf(stderr,
               "usage: wan_relay NS_A:TUN_A NS_B:TUN_B [--delay-ms D] [--rate-mbit R] [--loss P] "
               "[--queue-kb Q] [--mtu M] [--report-ms N]\n");
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  LinkParams p;
  int report_ms = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    double v = std::atof(argv[i + 1]);
    if (k == "--delay-ms")
      p.delay = std::chrono::microseconds(int64_t(v * 1000));
    else if (k == "--rate-mbit")
      p.rate_bps = v * 1e6;
    else if (k == "--loss")
      p.loss = v;
    else if (k == "--queue-kb")
      p.queue_bytes = uint64_t(v * 1024);
    else if (k == "--mtu")
      p.max_packet = uint32_t(v);
    else if (k == "--report-ms")
      report_ms = int(v);
    else
      return usage();
  }
  int fds[2];
  for (int i = 0; i < 2; ++i) {
    std::string spec = argv[1 + i];
    auto colon = spec.find(':');
    if (colon == std::string::npos) return usage();
    std::string err;
    fds[i] = open_tun_in(spec.substr(0, colon), spec.substr(colon + 1), &err);
    if (fds[i] < 0) {
      std::fprintf(stderr, "wan_relay: %s\n", err.c_str());
      return 1;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = on_cut;
  ::sigaction(SIGUSR1, &sa, nullptr);
  auto t0 = std::chrono::steady_clock::now();
  TunRelay relay(fds[0], fds[1], p);
  std::printf("ready\n");
  std::fflush(stdout);
  std::thread eof([] {  // the parent went away: stop
    char c;
    while (::read(0, &c, 1) > 0) {
    }
    g_stop = 1;
  });
  eof.detach();
  const int tick = report_ms > 0 ? std::min(report_ms, 20) : 20;
  auto next = t0;
  while (!g_stop) {
    if (g_cut) {
      g_cut = 0;
      relay.blackhole(std::chrono::milliseconds(2000));
    }
    auto now = std::chrono::steady_clock::now();
    if (report_ms > 0 && now >= next) {
      next = now + std::chrono::milliseconds(report_ms);
      std::printf("bytes %lld %llu %llu\n",
                  (long long)std::chrono::duration_cast<std::chrono::milliseconds>(now - t0).count(),
                  (unsigned long long)relay.a_to_b().bytes.load(),
                  (unsigned long long)relay.b_to_a().bytes.load());
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(tick));
  }
  relay.stop();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const LinkStats& ab = relay.a_to_b();
  const LinkStats& ba = relay.b_to_a();
  std::printf(
      "{\"seconds\":%.3f,\"cpu_seconds\":%.3f,\"ab_packets\":%llu,\"ab_bytes\":%llu,\"ab_lost\":%llu,"
      "\"ab_overflow\":%llu,\"ab_max_queue\":%llu,\"ba_packets\":%llu,\"ba_bytes\":%llu,\"ba_lost\":%llu,"
      "\"ba_overflow\":%llu}\n",
      secs, double(ab.cpu_us + ba.cpu_us) / 1e6, (unsigned long long)ab.packets.load(),
      (unsigned long long)ab.bytes.load(), (unsigned long long)ab.lost.load(),
      (unsigned long long)ab.overflow.load(), (unsigned long long)ab.max_queue.load(),
      (unsigned long long)ba.packets.load(), (unsigned long long)ba.bytes.load(),
      (unsigned long long)ba.lost.load(), (unsigned long long)ba.overflow.load());
  std::fflush(stdout);
  ::close(fds[0]);
  ::close(fds[1]);
  return 0;
}
