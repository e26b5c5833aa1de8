#include "net/handshake_driver.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace aesxfer::net {

using proto::Failure;

namespace {

using Clock = std::chrono::steady_clock;

// One read under the per-read timeout and what is left of the whole handshake's.
size_t read_within(Conn& c, uint8_t* buf, size_t n, const HandshakeLimits& lim, Clock::time_point deadline,
                   std::chrono::milliseconds per_read) {
  if (lim.total == std::chrono::milliseconds::max()) return c.read_some(buf, n);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", double(lim.total.count()) / 1000);
  const std::string overdue = std::string("handshake not completed within ") + secs + " s";
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) throw Failure(overdue);
  c.set_timeout(std::min(per_read, left));
  try {
    return c.read_some(buf, n);
  } catch (const Failure&) {
    if (left < per_read) throw Failure(overdue);
    throw;
  }
}

// A timeout set for the handshake is put back however it ends.
struct TimeoutScope {
  Conn& c;
  std::chrono::milliseconds t;
  ~TimeoutScope() { c.set_timeout(t); }
};

}  // namespace

proto::Step drive_handshake(Conn& c, proto::HandshakeMachine& m, const HandshakeLimits& lim) {
  const auto start = Clock::now();
  const auto deadline =
      lim.total == std::chrono::milliseconds::max() ? Clock::time_point::max() : start + lim.total;
  TimeoutScope restore{c, c.timeout()};
  uint8_t buf[4096];
  for (bool first = true;; first = false) {
    const size_t n = read_within(c, buf, sizeof buf, lim, deadline, restore.t);
    // A lost connection (origin link), as a reset is: --retries takes it over once a session of the
    // command logged in (a thirty-sixth re-attack, B3: a retry's connection closed during the
    // handshake ended the command).
    if (n == 0)
      throw Failure::link(c.peer() + " closed the connection during the handshake" + lim.closed_hint);
    if (first && lim.first_bytes) lim.first_bytes(buf, n);
    // feed() stops at the end of each frame it completes: feed the rest too.
    for (size_t off = 0; off < n;) {
      proto::Step st = m.feed(buf + off, n - off);
      off += st.consumed;
      if (!st.send.empty()) c.write_all(st.send.data(), st.send.size());
      if (st.ec || st.done || st.check_host) {
        if (off < n) c.unread(buf + off, n - off);  // records right behind the last frame
        return st;
      }
      if (st.consumed == 0) throw Failure("handshake failed: input not consumed");
    }
  }
}

}  // namespace aesxfer::net
