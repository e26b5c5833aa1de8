#include "server/server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

// clang-format off
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it
#include <boost/asio.hpp>
// clang-format on

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "crypto/suite.h"
#include "crypto/util.h"
#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/keystore.h"
#include "net/congestion.h"
#include "net/conn.h"
#include "net/handshake_driver.h"
#include "net/transfer.h"
#include "proto/error.h"
#include "server/line_budget.h"
#include "server/log_value.h"
#include "server/parts.h"
#include "server/requests.h"
#include "server/root.h"
#include "server/sweep.h"
#include "server/task_limit.h"

namespace aesxfer::server {

using proto::Failure;
using namespace aesxfer::net;    // the layers below: connections and streams,
using namespace aesxfer::files;  // files and keys
namespace fs = std::filesystem;
namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Server::Impl {
  ServerOptions opt;
  std::unique_ptr<Root> root;  // every file operation goes through it
  RequestLimits limits;
  proto::ServerPolicy policy;  // opt.policy with the allow-lists of --ciphers, --macs
  proto::Identity host;
  std::array<uint8_t, 32> dir_ids{};  // dir_id_key(host), set with it
  ~Impl() { crypto::secure_zero(dir_ids.data(), dir_ids.size()); }
  std::vector<proto::PublicKey> own_keys;  // this user's identity: authorized by default
  std::string own_refused;                 // why it is not (StrictModes), or empty
  asio::io_context io;
  std::atomic<int> stop_signal{0};  // RequestContext::stop_signal
  std::mutex mu;
  // Lines that a peer who has not logged in can make the server write, each kind bounded by its
  // own LineBudget: connections turned away before the handshake, one line a second (a
  // thirteenth re-attack, H2: a loop of connects wrote 4 MB of log in 2 s); connections that fail
  // before their handshake completes (closed at once, an HTTP request, garbage), one a second (a
  // twenty-fourth, N2: 2.6 MB in 3 s from a loop that never filled the pool); refused keys, which
  // a stranger makes with any fresh key, ten a second, since each is worth its line to an operator
  // authorizing a new client (a twenty-fifth, N1: 4,771 lines in 5 s).
  LineBudget drops{1, "dropped_without_a_line"};
  LineBudget early{1, "failed_handshakes_without_a_line"};
  LineBudget refused_keys{10, "refused_keys_without_a_line"};
  // What every session of one client key shares, by the key's fingerprint (under mu; authorized
  // keys are few: the map stays as small as authorized_keys).
  struct KeyShared {
    std::shared_ptr<LineBudget> quiet_lines;    // RequestContext::quiet_lines
    std::shared_ptr<QuietBytes> quiet_bytes;    // RequestContext::quiet_bytes
    std::shared_ptr<LineBudget> hashing_lines;  // RequestContext::hashing_lines
    std::shared_ptr<MadeDirs> made_dirs;        // RequestContext::key_made_dirs
    std::shared_ptr<NameBudget> listing_names;  // RequestContext::listing_names
    std::shared_ptr<NameBudget> walk_names;     // RequestContext::walk_names
    std::shared_ptr<NameBudget> hashing;        // PrefixDigests::share_key_allowance
  };
  std::map<std::string, KeyShared> per_key;
  // One per session thread, tracked by object: the slot keeps the socket's descriptor open (the
  // session works on a dup) until its thread is joined, so the number cannot be reused by a new
  // accept while the slot is still listed, and shutdown on stop reaches the right socket.
  struct Slot {
    UniqueFd fd;
    std::string source;     // the peer's address without the port (--per-source-max-startups)
    bool in_pool = false;   // under mu: counted in startups (accepted, not yet authenticated)
    bool counted = false;   // under mu: counted in sessions (authenticated and admitted)
    bool finished = false;  // under mu
    std::thread th;
  };
  std::list<std::unique_ptr<Slot>> slots;  // under mu
  // The startups pool (sshd's MaxStartups): connections accepted whose client has not yet
  // authenticated, in all and per source address. Under mu.
  size_t startups = 0;
  std::map<std::string, size_t> startups_from;
  std::minstd_rand drop_dice{std::random_device{}()};  // random early drop; under mu
  size_t sessions = 0;   // authenticated sessions, at most opt.max_sessions; under mu
  size_t lingering = 0;  // busy refusals draining their socket; the io thread's alone
  std::mutex log_mu;
  PartsRegistry parts;                         // files moving over several connections (--streams)
  std::unique_ptr<Sweeper> sweeper;            // expires kept partial files and temporary-file debris
  ListingMemory listings;                      // what the listings in progress hold (--max-list-memory)
  std::unique_ptr<net::BufferBudget> buffers;  // the streams' record batches (--max-buffer-memory)

  // A write to the log that fails (a full disk) loses that line, not the log: the stream's error
  // is cleared and the next line that is written says how many were lost (a thirty-sixth
  // re-attack, A2: one ENOSPC set the stream's badbit, and every later line was dropped in silence
  // until a restart). Under log_mu.
  uint64_t lost_lines = 0;
  void log(const std::string& line) {
    if (!opt.log) return;
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::ostringstream stamp;
    stamp << "time=" << std::put_time(&tm, "%Y-%m-%dT%H:%M:%SZ") << " ";
    std::string text;
    std::lock_guard<std::mutex> g(log_mu);
    if (lost_lines)
      text = "\n" + stamp.str() + "msg=\"log lines lost\" lines=" + std::to_string(lost_lines) +
             " why=\"writing the log failed (a full disk?)\"\n";
    text += stamp.str() + line + "\n";
    opt.log->write(text.data(), std::streamsize(text.size()));
    opt.log->flush();
    if (opt.log->good()) {
      lost_lines = 0;
      return;
    }
    opt.log->clear();
    ++lost_lines;
  }

  fs::path authorized_keys_file() const {
    return opt.authorized_keys.empty() ? opt.home / "authorized_keys" : opt.authorized_keys;
  }
  // Read at every login, so an edit counts at once. `refused` (when given) receives why the
  // file's keys were not trusted (StrictModes, unreadable), or "".
  bool authorized(const proto::PublicKey& pk, std::string* refused = nullptr) {
    for (const auto& k : own_keys)
      if (k == pk) return true;
    std::string why;
    const auto keys = load_trusted_keys(authorized_keys_file(), why);
    if (refused) *refused = why;
    for (const auto& k : keys)
      if (k == pk) return true;
    return false;
  }

  void session(int fd, std::string peer, Slot& slot);
  // `line`, unless `budget` leaves it out this second (LineBudget).
  void log_within(LineBudget& budget, const std::string& line);
  // Under mu: "" and the connection counted in the startups pool, or why it is turned away
  // ("server busy: ..."): the per-source limit, a full pool, or the random early drop between
  // START and FULL (the drop probability rises linearly from RATE% to 100%, as sshd's).
  std::string enter_pool(const std::string& source);
  void leave_pool(Slot& slot);  // under mu; once
  // After authentication: leaves the pool and takes a session slot (true), or there is none.
  bool admit(Slot& slot);
  // Tells a connection turned away by enter_pool so (a busy ServerHello, nothing read first),
  // then drains it for at most a second and kMaxDrained bytes, so that the close does not reset
  // the connection before the client read the answer. At most kMaxLingering at once; beyond that, closed at
  // once.
  void refuse_busy(tcp::socket sock);
  // Every log line is logfmt (key=value, values that may hold a peer's or an admin's text
  // quoted); `line` is the text of one event, logged as msg="...".
  void note(const std::string& line) { log("msg=" + log_quoted(line)); }
  // A line for the log (level=warning msg="..."), and for stderr when there is no log (serve -q).
  void warn(const std::string& line) {
    if (opt.log)
      log("level=warning msg=" + log_quoted(line));
    else
      std::cerr << "aesxfer serve: " << proto::printable(line) << std::endl;  // as the log's (37th, B3)
  }
  // Compares RLIMIT_NOFILE with what --max-sessions can use, raises the soft limit where it can
  // and says so, and sets the global budget of parallel-stream files from what there is.
  void check_descriptors();
  // Compares the task limit (RLIMIT_NPROC, the cgroup's pids.max) with the threads that
  // --max-sessions and --max-startups can use, and warns when it is lower.
  void check_tasks();
  // Starts the session's thread, which owns the socket from then on; or, when no descriptor or
  // no thread is to be had, takes the connection out of the pool and says why (sock untouched).
  std::string start_session(tcp::socket& sock, const std::string& peer, const std::string& source);
  // Joins the threads of finished sessions (all: every session, waiting for them) and closes
  // their sockets.
  void reap(bool all);
  void serve_requests(Conn& c, const proto::SessionKeys& keys);
  // Opens, binds and listens on --listen / --port (IPv6 with IPv4 mapped, else IPv4).
  void open_acceptor(tcp::acceptor& acc);
  // What an admin needs to know once at start: the port, root, host key, authorized_keys and
  // what in it will never match, the allow-lists, a home under the root.
  void log_start(uint16_t port);
  // Accepts until io stops; out of descriptors or memory backs off (10 ms doubling to 1 s)
  // instead of re-arming at once, which would spin on the same failure.
  void accept_loop(tcp::acceptor& acc, asio::steady_timer& backoff, std::chrono::milliseconds& delay);
};

namespace {

// "N:N:...": the numbers of sshd's colon-separated settings (each 1 to 9 digits), or nullopt.
std::optional<std::vector<uint64_t>> colon_numbers(const std::string& text) {
  std::vector<uint64_t> v;
  for (size_t at = 0;;) {
    const size_t colon = std::min(text.find(':', at), text.size());
    const std::string part = text.substr(at, colon - at);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    v.push_back(std::stoull(part));
    if (colon == text.size()) return v;
    at = colon + 1;
  }
}

// The source an accepted peer counts for (source_block, without a round trip through text).
std::string source_of(asio::ip::address a, unsigned v4_bits, unsigned v6_bits) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  if (a.is_v4()) {
    if (v4_bits >= 32) return a.to_string();
    const uint32_t mask = v4_bits == 0 ? 0 : ~uint32_t(0) << (32 - v4_bits);
    return asio::ip::address_v4(a.to_v4().to_uint() & mask).to_string() + "/" + std::to_string(v4_bits);
  }
  if (v6_bits >= 128) return a.to_string();
  asio::ip::address_v6::bytes_type b = a.to_v6().to_bytes();
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned keep = v6_bits > 8 * i ? std::min(8u, v6_bits - 8 * i) : 0;
    b[i] &= uint8_t(0xff00u >> keep);
  }
  return asio::ip::address_v6(b).to_string() + "/" + std::to_string(v6_bits);
}

}  // namespace

