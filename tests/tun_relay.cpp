#include "tests/tun_relay.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

namespace aesxfer::test {
namespace {

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A packet in the ring: this header, then `len` bytes, the whole rounded up to kAlign.
struct Entry {
  int64_t due_ns;
  uint32_t len;  // kWrap: nothing more before the ring's end
  uint32_t pad;
};
constexpr uint32_t kWrap = 0xffffffffu;
constexpr uint64_t kAlign = sizeof(Entry);

uint64_t entry_size(uint64_t len) { return kAlign + (len + kAlign - 1) / kAlign * kAlign; }

void bump_max(std::atomic<uint64_t>* m, uint64_t v) {
  if (v > m->load(std::memory_order_relaxed)) m->store(v, std::memory_order_relaxed);
}

}  // namespace

TunRelay::TunRelay(int a, int b, const LinkParams& params) : a_(a), b_(b), p_(params) {
  if (p_.queue_bytes == 0 && p_.rate_bps > 0)  // one bandwidth-delay product (the RTT: 2 delays)
    p_.queue_bytes = std::max<uint64_t>(uint64_t(p_.rate_bps / 8 * 2 * (p_.delay.count() / 1e6)), 256u << 10);
  t1_ = std::thread([this] { pump(a_, b_, &ab_, p_.seed); });
  t2_ = std::thread([this] { pump(b_, a_, &ba_, p_.seed * 0x9e3779b97f4a7c15ull + 1); });
}

TunRelay::~TunRelay() { stop(); }

void TunRelay::stop() {
  stop_ = true;
  if (t1_.joinable()) t1_.join();
  if (t2_.joinable()) t2_.join();
}

void TunRelay::blackhole(std::chrono::milliseconds d) {
  blackhole_until_ns_ = now_ns() + int64_t(d.count()) * 1000000;
}

uint64_t TunRelay::dropped() const {
  uint64_t n = 0;
  for (const LinkStats* s : {&ab_, &ba_}) n += s->lost + s->overflow + s->cut;
  return n;
}

std::string TunRelay::summary() const {
  std::ostringstream o;
  const char* names[] = {"a->b", "b->a"};
  int i = 0;
  for (const LinkStats* s : {&ab_, &ba_}) {
    o << (i ? "; " : "") << names[i] << ": " << s->packets << " packets, " << s->bytes << " bytes, "
      << s->lost << " lost, " << s->overflow << " queue drops, " << s->cut << " cut, max queue "
      << s->max_queue << " bytes, CPU " << s->cpu_us / 1000 << " ms";
    ++i;
  }
  return o.str();
}

void TunRelay::pump(int from, int to, LinkStats* st, uint64_t seed) {
  if (p_.realtime) {
    sched_param sp{};
    sp.sched_priority = 1;
    if (::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &sp) != 0) st->realtime_failed = true;
  }
  const uint64_t maxpkt = p_.max_packet;
  // The ring holds the bottleneck's queue and what is in flight behind it (rate x delay), with
  // room for the headers of small packets; without a bottleneck, a deep router buffer.
  uint64_t cap = p_.rate_bps > 0
                     ? uint64_t(p_.rate_bps / 8 * (p_.delay.count() / 1e6)) * 2 + p_.queue_bytes * 2
                     : uint64_t(64) << 20;
  cap = (std::max<uint64_t>(cap, 4u << 20) + (4u << 20)) / kAlign * kAlign;
  std::vector<uint8_t> ring(cap);
  std::vector<uint8_t> scratch(maxpkt);
  uint64_t head = 0, tail = 0;  // monotonic byte positions; offset = pos % cap
  const uint64_t thr = p_.loss >= 1 ? ~uint64_t(0) : uint64_t(std::ldexp(std::max(0.0, p_.loss), 64));
  uint64_t rng = seed | 1;
  const double ns_per_byte = p_.rate_bps > 0 ? 8e9 / p_.rate_bps : 0;
  const int64_t delay_ns = int64_t(p_.delay.count()) * 1000, slack_ns = int64_t(p_.slack.count()) * 1000;
  int64_t link_free = 0;  // when the bottleneck has sent everything queued so far
  auto at = [&](uint64_t pos) { return reinterpret_cast<Entry*>(ring.data() + pos % cap); };

