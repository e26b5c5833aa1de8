// Parallel streams (--streams N): one file as N byte ranges over N connections, for paths where a
// single TCP stream cannot fill the link (its window is capped by the socket buffer limits:
// throughput <= window / RTT). See docs/PROTOCOL.md "Parallel streams" and server/parts.h.
//
// Each range is a complete record stream of its own (own connection, own keys and sequence
// numbers) whose end record carries the SHA-256 and length of the range; a put is renamed into
// place by an explicit `commit` (sent right behind part 0's end record; the server answers it once
// every part verified), a get once every range has arrived here and verified.
//
// Auto (the default, --streams 0): one connection unless the path is long. With a smoothed round
// trip of at least kLongPathRttUs (10 ms), the client opens enough connections that their combined window
// covers kAutoRate * RTT, taking the window of one connection to be the smaller of this host's
// tcp_wmem maximum and half its tcp_rmem maximum (the autotuning caps; about half a receive buffer
// is advertised as window), at most kAutoMaxStreams, and only as many as give each part at least
// kAutoMinPart bytes. On loopback and LAN paths this is always one. The round trip is the path's
// base one (tcpi_min_rtt after the handshake), and the number is decided once per invocation: the
// connections opened for the first large file serve every later one.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "client/client.h"
#include "client/part_queue.h"
#include "client/stream_growth.h"
#include "files/atomic_file.h"
#include "files/resume.h"

namespace aesxfer::client {

using proto::Failure;

using namespace aesxfer::net;    // the layers below: connections and streams,
using namespace aesxfer::files;  // files and keys
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kAutoRate = 400e6;  // bytes/s (3.2 Gbit/s) the auto choice makes room for
constexpr int kAutoMaxStreams = 8;
constexpr uint64_t kAutoMinPart = 8u << 20;            // auto: no part smaller than 8 MiB
constexpr uint64_t kMinPart = proto::kDefaultPayload;  // explicit --streams: one record

// The third field of /proc/sys/net/ipv4/tcp_[rw]mem (the autotuning maximum), or fallback.
uint64_t sysctl_max(const char* path, uint64_t fallback) {
  std::ifstream f(path);
  uint64_t a = 0, b = 0, c = 0;
  if (f >> a >> b >> c && c > 0) return c;
  return fallback;
}

// Splits [0, size) into min(n, records) ranges of whole records (the last one ends with the
// file's partial record), as even as whole records allow.
std::vector<std::pair<uint64_t, uint64_t>> split(uint64_t size, int n) {
  const uint64_t rec = proto::kDefaultPayload;
  const uint64_t records = (size + rec - 1) / rec;
  const uint64_t parts = std::min<uint64_t>(uint64_t(std::max(n, 1)), records);
  std::vector<std::pair<uint64_t, uint64_t>> r;
  uint64_t first = 0;
  for (uint64_t i = 0; i < parts; ++i) {
    uint64_t count = records / parts + (i < records % parts ? 1 : 0);
    uint64_t begin = first * rec, end = std::min(size, (first + count) * rec);
    r.emplace_back(begin, end - begin);
    first += count;
  }
  return r;
}

// How many parts a file of `size` bytes goes in over `conns` connections: parts of kChunk bytes,
// at least one per connection and at most what the wire allows (proto::kMaxParts). The parts are
// handed out from a queue (client/part_queue.h).
constexpr uint64_t kChunk = 8u << 20;
int parts_for(uint64_t size, size_t conns) {
  return int(std::clamp<uint64_t>(size / kChunk, conns, proto::kMaxParts));
}

// The threads of one file's connections, one each; more may join while they run (Grower). The
// first failure wins; it shuts the other connections' sockets so that their parts stop at once
// instead of running to the end.
class Runners {
 public:
  ~Runners() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  // Starts f on a thread of its own for the connection whose socket is fd; false (not started)
  // once one has failed.
  // A connection `cl` whose part the server refused before any data (cl->can_continue()) leaves
  // the others running: they are refused the same way and the session goes on with the next
  // file (a twentieth re-attack, N10: a file refused under --streams ended the session).
  bool add(int fd, std::function<void()> f, const Client* cl) {
    std::lock_guard<std::mutex> g(mu_);
    if (first_) return false;
    fds_.push_back(fd);
    before_.push_back(net::tcp_counts(fd));
    threads_.emplace_back([this, fd, cl, f = std::move(f)] {
      try {
        f();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!first_) first_ = std::current_exception();
        if (!cl || !cl->can_continue())
          for (int other : fds_)
            if (other != fd) ::shutdown(other, SHUT_RDWR);
      }
    });
    return true;
  }
  bool failed() {
    std::lock_guard<std::mutex> g(mu_);
    return bool(first_);
  }
  std::vector<int> fds() {
    std::lock_guard<std::mutex> g(mu_);
    return fds_;
  }
  // Joins every thread (none may be added any more); rethrows the first failure.
  void join() {
    for (auto& t : threads_) t.join();
    if (first_) std::rethrow_exception(first_);
  }
  // Each connection's TCP counters when it joined (note_send).
  const std::vector<net::TcpCounts>& before() const { return before_; }