// Busy refusals draining at once (each a socket and a timer on the io thread, no thread).
constexpr size_t kMaxLingering = 64;
// What a busy refusal drains before it closes anyway: a client sends its ClientHello (a frame of at
// most 4100 bytes) and then reads; a peer that keeps sending is no client waiting for its answer.
// Read 512 bytes at a time without end for a second, 60 connections that blasted data at the
// drains cost the io thread 4.4 times the attacker's CPU (a forty-fifth re-attack, A45-3).
constexpr size_t kMaxDrained = 16384;

std::string Server::Impl::enter_pool(const std::string& source) {
  const size_t from = startups_from.count(source) ? startups_from[source] : 0;
  const std::string spec = std::to_string(opt.startups_begin) + ":" + std::to_string(opt.startups_rate) +
                           ":" + std::to_string(opt.max_startups);
  if (opt.per_source_max_startups > 0 && from >= opt.per_source_max_startups)
    return "server busy: " + std::to_string(from) + " unauthenticated connections from " + source +
           " already (--per-source-max-startups " + std::to_string(opt.per_source_max_startups) + ")";
  if (startups >= opt.max_startups)
    return "server busy: " + std::to_string(startups) +
           " unauthenticated connections already (--max-startups " + spec + ")";
  if (startups >= opt.startups_begin) {
    // max_startups > startups >= startups_begin here, so the span is not zero.
    const size_t p = opt.startups_rate + (100 - opt.startups_rate) * (startups - opt.startups_begin) /
                                             (opt.max_startups - opt.startups_begin);
    if (drop_dice() % 100 < p)
      return "server busy: random early drop at " + std::to_string(startups) +
             " unauthenticated connections (--max-startups " + spec + ")";
  }
  ++startups;
  ++startups_from[source];
  return "";
}

