// The TCP congestion control of a connection: --congestion auto|system|NAME,
// config key CongestionControl. On a long path with random loss, loss-based control (cubic, reno)
// halves its window at every drop and moves a fraction of what bbr, which models the path's rate
// and round trip, keeps moving; the control matters on the side that sends the data.
//
// auto: bbr where the kernel lets this process have it (TCP_CONGESTION: always with CAP_NET_ADMIN,
// otherwise only when bbr is listed in net.ipv4.tcp_allowed_congestion_control), else the host's
// default, and the reason why. system: the host's default, untouched. NAME: that control, or an
// error naming what stands in the way.
#pragma once

#include <cstdint>
#include <string>

namespace aesxfer::net {

struct Congestion {
  std::string name;  // what the connection runs (getsockopt TCP_CONGESTION after the choice)
  std::string why;   // one phrase: "auto: bbr allowed to every user ...", "bbr unavailable: ..."
  bool loss_based() const { return name == "cubic" || name == "reno"; }
};

// "" when `want` is auto, system or a name the kernel would set on a socket of this process (tried
// on a throwaway socket), else one line that says what stands in the way.
std::string check_congestion(const std::string& want);

// Applies `want` (auto, system or a name; check_congestion first) to the TCP socket fd and
// reports what it got. Never throws: a name refused here leaves the host default, said in `why`.
// auto_pick: what auto tries (bbr; the tests pick a control the host does not allow).
Congestion set_congestion(int fd, const std::string& want, const std::string& auto_pick = "bbr");

// A connection's counters from TCP_INFO (Linux's full struct, newer than glibc's): what it sent,
// what of that it sent again, and the lowest round trip it has seen (the path's base RTT, not
// inflated by its own queue). Zeros where the kernel does not report them.
struct TcpCounts {
  uint64_t bytes_sent = 0, bytes_retrans = 0;
  uint32_t min_rtt_us = 0;
};
TcpCounts tcp_counts(int fd);

// The sysctl drop-in that lets every user choose bbr (packaging/, offered, not installed active).
constexpr const char* kCongestionDropIn = "/usr/share/doc/aesxfer/examples/60-aesxfer-bbr.conf";

}  // namespace aesxfer::net