  while (!stop_.load(std::memory_order_relaxed)) {
    int64_t now = now_ns();
    // 1. Everything due (or nearly): out to the other side.
    while (head != tail) {
      Entry* e = at(head);
      if (e->len == kWrap) {
        head += cap - head % cap;
        continue;
      }
      if (e->due_ns > now + slack_ns) break;
      ssize_t w = ::write(to, reinterpret_cast<uint8_t*>(e) + kAlign, e->len);
      if (w == ssize_t(e->len)) {
        st->packets.fetch_add(1, std::memory_order_relaxed);
        st->bytes.fetch_add(e->len, std::memory_order_relaxed);
      }
      head += entry_size(e->len);
    }
    // 2. What arrived: read straight into the ring.
    const bool dead = now < blackhole_until_ns_.load(std::memory_order_relaxed);
    int got = 0;
    for (int i = 0; i < 256; ++i, ++got) {
      uint64_t off = tail % cap;
      uint64_t skip = cap - off < kAlign + maxpkt ? cap - off : 0;
      bool room = cap - (tail - head) >= skip + kAlign + maxpkt;
      uint8_t* dst = room ? ring.data() + (skip ? 0 : off) + kAlign : scratch.data();
      ssize_t n = ::read(from, dst, maxpkt);
      if (n <= 0) break;
      if (!room) {
        st->overflow.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      if (dead) {
        st->cut.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;  // xorshift64*
      if (thr && rng * 0x2545f4914f6cdd1dull < thr) {
        st->lost.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      int64_t leave = now;
      if (ns_per_byte > 0) {
        int64_t start = std::max(now, link_free);
        uint64_t backlog = uint64_t(double(start - now) / ns_per_byte);
        if (backlog + uint64_t(n) > p_.queue_bytes) {
          st->overflow.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        bump_max(&st->max_queue, backlog + uint64_t(n));
        link_free = start + int64_t(double(n) * ns_per_byte);
        leave = link_free;
      }
      if (skip) {
        at(tail)->len = kWrap;
        tail += skip;
      }
      Entry* e = at(tail);
      e->due_ns = leave + delay_ns;
      e->len = uint32_t(n);
      tail += entry_size(uint64_t(n));
    }
    // 3. Sleep until the next packet is due or one arrives (10 ms at most: stop() is polled).
    // While packets flow, the wake-ups are coalesced: sleep `slack` at most and read what
    // gathered meanwhile (the TUN device queues 500 packets, 6 ms at 1 Gbit/s and MTU 1500),
    // instead of waking for every packet.
    int64_t wait = 10000000;
    if (head != tail) {
      Entry* e = at(head);
      wait = e->len == kWrap ? 0 : std::clamp<int64_t>(e->due_ns - slack_ns - now_ns(), 0, wait);
    }
    if (got > 0) {
      wait = std::min(wait, slack_ns);
      timespec ts{wait / 1000000000, wait % 1000000000};
      ::clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
    } else {
      pollfd pfd{from, POLLIN, 0};
      timespec ts{wait / 1000000000, wait % 1000000000};
      ::ppoll(&pfd, 1, &ts, nullptr);
    }
  }
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  st->cpu_us = uint64_t(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + uint64_t(ru.ru_utime.tv_usec) +
               uint64_t(ru.ru_stime.tv_usec);
}

int open_tun_in(const std::string& ns, const std::string& name, std::string* err) {
  int result = -1;
  std::thread t([&] {
    int nfd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nfd < 0 || ::unshare(CLONE_FS) != 0 || ::setns(nfd, CLONE_NEWNET) != 0) {
      *err = std::string("setns ") + ns + ": " + std::strerror(errno);
      if (nfd >= 0) ::close(nfd);
      return;
    }
    ::close(nfd);
    int fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      *err = std::string("/dev/net/tun: ") + std::strerror(errno);
      return;
    }
    ifreq ifr{};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd, TUNSETIFF, &ifr) != 0) {
      *err = std::string("TUNSETIFF ") + name + ": " + std::strerror(errno);
      ::close(fd);
      return;
    }
    result = fd;
  });
  t.join();
  return result;
}

}  // namespace aesxfer::test