void Server::Impl::leave_pool(Slot& slot) {
  if (!slot.in_pool) return;
  slot.in_pool = false;
  --startups;
  if (--startups_from[slot.source] == 0) startups_from.erase(slot.source);
}

bool Server::Impl::admit(Slot& slot) {
  std::lock_guard<std::mutex> g(mu);
  leave_pool(slot);
  if (sessions >= opt.max_sessions) return false;
  ++sessions;
  slot.counted = true;
  return true;
}

void Server::Impl::refuse_busy(tcp::socket sock) {
  static const std::vector<uint8_t> hello = proto::busy_server_hello();
  // A fresh socket's send buffer takes the 179 bytes at once; the client reads them after its
  // ClientHello, whenever that is.
  (void)::send(sock.native_handle(), hello.data(), hello.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  boost::system::error_code ec;
  sock.shutdown(tcp::socket::shutdown_send, ec);
  if (lingering >= kMaxLingering) return;  // closed by sock's destructor
  // Each pending handler holds the Drain; nothing else does, so a stop that destroys the
  // handlers unread frees it too (a self-referring read function leaked here under LSan).
  struct Drain : std::enable_shared_from_this<Drain> {
    tcp::socket sock;
    asio::steady_timer timer;
    std::array<char, 4096> buf{};
    size_t drained = 0;
    size_t& lingering;
    Drain(tcp::socket s, asio::io_context& io, size_t& l) : sock(std::move(s)), timer(io), lingering(l) {}
    void read() {
      sock.async_read_some(asio::buffer(buf),
                           [self = shared_from_this()](const boost::system::error_code& e, size_t n) {
                             if (!e && (self->drained += n) <= kMaxDrained) return self->read();
                             self->timer.cancel();  // its handler closes the socket
                             --self->lingering;
                           });
    }
  };
  auto d = std::make_shared<Drain>(std::move(sock), io, lingering);
  ++lingering;
  d->timer.expires_after(std::chrono::seconds(1));
  d->timer.async_wait([d](const boost::system::error_code&) {
    boost::system::error_code ce;
    d->sock.close(ce);  // ends the read below
  });
  d->read();
}

std::string Server::Impl::start_session(tcp::socket& sock, const std::string& peer,
                                        const std::string& source) {
  auto slot = std::make_unique<Slot>();
  slot->source = source;
  slot->in_pool = true;  // enter_pool counted it
  Slot* sp = slot.get();
  const int conn_fd = ::fcntl(sock.native_handle(), F_DUPFD_CLOEXEC, 0);
  const int dup_errno = errno;
  std::lock_guard<std::mutex> g(mu);
  if (conn_fd < 0) {
    leave_pool(*sp);
    return "server busy: no descriptor for a session (" + errno_text(dup_errno) + ")";
  }
  UniqueFd conn(conn_fd);  // the session's thread owns it once it runs
  try {
    sp->th = std::thread([this, sp, conn_fd, peer] {
      session(conn_fd, peer, *sp);  // closes conn_fd
      if (opt.on_session_end) opt.on_session_end(conn_fd);
      {
        std::lock_guard<std::mutex> lg(mu);
        ::shutdown(sp->fd.get(), SHUT_RDWR);  // the peer sees the end now; the descriptor closes at reap
        sp->finished = true;
        leave_pool(*sp);
        if (sp->counted) --sessions;
      }
      // The accept loop's thread joins this one and closes its socket (after a stop, run() does).
      asio::post(io, [this] { reap(false); });
    });
  } catch (const std::system_error& te) {  // no thread to be had (the task limit): refused busy
    leave_pool(*sp);                       // conn closes the duplicate; the caller keeps sock
    return std::string("server busy: no thread for a session (") + te.what() + ")";
  }
  conn.release();
  // The thread waits for mu before it touches the slot's descriptor.
  boost::system::error_code ec;
  sp->fd.reset(sock.release(ec));
  slots.push_back(std::move(slot));
  return "";
}

void Server::Impl::check_descriptors() {
  // Per session: the socket and its dup, a file, a directory fd or two; the parallel-stream
  // files are counted separately (kMaxParts per session at most, one budget for all).
  constexpr uint64_t kBase = 64, kPerSession = 6, kPerStartup = 2;
  const uint64_t sessions_max = opt.max_sessions;
  const uint64_t pool = kPerStartup * opt.max_startups + kMaxLingering;
  const uint64_t want = kBase + pool + sessions_max * (kPerSession + proto::kMaxParts);
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min<rlim_t>(want, rl.rlim_max);
    if (raised.rlim_cur > rl.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      note("raised the open-file limit (RLIMIT_NOFILE) from " + std::to_string(rl.rlim_cur) + " to " +
           std::to_string(raised.rlim_cur) + " for --max-sessions " + std::to_string(opt.max_sessions));
      rl = raised;
    }
  }
  uint64_t have = rl.rlim_cur == RLIM_INFINITY ? want : uint64_t(rl.rlim_cur);
  if (have < want)
    warn("warning: the open-file limit (" + std::to_string(have) + ") is below the " + std::to_string(want) +
         " that --max-sessions " + std::to_string(opt.max_sessions) +
         " can use; parallel-stream files get what is left, and accepts back off when none is");
  uint64_t fixed = kBase + pool + sessions_max * kPerSession;
  parts.set_max_files(std::min(opt.max_part_files, have > fixed ? have - fixed : 0));
}

