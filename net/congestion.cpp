#include "net/congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "files/unique_fd.h"
#include "proto/failure.h"

namespace aesxfer::net {
namespace {

// The words of a /proc/sys/net/ipv4 file (space-separated names), or "" when unreadable.
std::string proc_words(const char* name) {
  std::ifstream f(std::string("/proc/sys/net/ipv4/") + name);
  std::string line;
  std::getline(f, line);
  return line;
}

bool listed(const std::string& words, const std::string& name) {
  std::istringstream is(words);
  for (std::string w; is >> w;)
    if (w == name) return true;
  return false;
}

std::string current(int fd) {
  char buf[32] = {};
  socklen_t len = sizeof buf - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buf, &len) != 0) return "?";
  return std::string(buf, ::strnlen(buf, len));
}

// Why the kernel refused `name` (errno from setsockopt TCP_CONGESTION).
std::string refusal(const std::string& name, int err) {
  if (err == EPERM)
    return name + " unavailable: not in net.ipv4.tcp_allowed_congestion_control (" +
           proc_words("tcp_allowed_congestion_control") + ") and no CAP_NET_ADMIN";
  if (err == ENOENT)
    return name + " unavailable: not in this kernel (tcp_available_congestion_control: " +
           proc_words("tcp_available_congestion_control") + ")";
  return name + " unavailable: " + std::strerror(err);
}

// A socket to try a control on before any connection exists (IPv6, else IPv4); -1 when neither.
int tcp_socket() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  return fd >= 0 ? fd : ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

// Sets name on fd: 0, or the errno.
int try_set(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), socklen_t(name.size())) == 0 ? 0 : errno;
}

}  // namespace

std::string check_congestion(const std::string& want) {
  if (want == "auto" || want == "system") return "";
  if (want.empty() || want.size() > 15)
    return "--congestion '" + proto::printable(want) + "': not a congestion control name";
  const files::UniqueFd fd(tcp_socket());
  if (!fd) return "";  // no TCP here at all: the connection will say so
  const int err = try_set(fd.get(), want);
  return err ? "--congestion " + refusal(proto::printable(want), err) : "";
}

Congestion preview_congestion(const std::string& want) {
  const files::UniqueFd fd(tcp_socket());
  if (!fd) return Congestion{"?", "no TCP socket to try it on"};
  return set_congestion(fd.get(), want);
}

Congestion set_congestion(int fd, const std::string& want, const std::string& auto_pick) {
  Congestion c;
  const std::string before = current(fd);
  if (want == "system") {
    c.name = before;
    c.why = "the host default (--congestion system)";
    return c;
  }
  const std::string name = want == "auto" ? auto_pick : want;
  if (before == name) {
    c.name = name;
    c.why = want == "auto" ? "auto: " + name + " is the host default" : "the host default";
    return c;
  }
  if (int err = try_set(fd, name)) {
    c.name = current(fd);
    c.why = "the host default; " + refusal(name, err);
    return c;
  }
  c.name = current(fd);
  std::string how = listed(proc_words("tcp_allowed_congestion_control"), name)
                        ? "allowed to every user by net.ipv4.tcp_allowed_congestion_control"
                        : "privileged (CAP_NET_ADMIN)";
  c.why = (want == "auto" ? "auto: " : "--congestion: ") + how;
  return c;
}

}  // namespace aesxfer::net