 private:
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<net::TcpCounts> before_;
  std::list<std::thread> threads_;
  std::exception_ptr first_;
};

// Runs f with `slot` set to v, and puts the old value back after (also when f throws).
template <class F>
auto with_value(int& slot, int v, F&& f) {
  struct Restore {
    int& s;
    int old;
    ~Restore() { s = old; }
  } restore{slot, slot};
  slot = v;
  return f();
}

// Joins a put's connections. When one failed, rethrows once `clean` (this connection's flag) says
// whether the session may go on: only if every connection stopped at a request's boundary
// (refused before any data, or after a whole part), as each one's can_continue() says.
void join_put(Runners& run, const std::vector<std::unique_ptr<Client>>& extra, bool& clean) {
  try {
    run.join();
  } catch (const Failure&) {
    for (const auto& c : extra) clean = clean && c->can_continue();
    throw;
  }
}

// Growth under loss (client/stream_growth.h): while a put's parts are still queued, samples its
// connections' TCP_INFO and, when the rule asks, calls open(k), which opens up to k connections
// more, starts them on the queue and returns how many it started.
class Grower {
 public:
  Grower(Runners& run, const PartQueue& queue, std::function<int(int)> open,
         std::function<void(const std::string&)> log)
      : run_(run), queue_(queue), open_(std::move(open)), log_(std::move(log)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Grower() { stop(); }
  // Until the thread ends by itself: every part handed out, a connection failed, or the rule
  // stopped.
  void wait() {
    if (thread_.joinable()) thread_.join();
  }
  void stop() {
    {
      std::lock_guard<std::mutex> g(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop();
  Runners& run_;
  const PartQueue& queue_;
  std::function<int(int)> open_;
  std::function<void(const std::string&)> log_;
  StreamGrowth rule_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

std::string mb(double bytes_per_s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MB/s", bytes_per_s / 1e6);
  return b;
}

// Why the growth stopped, for -v: ": a queue stands (round trip 1.4 times the base)".
std::string stop_reason(const StreamGrowth::Phase& p) {
  char b[96];
  switch (p.why) {
    case StreamGrowth::Stop::kLittleLoss:
      return ": too little loss for more connections to help";
    case StreamGrowth::Stop::kQueue:
      std::snprintf(b, sizeof b, ": a queue stands (round trip %.2f times the base)", p.rtt_ratio);
      return b;
    case StreamGrowth::Stop::kNoGain:
      return ": the connections added last brought too little";
    case StreamGrowth::Stop::kCap:
      return ": as many as the file's parts allow";
    case StreamGrowth::Stop::kRefused:
      return ": the server turned a connection away";
    case StreamGrowth::Stop::kNone:
      break;
  }
  return "";
}

void Grower::loop() {
  const auto t0 = Clock::now();
  std::map<int, net::TcpCounts> base;  // each connection's counters when first sampled
  for (;;) {
    {
      std::unique_lock<std::mutex> g(mu_);
      if (cv_.wait_for(g, std::chrono::milliseconds(StreamGrowth::kSampleMs), [this] { return done_; }))
        return;
    }
    const size_t left = queue_.left();
    if (left == 0 || run_.failed()) return;
    StreamGrowth::Sample s;
    const std::vector<int> fds = run_.fds();
    uint64_t srtt_sum = 0;
    for (int fd : fds) {
      const net::TcpCounts c = net::tcp_counts(fd);
      const net::TcpCounts& b = base.emplace(fd, c).first->second;
      s.acked += c.bytes_acked - b.bytes_acked;
      s.sent += c.bytes_sent - b.bytes_sent;
      s.resent += c.bytes_retrans - b.bytes_retrans;
      srtt_sum += c.rtt_us;
      if (c.min_rtt_us && (!s.base_rtt_us || c.min_rtt_us < s.base_rtt_us)) s.base_rtt_us = c.min_rtt_us;
    }
    const int n = int(fds.size());
    s.srtt_us = n ? uint32_t(srtt_sum / uint64_t(n)) : 0;
    s.ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    s.conns = n;
    s.max = n + int(left);
    const int want = rule_.step(s);
    const StreamGrowth::Phase& p = rule_.last();
    char resent_pct[32];
    std::snprintf(resent_pct, sizeof resent_pct, "%.2f %%", p.resent * 100);
    if (want > 0) {
      log_("streams: " + std::to_string(n) + " moved " + mb(p.rate) + " with " + resent_pct +
           " of the data sent again: opening " + std::to_string(want) +
           " more (loss, not the window, limits each)");
      if (open_(want) < want) rule_.refused();
    }
    if (rule_.stopped()) {
      log_("streams: staying at " + std::to_string(run_.fds().size()) + " (" + std::to_string(p.conns) +
           " moved " + mb(p.rate) + ", " + resent_pct + " sent again" + stop_reason(p) + ")");
      return;
    }
  }
}

// Sums the parts' progress for the caller's single callback.
class ProgressSum {
 public:
  ProgressSum(size_t n, const ProgressFn& out) : done_(n), out_(out) {}
  ProgressFn part(size_t i) {
    if (!out_) return nullptr;
    return [this, i](uint64_t d) {
      done_[i].store(d, std::memory_order_relaxed);
      uint64_t sum = 0;
      for (const auto& x : done_) sum += x.load(std::memory_order_relaxed);
      std::lock_guard<std::mutex> g(mu_);
      if (sum > last_) {
        last_ = sum;
        out_(sum);
      }
    };
  }

 private:
  std::vector<std::atomic<uint64_t>> done_;
  const ProgressFn& out_;
  std::mutex mu_;
  uint64_t last_ = 0;
};

}  // namespace

uint32_t Client::rtt_us() const { return tcp_rtt_us(conn_->fd()); }

// Growth needs the number of connections left to auto, and a loss-based control on the
// connections this client sends on (bbr keeps a lossy path full with what it has).
bool Client::grows() const { return opt_.streams == 0 && (cc_.name == "cubic" || cc_.name == "reno"); }

int Client::auto_streams() const {
  if (auto_streams_ >= 0) return auto_streams_;
  // The path's base round trip: the lowest the connection has seen (the handshake's), not the
  // smoothed one, which a file's own queue inflates (so the count is the same for every file).
  const uint32_t min_rtt = net::tcp_counts(conn_->fd()).min_rtt_us;
  const uint32_t rtt = min_rtt ? min_rtt : rtt_us();
  base_rtt_us_ = rtt;
  auto_streams_ = 1;
  if (rtt < kLongPathRttUs) return auto_streams_;
  // What one connection can have in flight: the send buffer's cap, or about half the receive
  // buffer's (the kernel advertises roughly half of it as window, the rest covers skb overhead).
  uint64_t window = std::min(sysctl_max("/proc/sys/net/ipv4/tcp_wmem", 4u << 20),
                             sysctl_max("/proc/sys/net/ipv4/tcp_rmem", 6u << 20) / 2);
  double need = kAutoRate * (rtt / 1e6) / double(window);
  auto_streams_ = std::clamp(int(std::ceil(need)), 1, kAutoMaxStreams);
  return auto_streams_;
}

int Client::streams_for(uint64_t size) {
  int n = opt_.streams;
  uint64_t min_part = kMinPart;
  if (n <= 0) {
    n = auto_streams();
    min_part = kAutoMinPart;
  }
  n = std::min<int>(n, int(proto::kMaxParts));
  n = int(std::min<uint64_t>(uint64_t(n), std::max<uint64_t>(1, size / min_part)));
  return n;
}

std::vector<std::unique_ptr<Client>> Client::connect_more(size_t need) const {
  // Opened at once, each with its own handshake. One that fails (a busy server, say) only means
  // fewer streams.
  ClientOptions o = opt_;
  o.streams = 1;  // the keylog stays: every connection's keys are logged
  o.extra_stream = true;
  std::vector<std::unique_ptr<Client>> got(need);
  std::vector<std::optional<Failure>> alarms(need);  // a host key that changed or is not known
  std::vector<std::thread> threads;
  for (size_t i = 0; i < need; ++i)
    threads.emplace_back([&, i] {
      ClientOptions oi = o;
      if (opt_.debug)  // -v: the extra connections' handshakes one level deeper (-vv), named
        oi.debug = [d = opt_.debug, k = extra_.size() + i + 2](int level, const std::string& line) {
          d(level + 1, "stream " + std::to_string(k) + ": " + line);
        };
      try {
        got[i] = std::make_unique<Client>(oi);
      } catch (const Failure& f) {
        if (f.status == proto::Status::integrity) alarms[i] = f;
        log(1, std::string("an extra connection failed: ") + f.what());
      } catch (const std::exception& e) {
        log(1, std::string("an extra connection failed: ") + e.what());
      }
    });
  for (auto& t : threads) t.join();
  // ...but a host key that changed (or that --strict-host-keys does not know) is the alarm it is on
  // the first connection: the command stops and says so (a thirty-eighth re-attack, B-F3: the
  // transfer went on over one connection, exit 0, the mismatch said only with -v).
  for (const auto& a : alarms)
    if (a) throw *a;
  got.erase(std::remove(got.begin(), got.end(), nullptr), got.end());
  return got;
}

int Client::open_extra(int want) {
  if (int(extra_.size()) + 1 >= want || extra_tried_) return int(extra_.size()) + 1;
  for (auto& c : connect_more(size_t(want - 1) - extra_.size())) extra_.push_back(std::move(c));
  log(1, "parallel streams: " + std::to_string(extra_.size() + 1) + " connections open (" +
             std::to_string(want) + " wanted)");
  if (int(extra_.size()) + 1 < want) extra_tried_ = true;  // do not retry for every file
  return int(extra_.size()) + 1;
}

// Counts a parallel put as sent whole (files::AwaitingAnswer) once every part's stream and the
// commit have gone: the commit goes out behind connection 0's last part once every part is handed
// out, while the other connections may still be sending theirs, and the file was said "sent whole"
// with a third of it still here (a fifty-fifth re-attack, C55-1 and B55-2).
struct PartsSent {
  explicit PartsSent(size_t parts) : left(parts + 1) {}
  void one() {
    if (left.fetch_sub(1) == 1) counted = files::AwaitingAnswer(true);  // the last one, once
  }
  std::atomic<size_t> left;
  files::AwaitingAnswer counted;  // read only after every worker is joined
};

crypto::Checksum Client::put_range(int fd, const proto::Message& req, const ProgressFn& progress,
                                   const proto::Message* commit, const struct stat* since, PartsSent* sent) {
  crypto::Checksum sum;
  proto::Message resp = ask_put(req);  // refused: this connection is still clean (can_continue)
  try {
    StreamOptions so{0, false, true, req.offset};
    so.since = since;
    sum = send_stream(*conn_, fd, req.length, progress, so);
    sent->one();
    if (commit) {
      conn_->send_message(*commit);  // saves a round trip at the end
      sent->one();
    }
  } catch (const Failure&) {
    throw_receivers_reason(req.path);
    throw;
  }
  expect_ok_result(req.path);
  clean_failure_ = commit == nullptr;  // at a request's boundary, unless the commit's answer is due
  return sum;
}

crypto::Checksum Client::get_range(int fd, const proto::Message& req, const ProgressFn& progress,
                                   std::string& version) {
  crypto::Checksum sum;
  proto::Message resp = ask(req);
  if (resp.size != req.size)
    throw Failure(remote_name(printable(req.path)) + ": file changed size during the transfer" + port_note());
  version = resp.text;
  proto::Message result;
  result.type = proto::MsgType::result;
  try {
    sum = recv_stream(*conn_, fd, req.length, progress, StreamOptions{0, false, true, req.offset});
  } catch (const Failure& e) {
    if (net::at_file_end(e)) send_failure_result(e);
    throw;
  }
  conn_->send_message(result);
  return sum;
}

void set_range(proto::Message& req, size_t parts) {
  req.flags |= proto::kFlagRange;
  req.nparts = uint32_t(parts);
  if (::getrandom(req.xfer_id.data(), req.xfer_id.size(), 0) != ssize_t(req.xfer_id.size()))
    throw Failure("cannot get random bytes for the transfer id");
}

// Part i of a ranged request (its bytes [range.first, range.first + range.second)).
proto::Message part_request(const proto::Message& req, size_t i, std::pair<uint64_t, uint64_t> range) {
  proto::Message part = req;
  part.part = uint32_t(i);
  part.offset = range.first;
  part.length = range.second;
  return part;
}

FileResult Client::put_parallel(int fd, const fs::path& local, proto::Message req, int n,
                                const std::function<void(uint64_t)>& on_start, const ProgressFn& progress) {
  struct stat opened {};  // every part's reads are judged against the file as it was here
  if (::fstat(fd, &opened) != 0) throw Failure(printable(local.string()) + ": " + errno_text(errno));
  n = open_extra(n);
  auto ranges = split(req.size, n);
  std::vector<Client*> conns{this};
  for (auto& c : extra_) conns.push_back(c.get());
  if (ranges.size() < 2 || conns.size() < 2)  // not worth it after all (or no second connection)
    return with_value(opt_.streams, 1, [&] { return put(local, req.path, on_start, progress); });
  const size_t nconn = std::min(ranges.size(), conns.size());
  ranges = split(req.size, parts_for(req.size, nconn));
  const size_t parts = ranges.size();
  set_range(req, parts);

  FileResult r;
  r.file = local.string();
  resume_offset_ = 0;
  if (on_start) on_start(req.size);
  auto t0 = Clock::now();
  ProgressSum sum(parts, progress);
  proto::Message commit = req;
  commit.op = proto::Op::commit;
  r.ranges.resize(parts);
  PartQueue queue(parts);
  PartsSent whole(parts);  // the file counts as sent whole once its parts and commit went
  Runners run;
  const auto worker = [&](Client* cl, size_t c) {
    bool last = false;
    for (size_t i; !run.failed() && queue.next(c, &i);) {
      const proto::Message part = part_request(req, i, ranges[i]);
      // The commit rides behind this connection's last part once every part is handed out.
      last = c == 0 && queue.empty();
      r.ranges[i] = {part.offset, part.length,
                     cl->put_range(fd, part, sum.part(i), last ? &commit : nullptr, &opened, &whole)};
    }
    if (c == 0 && !last && !run.failed()) {  // the others still move their last parts
      clean_failure_ = false;                // the commit's answer is due
      conn_->send_message(commit);
      whole.one();
    }
  };
  for (Client* cl : conns) cl->clean_failure_ = true;  // no request yet
  for (size_t c = 0; c < nconn; ++c)
    run.add(
        conns[c]->conn_->fd(), [&worker, cl = conns[c], c] { worker(cl, c); }, conns[c]);
  if (grows()) {  // more connections while parts are queued, where loss limits each
    size_t next = nconn;
    Grower grower(
        run, queue,
        [&](int k) {
          int started = 0;
          for (auto& more : connect_more(size_t(k))) {
            Client* cl = more.get();
            extra_.push_back(std::move(more));  // kept for the later files
            const size_t c = next++;
            cl->clean_failure_ = true;
            started += run.add(
                cl->conn_->fd(), [&worker, cl, c] { worker(cl, c); }, cl);
          }
          return started;
        },
        [this](const std::string& line) { log(1, line); });
    grower.wait();
  }
  join_put(run, extra_, clean_failure_);
  clean_failure_ = false;
  // Every part's Result was ok; the commit went out on this connection and is answered now.
  proto::Message resp;
  await_sent_answer(local, [&] { resp = conn_->recv_message("the commit"); });
  if (resp.type != proto::MsgType::response) throw Failure("protocol error: expected a response");
  if (resp.status != proto::Status::ok) throw refused(resp, req.path);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = req.size;
  r.record_size = conn_->record_size();
  r.verified = true;
  r.streams = int(run.fds().size());
  note_send(r, run.fds(), run.before());
  return r;
}

FileResult Client::get_parallel(const std::string& remote, const fs::path& local_in, const proto::Message& st,
                                int n, const std::function<void(uint64_t)>& on_start,
                                const ProgressFn& progress, int dirfd) {
  // `local` names the file itself: Client::get() appended the source's name to a directory, from
  // the same walk open_local() takes, never from a second lookup here.
  const fs::path& local = local_in;
  bool sink = local == "/dev/null" && dirfd == AT_FDCWD;
  std::unique_ptr<AtomicFile> out;
  if (!sink) {
    out = open_local(local, dirfd);
    if (auto full = room_refusal(out->fd(), st.size, printable(local.string()))) throw *full;  // said at once
  }
  // The extra connections only once the destination is there: one refused, or that cannot be
  // made, costs no login (a twenty-sixth re-attack, N4).
  n = open_extra(n);
  std::vector<Client*> conns{this};
  for (auto& c : extra_) conns.push_back(c.get());
  const size_t nconn =
      std::max<size_t>(1, std::min({size_t(n), conns.size(), size_t(split(st.size, n).size())}));
  auto ranges = split(st.size, parts_for(st.size, nconn));
  const size_t parts = std::max<size_t>(1, ranges.size());
  if (ranges.empty()) ranges.emplace_back(0, 0);

  proto::Message req = get_request(remote, st.size);
  set_range(req, parts);

  FileResult r;
  r.file = remote;
  if (on_start) on_start(st.size);
  auto t0 = Clock::now();
  ProgressSum sum(parts, progress);
  r.ranges.resize(parts);
  std::vector<std::string> versions(parts);  // what the server named each part's file (3.9)
  PartQueue queue(parts);
  try {
    Runners run;
    for (size_t c = 0; c < nconn; ++c)
      run.add(
          conns[c]->conn_->fd(),
          [&, cl = conns[c], c] {
            for (size_t i; queue.next(c, &i);) {
              const proto::Message part = part_request(req, i, ranges[i]);
              r.ranges[i] = {part.offset, part.length,
                             cl->get_range(out ? out->fd() : -1, part, sum.part(i), versions[i])};
            }
          },
          nullptr);
    run.join();
    // Every part from one version of the file: each range's checksum verifies what was read,
    // not that the ranges were read from the same file (a thirty-second re-attack, B-N1: a file
    // renamed over the source during recv --streams 4 arrived as a splice of both, "verified").
    for (const auto& v : versions)
      if (v != versions.front())
        throw Failure(remote_name(printable(remote)) +
                          ": file changed during the transfer (its parts were read from different "
                          "versions of it); nothing was kept" +
                          port_note(),
                      proto::Status::integrity);
    if (out) out->commit(effective_mode(st.mode, opt_.preserve), effective_mtime(st.mtime, opt_.preserve));
  } catch (const Failure& e) {
    throw Failure(printable(local.string()) + ": " + e.what(), e.status, e.err,
                  e.origin);  // a lost link stays one (--retries)
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = st.size;
  r.record_size = conn_->record_size();
  r.verified = true;
  r.streams = int(nconn);
  return r;
}

}  // namespace aesxfer::client