void Server::Impl::check_tasks() {
  // The io thread; a thread per connection in the pool or in a session; one more (the file
  // reader or writer) per session moving a file.
  const uint64_t want = 1 + opt.max_startups + 2 * uint64_t(opt.max_sessions);
  const auto limit = task_limit();
  if (limit && limit->max < want)
    warn("warning: the task limit (" + std::to_string(limit->max) + ", " + limit->what + ") is below the " +
         std::to_string(want) + " threads that --max-sessions " + std::to_string(opt.max_sessions) +
         " and --max-startups " + std::to_string(opt.max_startups) +
         " can use; connections beyond it are turned away busy");
}

void Server::Impl::reap(bool all) {
  std::list<std::unique_ptr<Slot>> done;
  {
    std::lock_guard<std::mutex> g(mu);
    for (auto it = slots.begin(); it != slots.end();) {
      auto next = std::next(it);
      if (all || (*it)->finished) done.splice(done.end(), slots, it);
      it = next;
    }
  }
  for (auto& slot : done) {
    if (slot->th.joinable()) slot->th.join();
    slot->fd.reset();
  }
}

void Server::Impl::session(int fd, std::string peer, Slot& slot) {
  Conn c(fd, opt.timeout, peer);
  // Where the session's failure line is counted: before the handshake completes and for a refused
  // key, a budget; after login, none (every failure gets its line).
  LineBudget* budget = &early;
  try {
    // The handshake's verdict, and why no key of the file was trusted, are the login's: the file
    // is read once a connection (a forty-eighth re-attack, A48-1: twice for every stranger, 19.5
    // ms of CPU a connection with 10,000 keys).
    std::string untrusted;
    proto::ServerHandshake hs(
        host, [this, &untrusted](const proto::PublicKey& pk) { return authorized(pk, &untrusted); }, policy);
    // One deadline for the whole handshake (the per-read timeout alone would let a client that
    // sends one byte per second hold a session slot for ever).
    HandshakeLimits lim;
    lim.total = opt.handshake_timeout;
    proto::Step st = drive_handshake(c, hs, lim);
    if (st.ec && st.ec != proto::errc::unauthorized)
      throw Failure("handshake failed: " + st.ec.message() + (st.detail.empty() ? "" : ": " + st.detail));
    tune_for_path(fd);
    set_congestion(fd, opt.congestion);
    proto::SessionKeys& keys = hs.keys();
    c.start_records(keys, false);
    proto::Message w;
    w.type = proto::MsgType::welcome;
    if (const std::string& why = untrusted; !hs.authorized()) {
      // Within the refused keys' budget from here, the Welcome's send too: a peer that reset the
      // connection right after its ClientAuth had every failed send logged, 1,560 lines a second
      // (a forty-first re-attack, A-F1).
      budget = &refused_keys;
      w.status = proto::Status::refused;
      w.text = "client key " + proto::fingerprint(keys.client_key) + " is not authorized on this server";
      c.send_message(w);
      throw Failure("refused unauthorized client key " + proto::fingerprint(keys.client_key) +
                    (why.empty() ? "" : "; no key of authorized_keys is trusted: " + why));
    }
    budget = nullptr;  // an authorized key: every failure from here gets its line
    if (root->removed()) {
      // Whatever is at the path now is not what the server was started to serve: refused, and
      // logged at each login, until the server is restarted (a deleted root would otherwise
      // take puts that vanish and list nothing). not_found, not refused: the client's advice to
      // authorize its key belongs to a refused key only (a twenty-fifth re-attack, N1b).
      w.status = proto::Status::not_found;
      w.text = "the server's root directory was removed after the server started (restart it)";
      c.send_message(w);
      throw Failure("refused: the root directory " + printable(root->real().string()) +
                    " was removed after the server started; restart the server to serve it again");
    }
    if (!admit(slot)) {
      w.status = proto::Status::busy;
      w.text = "server busy: " + std::to_string(opt.max_sessions) +
               (opt.max_sessions == 1 ? " session" : " sessions") + " already (--max-sessions)";
    }
    c.send_message(w);
    if (w.status != proto::Status::ok) throw Failure("refused: too many sessions");
    // Who: every later line of this session carries the same peer= (a fifteenth re-attack, K3:
    // nothing in the log said which of the authorized keys had done what).
    log("peer=" + peer + " msg=accepted key=" + proto::fingerprint(keys.client_key) +
        " cipher=" + keys.cipher->name + " mac=" + crypto::mac_label(keys.cipher, keys.mac));
    serve_requests(c, keys);
  } catch (const Failure& f) {
    const std::string line = "peer=" + peer + " error=" + log_quoted(failure_text(&stop_signal, f));
    budget ? log_within(*budget, line) : log(line);
  } catch (const std::exception& e) {
    const std::string line = "peer=" + peer + " error=" + log_quoted(e.what());
    budget ? log_within(*budget, line) : log(line);
  }
}

