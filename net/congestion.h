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
// What every new connection will get: set_congestion on a throwaway socket (serve's start line).
Congestion preview_congestion(const std::string& want);

// The sysctl drop-in that lets every user choose bbr (packaging/, offered, not installed active).
constexpr const char* kCongestionDropIn = "/usr/share/doc/aesxfer/examples/60-aesxfer-bbr.conf";

}  // namespace aesxfer::net