void Server::Impl::log_within(LineBudget& budget, const std::string& line) {
  if (const auto suffix = budget.take()) log(line + *suffix);
}

void Server::Impl::serve_requests(Conn& c, const proto::SessionKeys& keys) {
  RequestContext ctx{c,     keys,     *root,    limits,
                     parts, *sweeper, listings, [this](const std::string& l) { log(l); }};
  ctx.stop_signal = &stop_signal;
  ctx.dir_id_key = &dir_ids;
  c.set_buffer_budget(buffers.get());  // every stream of the session
  {
    std::lock_guard<std::mutex> g(mu);
    auto [at, fresh] = per_key.try_emplace(proto::fingerprint(keys.client_key));
    KeyShared& k = at->second;
    if (fresh)
      k = {quiet_line_budget(),
           std::make_shared<QuietBytes>(),
           hashing_line_budget(),
           std::make_shared<MadeDirs>(),
           listing_name_budget(limits.max_list_entries),
           listing_name_budget(limits.max_list_entries),
           probe_hash_allowance(limits.max_probe_hash)};
    ctx.quiet_lines = k.quiet_lines;
    ctx.quiet_bytes = k.quiet_bytes;
    ctx.hashing_lines = k.hashing_lines;
    ctx.key_made_dirs = k.made_dirs;
    ctx.listing_names = k.listing_names;
    ctx.walk_names = k.walk_names;
    ctx.digests.share_key_allowance(k.hashing);
  }
  server::serve_requests(ctx);
}

// The port file, in two steps around the start lines. First, before them, its directory opened
// once by the kernel's rule for links in sticky directories, whatever the sysctls say (a
// twenty-sixth re-attack, N2: another user's link partway along the path chose the directory, and
// two lookups by name could differ), and its temporary file made there: a path that is refused
// stops the server before it logs "listening" (a twenty-seventh, N1). Then, after them, the port
// written and the file renamed over `path` (files::AtomicFile: a symlink planted at the name is
// replaced, never followed).
static std::string port_file_shown(const fs::path& path) { return "--port-file " + printable(path.string()); }

static std::unique_ptr<files::AtomicFile> open_port_file(const fs::path& path) {
  try {
    const UniqueFd dir = files::open_guarded_parent(path);
    return std::make_unique<files::AtomicFile>(dir.get(), path.filename().string(), path);
  } catch (const Failure& f) {
    throw Failure(port_file_shown(path) + ": " + f.what());
  }
}

static void write_port_file(files::AtomicFile& out, const fs::path& path, uint16_t port) {
  try {
    const std::string text = std::to_string(port) + "\n";
    if (::write(out.fd(), text.data(), text.size()) != ssize_t(text.size())) throw Failure(errno_text(errno));
    out.commit(files::FileMode(0644));
  } catch (const Failure& f) {
    throw Failure(port_file_shown(path) + ": " + f.what());
  }
}

// serve --ciphers, --macs: names checked now (Failure for an unknown one), compared by canonical
// name during each handshake.
// One allow-list: the canonical names of `given` (Failure for an unknown one), as a predicate;
// an empty list allows everything.
template <typename Desc>
static std::function<bool(const Desc&)> allow_list(const std::vector<std::string>& given,
                                                   const Desc* (*find)(std::string_view) noexcept,
                                                   const std::string& option, const std::string& noun,
                                                   const std::string& known) {
  if (given.empty()) return nullptr;
  std::set<std::string> names;
  for (const auto& n : given) {
    const Desc* d = find(n);
    if (!d)
      throw Failure("--" + option + ": unknown " + noun + " " + printable(n) + " (known: " + known + ")");
    names.insert(d->name);
  }
  return [names](const Desc& d) { return names.count(d.name) > 0; };
}

// serve --ciphers, --macs: names checked now, compared by canonical name in each handshake.
static proto::ServerPolicy allow_lists(const ServerOptions& opt) {
  proto::ServerPolicy p = opt.policy;
  p.cipher_allowed = allow_list<crypto::CipherDesc>(opt.ciphers, crypto::find_cipher, "ciphers", "cipher",
                                                    crypto::cipher_names());
  p.mac_allowed = allow_list<crypto::MacDesc>(opt.macs, crypto::find_mac, "macs", "MAC", crypto::mac_names());
  return p;
}

// strict_modes_problem for a key file of the server's home, or "".
static std::string key_file_problem(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return "cannot check " + file.string() + ": " + errno_text(errno);
  return strict_modes_problem(file, st);
}

Server::Server(const ServerOptions& opt) : impl_(std::make_unique<Impl>()) {
  impl_->opt = opt;
  impl_->policy = allow_lists(opt);
  // The keys first: they create $AESXFER_HOME on a first start, and the root hides the home only
  // once it exists (it is found by device and inode), so `cd ~ && aesxfer serve` never serves it.
  // Both are checked as authorized_keys is (sshd's StrictModes): a host key another local user
  // could have planted or can replace is refused (as sshd refuses an unprotected host key), and
  // an own identity such a user could swap is not trusted for logins.
  // A key file that is there is judged before it is read (reading one of another user's fails).
  auto problem = [](const fs::path& f) {
    struct stat st {};
    return ::lstat(f.c_str(), &st) == 0 ? key_file_problem(f) : std::string();
  };
  if (std::string p = problem(opt.home / "host_ed25519"); !p.empty()) throw Failure("host key: " + p);
  // The home's way too, before anything is made in it: a first start under a directory another
  // local user owns or can write to wrote the host key there, then refused it (a thirty-second
  // re-attack, A-N5). Its deepest existing directory, as authorized_keys is judged; a link there
  // is left to the home's own walk, which names it (files::make_private_home).
  {
    fs::path there = opt.home;
    std::error_code ec;
    while (!fs::exists(fs::symlink_status(there, ec)) && there.has_relative_path())
      there = there.parent_path();
    struct stat st {};
    if (::lstat(there.c_str(), &st) == 0 && !S_ISLNK(st.st_mode))
      if (std::string p = strict_modes_problem(there, st); !p.empty())
        throw Failure("AESXFER_HOME " + printable(opt.home.string()) + ": " + p);
  }
  impl_->host = load_or_create_identity(opt.home / "host_ed25519");
  impl_->dir_ids = dir_id_key(impl_->host);
  if (std::string p = key_file_problem(opt.home / "host_ed25519"); !p.empty())
    throw Failure("host key: " + p);
  impl_->own_refused = problem(opt.home / "id_ed25519");
  if (impl_->own_refused.empty()) {
    const proto::PublicKey own = load_or_create_identity(opt.home / "id_ed25519").pk;
    impl_->own_refused = key_file_problem(opt.home / "id_ed25519");
    if (impl_->own_refused.empty()) impl_->own_keys.push_back(own);
  }
  // The home and, when it is kept elsewhere, the authorized_keys file (found if it exists now).
  impl_->root =
      std::make_unique<Root>(opt.root, std::vector<std::filesystem::path>{opt.home, opt.authorized_keys});
  impl_->limits.max_list_entries = opt.max_list_entries;
  impl_->limits.max_probe_hash = opt.max_probe_hash;
  impl_->limits.max_list_memory = opt.max_list_memory;
  impl_->buffers = std::make_unique<net::BufferBudget>(opt.max_buffer_memory);
  impl_->sweeper = std::make_unique<Sweeper>(opt.partial_max_age);
}

Server::~Server() = default;

void Server::Impl::open_acceptor(tcp::acceptor& acc) {
  boost::system::error_code ec;
  tcp::endpoint ep;
  if (opt.listen.empty()) {
    ep = tcp::endpoint(tcp::v6(), opt.port);
  } else {
    auto addr = asio::ip::make_address(opt.listen, ec);
    if (ec) throw Failure("--listen " + printable(opt.listen) + ": not an IP address");
    ep = tcp::endpoint(addr, opt.port);
  }
  acc.open(ep.protocol(), ec);
  if (ec && opt.listen.empty()) {  // no IPv6 on this machine
    ep = tcp::endpoint(tcp::v4(), opt.port);
    acc.open(ep.protocol(), ec);
  }
  if (ec) throw Failure("cannot open a socket: " + ec.message());
  acc.set_option(tcp::acceptor::reuse_address(true));
  if (ep.protocol() == tcp::v6() && opt.listen.empty()) acc.set_option(asio::ip::v6_only(false), ec);
  acc.bind(ep, ec);
  if (ec) throw Failure("cannot listen on port " + std::to_string(opt.port) + ": " + ec.message());
  acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Failure("cannot listen: " + ec.message());
}

void Server::Impl::log_start(uint16_t port) {
  log("msg=listening port=" + std::to_string(port) + " root=" + log_quoted(root->real().string()) +
      " resolver=" + (root->uses_openat2() ? "openat2" : "walk") +
      " host_key=" + proto::fingerprint(host.pk) + " max_sessions=" + std::to_string(opt.max_sessions) +
      " max_startups=" + std::to_string(opt.startups_begin) + ":" + std::to_string(opt.startups_rate) + ":" +
      std::to_string(opt.max_startups) +
      " per_source_max_startups=" + std::to_string(opt.per_source_max_startups) + " per_source_netblock=" +
      std::to_string(opt.source_v4_bits) + ":" + std::to_string(opt.source_v6_bits));
  const Congestion cc = preview_congestion(opt.congestion);
  log("msg=\"congestion control for the data this server sends\" congestion=" + cc.name +
      " why=" + log_quoted(cc.why));
  const fs::path ak = authorized_keys_file();
  std::vector<std::string> problems;
  std::string refused;
  const size_t n = load_trusted_keys(ak, refused, &problems).size();
  std::error_code ec;
  log("authorized_keys=" + log_quoted(ak.string()) + " keys=" + std::to_string(n) + " note=" +
      log_quoted(std::string(!refused.empty()     ? "not trusted; "
                             : fs::exists(ak, ec) ? ""
                                                  : "the file does not exist yet; ") +
                 (own_refused.empty() ? "this user's own identity is accepted too"
                                      : "this user's own identity is not accepted")));
  if (!refused.empty()) warn("no key of authorized_keys is trusted: " + refused);
  if (!own_refused.empty()) warn("this user's own identity is not trusted for logins: " + own_refused);
  for (const auto& p : problems) warn(p);
  check_descriptors();
  check_tasks();
  auto join = [](const std::vector<std::string>& v) {
    std::string r;
    for (const auto& x : v) r += (r.empty() ? "" : ",") + x;
    return r;
  };
  if (!opt.ciphers.empty() || !opt.macs.empty())
    log("allowed_ciphers=" + log_quoted(opt.ciphers.empty() ? std::string("all") : join(opt.ciphers)) +
        " allowed_macs=" + log_quoted(opt.macs.empty() ? std::string("all") : join(opt.macs)));
  for (const auto& h : root->hides())
    warn("warning: " + std::string(h == opt.home ? "AESXFER_HOME" : "--authorized-keys") + " (" + h.string() +
         ") lies under --root; it is never served, listed or overwritten");
}

void Server::Impl::accept_loop(tcp::acceptor& acc, asio::steady_timer& backoff,
                               std::chrono::milliseconds& delay) {
  acc.async_accept([&](const boost::system::error_code& e, tcp::socket sock) {
    reap(false);
    if (e == asio::error::operation_aborted) return;
    if (e) {
      const int v = e.value();
      if (v == EMFILE || v == ENFILE || v == ENOBUFS || v == ENOMEM) {
        if (delay == std::chrono::milliseconds(10))
          note("accept failed: " + e.message() +
               "; retrying with back-off (see --max-sessions and ulimit -n)");
        backoff.expires_after(delay);
        backoff.async_wait([&](const boost::system::error_code& te) {
          if (!te) accept_loop(acc, backoff, delay);
        });
        delay = std::min(delay * 2, std::chrono::milliseconds(1000));
        return;
      }
      accept_loop(acc, backoff, delay);
      return;
    }
    delay = std::chrono::milliseconds(10);
    boost::system::error_code pe;
    auto rep = sock.remote_endpoint(pe);
    const std::string peer =
        pe ? "?"
           : (rep.address().is_v6() ? "[" + rep.address().to_string() + "]" : rep.address().to_string()) +
                 ":" + std::to_string(rep.port());
    const std::string source = pe ? "?" : source_of(rep.address(), opt.source_v4_bits, opt.source_v6_bits);
    std::string busy;
    {
      std::lock_guard<std::mutex> g(mu);
      busy = enter_pool(source);
    }
    if (busy.empty()) {
      tune_socket(sock.native_handle());
      // A connection the process has no thread for is turned away as one over the pool is: a
      // busy ServerHello and a line within the same budget (a forty-first re-attack, A-F1b: past
      // the task limit every connect wrote a line, and a client read "closed the connection").
      busy = start_session(sock, peer, source);
    }
    if (!busy.empty()) {
      log_within(drops,
                 "peer=" + peer + " error=" + log_quoted(busy + "; connection dropped before the handshake"));
      refuse_busy(std::move(sock));
    }
    accept_loop(acc, backoff, delay);
  });
}

void Server::run() {
  Impl& s = *impl_;
  // A peer that vanishes must cost one session, not the process: writes report EPIPE instead.
  ::signal(SIGPIPE, SIG_IGN);
  tcp::acceptor acc(s.io);
  s.open_acceptor(acc);
  port_ = acc.local_endpoint().port();
  asio::signal_set signals(s.io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& e, int sig) {
    if (!e) {
      s.note(std::string("stopping on ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
      s.stop_signal = sig;
      stop();
    }
  });
  std::unique_ptr<files::AtomicFile> port_file;
  if (!s.opt.port_file.empty()) port_file = open_port_file(s.opt.port_file);
  s.log_start(port_);
  // The port file last: whoever waits for it (a test, a service script) finds the start lines
  // written and SIGTERM already handled (before, a stop sent at once killed the process mid-start).
  if (port_file) write_port_file(*port_file, s.opt.port_file, port_);
  port_file.reset();
  asio::steady_timer backoff(s.io);
  auto delay = std::chrono::milliseconds(10);
  s.accept_loop(acc, backoff, delay);
  s.io.run();
  int running = 0;
  s.stop_signal.compare_exchange_strong(running, -1);  // stopped by stop(), not a signal
  boost::system::error_code ec;
  acc.close(ec);
  // Wake every session still running (each removes its temporary file as it unwinds), then join
  // them all: no session thread outlives run().
  {
    std::lock_guard<std::mutex> g(s.mu);
    for (auto& slot : s.slots) ::shutdown(slot->fd.get(), SHUT_RDWR);
  }
  s.reap(true);
}

void Server::stop() { impl_->io.stop(); }

std::string parse_netblock(const std::string& text, ServerOptions& opt) {
  auto v = colon_numbers(text);
  if (v && v->size() == 1) v->push_back(128);  // "V4" alone: IPv6 addresses each their own, as sshd
  if (!v || v->size() != 2 || (*v)[0] < 1 || (*v)[0] > 32 || (*v)[1] < 1 || (*v)[1] > 128)
    return "expected V4:V6, prefix lengths 1..32 and 1..128 (as sshd's PerSourceNetBlockSize), got '" +
           printable(text) + "'";
  opt.source_v4_bits = unsigned((*v)[0]);
  opt.source_v6_bits = unsigned((*v)[1]);
  return "";
}

std::string source_block(const std::string& address, unsigned v4_bits, unsigned v6_bits) {
  boost::system::error_code ec;
  const asio::ip::address a = asio::ip::make_address(address, ec);
  return ec ? address : source_of(a, v4_bits, v6_bits);
}

std::string parse_max_startups(const std::string& text, ServerOptions& opt) {
  auto v = colon_numbers(text);
  if (!v)
    return "expected START:RATE:FULL or N (numbers, as sshd's MaxStartups), got '" + printable(text) + "'";
  if (v->size() == 1) v = std::vector<uint64_t>{(*v)[0], 100, (*v)[0]};
  if (v->size() != 3) return "expected START:RATE:FULL or N, got '" + printable(text) + "'";
  if ((*v)[2] == 0) return "FULL must be at least 1";
  if ((*v)[1] > 100) return "RATE is a percentage (0..100)";
  if ((*v)[0] > (*v)[2]) return "START must not be above FULL";
  opt.startups_begin = (*v)[0];
  opt.startups_rate = unsigned((*v)[1]);
  opt.max_startups = (*v)[2];
  return "";
}

}  // namespace aesxfer::server
