#include "client/client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>

#include "client/remote.h"
#include "crypto/checksum.h"
#include "crypto/sha256.h"
#include "crypto/sha256_mb.h"
#include "crypto/util.h"
#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/io.h"
#include "files/keystore.h"
#include "files/resume.h"
#include "files/unique_fd.h"
#include "net/handshake_driver.h"
#include "proto/error.h"
#include "proto/ops.h"

namespace aesxfer::client {

using proto::Failure;

using namespace aesxfer::net;    // the layers below: connections and streams,
using namespace aesxfer::files;  // files and keys
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// The first bytes a server sent, when they cannot start an aesxfer handshake frame (a u32 length
// of at most 4096 begins with two zero bytes): the start of its first line, for the message
// "HOST:PORT is not an aesxfer server (it sent "SSH-2.0-OpenSSH_9.2p1")", quoted as the peer's
// words are (a '"' of its own escaped). Empty otherwise.
std::string foreign_greeting(const uint8_t* p, size_t n) {
  if (n < 2 || (p[0] == 0 && p[1] == 0)) return "";
  std::string line(reinterpret_cast<const char*>(p), std::min<size_t>(n, 60));
  line = line.substr(0, line.find_first_of("\r\n"));
  return proto::quoted(line);
}

}  // namespace

Failure answer_lost(const Failure& f, const fs::path& local, bool acknowledged) {
  Failure g = f.reworded(printable(local.string()) +
                         (acknowledged ? ": sent whole, no answer came ("
                                       : ": written whole, but the connection failed before all of it was "
                                         "acknowledged (") +
                         f.what() + "): whether the server put it in place is not known");
  g.maybe_placed = true;
  g.end_acknowledged = acknowledged;
  return g;
}

// The server's word for where it keeps what arrives of a resumable put (its ok Response's text,
// PROTOCOL.md 3.6), when that is the partial name beside the destination typed: REMOTE/.NAME.
// (REMOTE a directory) or the one of REMOTE itself, printable as it is. Else "" (a forty-second
// re-attack, B-F2: a hostile server's text, unchecked in the Ctrl-C line, pushed out its head and
// forged its clauses, "removed the temporary file of /root/thesis.pdf; kept /root/.ssh/...").
std::string kept_partial_text(const std::string& text, const std::string& remote, const std::string& name) {
  if (text.empty() || text.size() > proto::kMaxPath || printable(text) != text) return "";
  const fs::path t(text);
  const std::string dir = normal_request(t.parent_path().string()), last = t.filename().string();
  const std::string r = normal_request(remote);
  if (!name.empty() && dir == r && last == files::partial_name(name)) return text;
  const fs::path rp(r);
  if (r != "." && dir == normal_request(rp.parent_path().string()) &&
      last == files::partial_name(rp.filename().string()))
    return text;
  return "";
}

namespace {

// A failure of a file whose partial file was passed over says so, and that a retry starts it from
// its first byte (a thirty-sixth re-attack, B10: the note was said only of a file that arrived,
// and each retry said "resuming" while it fetched the file from 0 again).
Failure passed_over(const Failure& f, const std::string& not_resumed) {
  if (not_resumed.empty()) return f;
  Failure g = f.reworded(std::string(f.what()) + " (" + not_resumed + ")");
  g.from_start = true;
  return g;
}

}  // namespace

std::string Client::remote_name(const std::string& path) const {
  const std::string& h = opt_.host;
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + path;
}

std::string Client::port_note() const {
  return opt_.port == kDefaultPort ? "" : " (port " + std::to_string(opt_.port) + ")";
}

Failure Client::refused(const proto::Message& m, const std::string& path) const {
  const Failure f = proto::refusal(m, remote_name(path));
  // A wildcard the user's shell left alone reaches the server as a name (a thirty-second
  // re-attack, B-e: "no such file or directory", and no word of why).
  const std::string hint =
      m.status == proto::Status::not_found && path.find_first_of("*?[") != std::string::npos
          ? " (wildcards are not expanded: the server runs no shell; name the files, or "
            "use recv -r on their directory)"
          : "";
  return f.reworded(f.what() + hint + port_note());
}

proto::Identity Client::load_client_identity() const {
  bool created = false;
  const proto::Identity id = opt_.identity.empty()
                                 ? load_or_create_identity(opt_.home / "id_ed25519", &created)
                                 : load_identity(opt_.identity);
  // The first send or recv made this user's key: say where it is, once, as keygen does (the
  // server must authorize it before a session can start).
  if (created && opt_.announce_new_host)
    std::fprintf(
        stderr,
        "aesxfer: created identity %s (%s); its public key, for the server's authorized_keys: %s.pub\n",
        printable((opt_.home / "id_ed25519").string()).c_str(), proto::fingerprint(id.pk).c_str(),
        printable((opt_.home / "id_ed25519").string()).c_str());
  log(1, "identity " +
             printable(opt_.identity.empty() ? (opt_.home / "id_ed25519").string() : opt_.identity.string()) +
             " (" + proto::fingerprint(id.pk) + ")");
  return id;
}

// Connects, sends the ClientHello and reads until the ServerHello is verified (its host key known).
void Client::connect_and_hello(proto::ClientHandshake& hs) {
  const std::string hp = host_port(opt_.host, opt_.port);
  log(1, "connecting to " + printable(opt_.host) + " port " + std::to_string(opt_.port));
  const auto t0 = Clock::now();
  int fd = -1;
  try {
    fd = connect_tcp(opt_.host, opt_.port, opt_.timeout);
  } catch (const Failure& f) {
    if (opt_.connect_hint.empty()) throw;
    throw Failure::link(f.what() + opt_.connect_hint);
  }
  conn_ = std::make_unique<Conn>(fd, opt_.timeout, hp);
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  char addr[NI_MAXHOST] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    ::getnameinfo(reinterpret_cast<sockaddr*>(&sa), len, addr, sizeof addr, nullptr, 0, NI_NUMERICHOST);
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.2f", std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  log(1, std::string("connected to ") + addr + " port " + std::to_string(opt_.port) + " in " + ms + " ms");

  proto::Step step = hs.start();
  conn_->write_all(step.send.data(), step.send.size());
  log(1, "sent ClientHello: protocol " + std::to_string(proto::kVersion) + ", cipher " + opt_.cipher->name +
             ", MAC " + crypto::mac_label(opt_.cipher, opt_.mac) + ", checksum " +
             crypto::checksum_name(opt_.checksum) + ", record size " + std::to_string(opt_.record_size));
  log(2, "ClientHello is " + std::to_string(step.send.size()) + " bytes");
  HandshakeLimits lim;
  lim.closed_hint = " (is it an aesxfer server?)";
  // The whole handshake within --timeout, as the server bounds its own (a thirty-seventh re-attack,
  // B2: a ServerHello sent a byte at a time held the client for ever, each byte within the timeout).
  if (conn_->timeout().count() > 0) {
    lim.total = conn_->timeout();
    char secs[32];
    std::snprintf(secs, sizeof secs, "%g", double(lim.total.count()) / 1000);
    // The Welcome too, which comes after the machine's frames (a thirty-eighth re-attack, B-F4:
    // sent a byte a second, it held the client 25 s with --timeout 3).
    conn_->set_deadline(Clock::now() + lim.total,
                        std::string("handshake not completed within ") + secs + " s");
  }
  lim.first_bytes = [&](const uint8_t* p, size_t n) {
    if (std::string g = foreign_greeting(p, n); !g.empty())
      throw Failure(hp + " is not an aesxfer server (it sent " + g + ")");
  };
  step = drive_handshake(*conn_, hs, lim);
  // A server turned this connection away for load (--max-startups): status busy from the peer, which
  // --retries waits out after a lost connection, as it does the Welcome's busy (a thirty-sixth
  // re-attack, B3: the retry met it and the command ended with its retries unused).
  if (step.ec)
    throw Failure(
        "handshake with " + hp + " failed: " + (step.detail.empty() ? step.ec.message() : step.detail),
        step.ec == proto::errc::server_busy ? proto::Status::busy : proto::Status::internal, 0,
        step.ec == proto::errc::server_busy ? Origin::peer : Origin::local);
  log(1, "received ServerHello (protocol " + std::to_string(proto::kVersion) + "): host key " +
             proto::fingerprint(*hs.host_key()) + ", its signature over the transcript verified");
}

void Client::check_host_key(const proto::PublicKey& key) {
  host_key_fp_ = proto::fingerprint(key);
  const std::string& hp = conn_->peer();
  proto::PublicKey expected{};
  const fs::path known = opt_.home / "known_hosts";
  const std::string shown = printable(known.string());  // the home may be named with escapes
  const HostCheck hc = check_known_host(known, hp, key, &expected, !opt_.strict_host_keys);
  switch (hc) {
    case HostCheck::known:
      log(1, "host key for " + hp + " is known: " + proto::fingerprint(key) + " matches " + shown);
      break;
    case HostCheck::added:
      log(1, "host key for " + hp + " was not known: " + proto::fingerprint(key) + " added to " + shown);
      // As ssh says it: the user learns that a key was trusted on first use, and which.
      if (opt_.announce_new_host)
        std::fprintf(stderr, "aesxfer: Permanently added %s (%s) to the list of known hosts (%s)\n",
                     hp.c_str(), proto::fingerprint(key).c_str(), shown.c_str());
      break;
    case HostCheck::unknown:
      throw Failure("host key for " + hp + " is not known (" + proto::fingerprint(key) +
                        ") and --strict-host-keys is set; add it to " + shown + " after checking it",
                    proto::Status::integrity);
    case HostCheck::changed:
      // Status integrity: never retried, and never only "fewer streams" (connect_more).
      throw Failure("host key for " + hp + " changed (expected " + proto::fingerprint(expected) + ", got " +
                        proto::fingerprint(key) + "); if this is expected, remove its line from " + shown,
                    proto::Status::integrity);
  }
}

// --keylog, opened before the connection (a twenty-sixth re-attack's note: a key log refused after
// the login cost the server a session it logged as "transfer incomplete"): created 0600, never
// through a symbolic link. An existing file takes the keys only when it is this user's regular
// file with one link that nobody else may read or write (another user could have made it, in a
// shared or sticky directory, to read the keys). Its directory is reached by the kernel's rule
// for links in sticky directories, whatever the sysctls say (files/guarded_path.h; a twenty-sixth
// re-attack, N1: another user's link in /tmp, partway along the path, chose the directory).
files::UniqueFd Client::open_keylog() const {
  if (opt_.keylog.empty()) return {};
  const fs::path kpath(opt_.keylog);
  files::UniqueFd kdir;
  try {
    kdir = files::open_guarded_parent(kpath);
  } catch (const Failure& f) {
    throw Failure("key log " + printable(opt_.keylog) + ": " + f.what());
  }
  files::UniqueFd kfd(::openat(kdir.get(), kpath.filename().c_str(),
                               O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (!kfd && errno == ELOOP)  // O_NOFOLLOW's word for a link ("too many levels", a 28th re-attack, N4)
    throw Failure("key log " + printable(opt_.keylog) +
                  ": a symbolic link (refused: the keys are never written "
                  "through a link)");
  if (!kfd) throw Failure("cannot write key log " + printable(opt_.keylog) + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(kfd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Failure("key log " + printable(opt_.keylog) + ": not a regular file");
  if (std::string why = files::ownership_problem(st, 077); !why.empty())
    throw Failure("key log " + printable(opt_.keylog) + ": refused: " + why +
                  " (it must be this user's file, with one link and mode 0600)");
  return kfd;
}

// One write per connection (O_APPEND), so the extra connections of --streams add their lines whole.
void Client::write_keylog(files::UniqueFd kfd) const {
  if (!kfd) return;
  std::string lines = keys_->keylog_lines();
  bool ok = ::write(kfd.get(), lines.data(), lines.size()) == ssize_t(lines.size());
  crypto::secure_zero(lines.data(), lines.size());
  ok = kfd.close() == 0 && ok;
  if (!ok) throw Failure("cannot write key log " + printable(opt_.keylog));
  log(2, "session keys appended to " + printable(opt_.keylog));
}

void Client::await_welcome(const proto::Identity& id) {
  const std::string& hp = conn_->peer();
  proto::Message w = conn_->recv_message("the handshake");
  if (w.type != proto::MsgType::welcome) throw Failure("protocol error from " + hp + ": no welcome");
  if (w.status == proto::Status::ok) {
    log(1, "login accepted: the server's Welcome arrived in the encrypted channel");
    return;
  }
  // The server's own words come last, quoted (a '"' in them escaped) and bounded, marked as its
  // own, whatever the status: they may imitate this client's hint with another key line, which
  // came first (a thirty-eighth re-attack, B-F5; a thirty-ninth, B-F1: a '"' closed the quote,
  // and any status but "refused" had the words shown bare, without this client's key line).
  const std::string text = w.text.empty() ? proto::status_name(w.status) : w.text;
  const std::string said = " (the server said: " + proto::peer_words(text) + ")";
  if (w.status == proto::Status::refused) {
    // Say what to do, in the one line: the line for the server's authorized_keys, which is this
    // identity's .pub file, and where it goes.
    const std::string where = opt_.identity.empty()
                                  ? "aesxfer keygen prints it"
                                  : printable(opt_.identity.string()) + ".pub holds it, if made by keygen";
    // The key may be there already, in a file the server does not trust (writable by others):
    // the advice says so too (a fifty-sixth re-attack, A56-3: "add this line" to a file that had it).
    throw Failure(printable(hp) + " refused the login; to be let in, add this line to " +
                  "$AESXFER_HOME/authorized_keys on the server if it is not there (" + where +
                  "; if it is, only the file's owner may write it and its directories, as sshd's "
                  "StrictModes asks): " +
                  encode_public_key(id.pk) + " " + key_comment() + said);
  }
  throw Failure(printable(hp) + " refused the login: " + proto::status_name(w.status) + said, w.status, 0,
                proto::Origin::peer);
}

// -v: what this connection runs with, as the handshake agreed it, and what the socket has.
void Client::log_session(Clock::duration handshake) const {
  if (!opt_.debug) return;
  const crypto::CipherDesc& c = *keys_->cipher;
  std::string mac = c.aead ? "aead (" + std::string(c.name) + " authenticates itself)" : keys_->mac->name;
  if (!c.aead && keys_->mac->tag_len)
    mac += std::string(" [sha256 ") + crypto::sha256_impl_name(crypto::ShaImpl::best) + ", batches " +
           crypto::sha256_mb_impl_name() + "]";
  std::string sum = crypto::checksum_name(keys_->checksum);
  if (keys_->checksum == crypto::ChecksumAlg::xxh128)
    sum += std::string(" [") + crypto::xxh_impl_name(crypto::XxhImpl::best) + "]";
  if (keys_->checksum == crypto::ChecksumAlg::sha256)
    sum += std::string(" [") + crypto::sha256_impl_name(crypto::ShaImpl::best) + "]";
  log(1, std::string("cipher ") + c.name + " [" + crypto::cipher_impl_name(c) + "], MAC " + mac +
             ", checksum " + sum + ", record size " + std::to_string(keys_->record_size) + " bytes");
  const int fd = conn_->fd();
  int snd = 0, rcv = 0;
  socklen_t l1 = sizeof snd, l2 = sizeof rcv;
  ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &l1);
  ::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &l2);
  log(1, "socket buffers: SO_SNDBUF " + std::to_string(snd) + " bytes, SO_RCVBUF " + std::to_string(rcv) +
             " bytes (as getsockopt reports them)");
  struct tcp_info ti {};
  socklen_t tl = sizeof ti;
  const bool have = ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0;
  char line[160];
  std::snprintf(line, sizeof line, "round trip %.3f ms (TCP_INFO smoothed), handshake %.2f ms",
                have ? ti.tcpi_rtt / 1000.0 : 0.0,
                std::chrono::duration<double, std::milli>(handshake).count());
  log(1, have ? line : std::string(line) + " (TCP_INFO unavailable)");
  if (have) {
    std::snprintf(line, sizeof line,
                  "TCP: rtt variance %.3f ms, mss %u, congestion window %u segments, pmtu %u",
                  ti.tcpi_rttvar / 1000.0, ti.tcpi_snd_mss, ti.tcpi_snd_cwnd, ti.tcpi_pmtu);
    log(2, line);
  }
}

Client::Client(const ClientOptions& opt) : opt_(opt) {
  const auto t0 = Clock::now();
  files::UniqueFd keylog = open_keylog();
  proto::Identity id = load_client_identity();
  proto::ClientHandshake hs(id, *opt_.cipher, *opt_.mac, {opt_.checksum, opt_.record_size});
  connect_and_hello(hs);
  check_host_key(*hs.host_key());
  proto::Step step = hs.confirm_host();
  if (step.ec) throw Failure("handshake with " + conn_->peer() + " failed: " + step.ec.message());
  conn_->write_all(step.send.data(), step.send.size());
  log(1, "sent ClientAuth: signature by " + proto::fingerprint(id.pk) +
             " over the transcript, key and signature sealed (AES-128-GCM handshake key)");
  keys_ = std::make_unique<proto::SessionKeys>(hs.keys());
  write_keylog(std::move(keylog));
  conn_->start_records(*keys_, true, opt_.impl);
  tune_for_path(conn_->fd());
  cc_ = net::set_congestion(conn_->fd(), opt_.congestion);
  log(1, "congestion control " + cc_.name + " (" + cc_.why + "), for the data this side sends");
  await_welcome(id);
  conn_->clear_deadline();
  log_session(Clock::now() - t0);
  if (!opt_.extra_stream) {
    const int n = auto_streams();  // decided here, once, from the handshake's round trips
    const uint32_t rtt = base_rtt_us_;
    if (opt_.resume || opt_.paced)
      log(1, std::string("streams: 1 (") + (opt_.resume ? "--resume" : "-l") + " uses one connection)");
    else if (opt_.streams > 0)
      log(1, "streams: " + std::to_string(opt_.streams) +
                 " per file (--streams or Streams; fewer for small files)");
    else
      log(1, "streams: auto, " + std::to_string(n) + " per large file, decided once (base round trip " +
                 std::to_string(rtt / 1000) + "." + std::to_string(rtt % 1000 / 100) + " ms, " +
                 (rtt < kLongPathRttUs ? "below" : "at or above") + " " +
                 std::to_string(kLongPathRttUs / 1000) + " ms)");
  }
}

Client::~Client() = default;

void Client::throw_receivers_reason(const std::string& remote) {
  // The receiver may have said why it stopped (disk full, ...) before closing.
  try {
    conn_->set_timeout(std::chrono::milliseconds(2000));
    proto::Message m = conn_->recv_message("the transfer");
    if (m.type == proto::MsgType::result && m.status != proto::Status::ok) throw refused(m, remote);
  } catch (const Failure& reason) {
    if (reason.origin == Origin::peer) throw;
  }
}

proto::Message Client::expect_result() {
  proto::Message res = conn_->recv_message("the transfer");
  if (res.type != proto::MsgType::result) throw Failure("protocol error: expected a result");
  return res;
}

void Client::expect_ok_result(const std::string& remote) {
  proto::Message res = conn_->recv_message("the transfer");
  if (res.type != proto::MsgType::result) throw Failure("protocol error: expected a result");
  if (res.status != proto::Status::ok) throw refused(res, remote);
}

std::string failure_result_text(const Failure& e) {
  // The reason: the errno's words, or the line's last part ("PATH: reason"), which names no local
  // directory (a twenty-ninth re-attack, N3: "internal error" for a refused FIFO or rename).
  const std::string line = e.what();
  const size_t colon = line.rfind(": ");
  return std::string("the client's side failed: ") + (e.err ? errno_text(e.err)
                                                      : colon == std::string::npos
                                                          ? std::string(proto::status_name(e.status))
                                                          : line.substr(colon + 2));
}

void Client::send_failure_result(const Failure& e) noexcept {
  try {
    proto::Message result;
    result.type = proto::MsgType::result;
    result.status = e.status;
    result.text = failure_result_text(e);
    conn_->send_message(result);
  } catch (...) {
  }
}

void Client::answer_failed_receive(const Failure& e) {
  if (!net::at_file_end(e)) throw e;
  send_failure_result(e);
  if (net::withdrawn(e)) clean_failure_ = true;  // at a file boundary: the session goes on
}

void Client::bye() noexcept {
  for (auto& c : extra_) c->bye();
  try {
    proto::Message m;
    m.type = proto::MsgType::bye;
    conn_->send_message(m);
    conn_->flush();  // a pipeline may still gather
  } catch (...) {
  }
}

proto::Message Client::ask_put(const proto::Message& req) {  // a put, or the probe before one
  clean_failure_ = false;
  try {
    return ask(req);
  } catch (const Failure& f) {
    if (f.origin == Origin::peer) clean_failure_ = true;  // refused before any data: the session goes on
    throw;
  }
}

bool Client::probe_for_resume(int fd, proto::Message& req, std::optional<PrefixScan>& scan,
                              std::string& not_resumed, FileResult& done) {
  // Ask what the server kept of an earlier attempt; resume only if our prefix hashes the same.
  proto::Message probe = req;
  probe.op = proto::Op::probe;
  proto::Message pr = ask_put(probe);  // refused: this file fails alone, a tree goes on (K1)
  if (!pr.text.empty() && pr.text != proto::kProbeComplete)
    // Its words quoted, as a login refusal's: they cannot pass for the client's own (a
    // forty-second re-attack, B-F2).
    not_resumed = "the server (" + conn_->peer() + ") said " + proto::peer_words(pr.text);
  if (pr.text == proto::kProbeComplete) {  // the server's copy, whole: nothing to send if it is ours
    if (already_there(fd, pr, req.size, done, keepalive())) return true;
  } else if (pr.digest.size() == proto::kPrefixMacLen && pr.size > 0 && pr.size <= req.size) {
    // One pass, with keep-alives: the keyed digest to compare and the checksum state the stream
    // continues from, so the server does not wait while the prefix is read a second time.
    scan = scan_prefix(*keys_, fd, pr.size, -1, keepalive());
    if (crypto::ct_equal(scan->mac.data(), pr.digest.data(), proto::kPrefixMacLen)) req.offset = pr.size;
  }
  req.flags |= proto::kFlagResume;
  return false;
}

FileResult Client::put(const fs::path& local, const std::string& remote,
                       const std::function<void(uint64_t)>& on_start, const ProgressFn& progress,
                       const std::string& name, int given) {
  clean_failure_ = true;  // until a request goes out
  struct stat st {};
  UniqueFd owned = given < 0 ? open_source(AT_FDCWD, local, local, st) : UniqueFd();
  const int fd = given < 0 ? owned.get() : given;
  if (given >= 0 && ::fstat(fd, &st) != 0)
    throw Failure(printable(local.string()) + ": " + errno_text(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  // A file that says it is empty but yields bytes (/proc/cpuinfo) goes as an unsized put of what
  // it yields; a sized put stored it empty, exit 0 (an eighteenth re-attack, N4). Never resumed:
  // its bytes are made anew at each read.
  if (files::made_when_read(fd, st)) {
    FileResult r = unsized_put(fd, st, remote, name.empty() ? local.filename().string() : name, on_start,
                               progress, local);
    r.file = local.string();
    return r;
  }
  proto::Message req = proto::request(proto::Op::put, remote, opt_.preserve ? proto::kFlagPreserve : 0);
  req.text = name.empty() ? local.filename().string() : name;
  req.size = uint64_t(st.st_size);
  req.mode = st.st_mode & 07777;
  req.mtime = st.st_mtim.tv_sec;
  clean_failure_ = false;
  if (!opt_.resume && !opt_.paced) {
    int n = streams_for(req.size);
    if (n > 1) return put_parallel(fd, local, req, n, on_start, progress);
  }
  std::optional<PrefixScan> scan;
  std::string not_resumed;  // the server's word on a partial file it passed over (PROTOCOL.md 3.6)
  if (opt_.resume && remote != "/dev/null") {
    FileResult done;
    if (probe_for_resume(fd, req, scan, not_resumed, done)) {
      done.file = local.string();
      if (on_start) on_start(req.size);
      return done;
    }
  }
  try {
    FileResult r = put_data(fd, st, local, remote, req, scan, on_start, progress);
    r.not_resumed = not_resumed;
    return r;
  } catch (const Failure& f) {
    throw passed_over(f, not_resumed);
  }
}

FileResult Client::put_data(int fd, const struct stat& st, const fs::path& local, const std::string& remote,
                            const proto::Message& req, const std::optional<PrefixScan>& scan,
                            const std::function<void(uint64_t)>& on_start, const ProgressFn& progress) {
  const proto::Message ok = ask_put(req);
  // From here the server keeps what arrives of a resumable put: a Ctrl-C says so, and where.
  struct ServerKept {  // still kept after a failure (the destructor runs as it unwinds)
    int slot = -1;
    const int unwinding = std::uncaught_exceptions();
    ~ServerKept() { unregister_kept(slot, std::uncaught_exceptions() > unwinding); }
  } kept;
  std::string kept_what;  // "what arrived of "F" in "HOST:PARTIAL" (port N)"
  if ((req.flags & proto::kFlagResume) && !ok.text.empty()) {  // empty: the server keeps nothing
    const std::string where = kept_partial_text(ok.text, remote, req.text);
    // Each path quoted: one of a tree's names (or the server's words) cannot pass for a clause of
    // the line (a forty-fifth re-attack, B-F2).
    kept_what = "what arrived of " + proto::quoted(local.filename().string()) +
                (where.empty() ? " (sent to " + proto::quoted(remote_name(put_shown(remote, req.text))) + ")"
                               : " in " + proto::quoted(remote_name(where))) +
                port_note();
    kept.slot = register_server_kept(kept_what);
  }

  FileResult r;
  r.file = local.string();
  resume_offset_ = req.offset;
  if (on_start) on_start(req.size);
  const std::vector<net::TcpCounts> before{net::tcp_counts(conn_->fd())};
  auto t0 = Clock::now();
  try {
    StreamOptions so{req.offset, opt_.fine_progress};
    if (req.offset) so.prefix_hash = &scan->sum;
    so.since = &st;  // as opened, before its prefix was hashed
    r.checksum = send_stream(*conn_, fd, req.size, progress, so);
    files::mark_sent_whole(kept.slot);  // from here the server may have put it in place (B51-1)
  } catch (const Failure& f) {
    try {
      put_failed(f, local, put_shown(remote, req.text));
    } catch (const Failure& g) {
      // The link failed mid-stream: what arrived stays on the server, and the line says where, as
      // a Ctrl-C's does (a fifty-sixth re-attack's note: `send --resume` cut by the server's
      // timeout named the connection only, and left a partial file nobody was told of).
      if (kept_what.empty() || g.origin != Origin::link) throw;
      throw g.reworded(std::string(g.what()) + "; the server keeps " + kept_what + " for --resume");
    }
  }
  const files::AwaitingAnswer awaiting(kept.slot < 0);  // a kept slot already says so
  await_sent_answer(local, [&] { expect_ok_result(put_shown(remote, req.text)); });
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = req.size;
  r.record_size = conn_->record_size();
  r.resumed_from = req.offset;
  r.verified = true;
  note_send(r, {conn_->fd()}, before);
  return r;
}

// Sent whole, its answer lost with the link: the server may have put it in place, as a pipelined
// put's verdict says. A 10 MiB file the server had stored was "timed out", and with no retry left
// not "not confirmed" (a fifty-seventh re-attack, D57-4); so were `send -` and a --streams commit
// (a fifty-eighth, I58-4), whose verdicts were the connection's words.
void Client::await_sent_answer(const fs::path& local, const std::function<void()>& read) {
  const uint64_t end_at = conn_->written();
  try {
    read();
  } catch (const Failure& f) {
    if (f.origin != Origin::link) throw;
    throw answer_lost(f, local, conn_->acknowledged(end_at));
  }
}

void Client::put_failed(const Failure& f, const fs::path& local, const std::string& shown) {
  if (net::withdrawn(f) && f.origin == Origin::local) {
    // It changed as it was read: the server drops what arrived (a resumed put keeps its partial
    // file as it was) and answers; the session goes on with the next file.
    expect_result();
    clean_failure_ = true;
    throw f.reworded(printable(local.string()) + ": " + f.what());
  }
  throw_receivers_reason(shown);
  // This end's own failure as it read the file ("file shrank while being sent"), named as a
  // pipelined file's is (a thirty-third re-attack, B-N9: no name among several files).
  if (f.origin == Origin::local) throw f.reworded(printable(local.string()) + ": " + f.what());
  throw f;
}

void Client::note_send(FileResult& r, const std::vector<int>& fds,
                       const std::vector<net::TcpCounts>& before) const {
  r.congestion = cc_.name;
  r.congestion_why = cc_.why;
  uint64_t sent = 0, again = 0;
  for (size_t i = 0; i < fds.size() && i < before.size(); ++i) {
    net::TcpCounts now = net::tcp_counts(fds[i]);
    sent += now.bytes_sent - before[i].bytes_sent;
    again += now.bytes_retrans - before[i].bytes_retrans;
  }
  if (sent > 0) r.resent_percent = 100.0 * double(again) / double(sent);
}

std::string slow_path_note(const FileResult& r) {
  if (r.resent_percent < 0.1 || (r.congestion != "cubic" && r.congestion != "reno")) return "";
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.2f", r.resent_percent);
  return std::string("packet loss limits this path: ") + pct + " % of the data was sent again and " +
         r.congestion + ", loss-based, backs off at every drop (" + r.congestion_why +
         "); bbr keeps such a path full: as root, --congestion bbr, or let every user choose it with " +
         net::kCongestionDropIn + " (aesxfer(1), CONGESTION CONTROL); more --streams also help";
}

FileResult Client::put_stream(int fd, const std::string& remote, const std::string& name,
                              const std::function<void(uint64_t)>& on_start, const ProgressFn& progress) {
  clean_failure_ = true;  // until a request goes out
  if (opt_.resume) throw Failure("standard input cannot be resumed (--resume): it is read only once");
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Failure("standard input: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) throw Failure("standard input: is a directory");
  return unsized_put(fd, st, remote, name, on_start, progress, "-");
}

FileResult Client::unsized_put(int fd, const struct stat& st, const std::string& remote,
                               const std::string& name, const std::function<void(uint64_t)>& on_start,
                               const ProgressFn& progress, const fs::path& local) {
  clean_failure_ = true;  // until a request goes out
  // Size 0: the end record carries it (docs/PROTOCOL.md 3.3).
  proto::Message req = proto::request(proto::Op::put, remote,
                                      proto::kFlagUnsized | (opt_.preserve ? proto::kFlagPreserve : 0));
  req.text = name;
  // A regular file keeps its mode and time; a pipe or terminal gives 0600 and the time it starts.
  req.mode = S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0600;
  req.mtime = S_ISREG(st.st_mode) ? st.st_mtim.tv_sec : ::time(nullptr);
  ask_put(req);
  FileResult r;
  r.file = name;
  resume_offset_ = 0;
  if (on_start) on_start(kUnknownSize);
  const auto t0 = Clock::now();
  try {
    StreamOptions so{0, opt_.fine_progress};
    so.unsized = true;
    so.length = &r.bytes;
    r.checksum = send_stream(*conn_, fd, 0, progress, so);
  } catch (const Failure&) {
    throw_receivers_reason(remote);
    throw;
  }
  const files::AwaitingAnswer awaiting(true);
  await_sent_answer(local, [&] { expect_ok_result(remote); });
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.record_size = conn_->record_size();
  r.verified = true;
  return r;
}

bool Client::already_there(int fd, const proto::Message& pr, uint64_t size, FileResult& done,
                           const std::function<void()>& tick) {
  if (pr.text != proto::kProbeComplete || pr.size != size || pr.digest.size() != proto::kPrefixMacLen)
    return false;
  PrefixScan scan = scan_prefix(*keys_, fd, size, -1, tick);
  if (!crypto::ct_equal(scan.mac.data(), pr.digest.data(), proto::kPrefixMacLen)) return false;
  resume_offset_ = size;
  done.bytes = size;
  done.resumed_from = size;
  done.checksum = scan.sum.final();
  done.record_size = conn_->record_size();
  done.verified = true;
  return true;
}

Client::Kept Client::judge_probe(const std::filesystem::path& local, const proto::Message& pr,
                                 FileResult& done, int given) {
  struct stat st {};
  UniqueFd owned;
  if (given < 0) {
    try {
      owned = open_source(AT_FDCWD, local, local, st);
    } catch (const Failure&) {
      return Kept::nothing;  // put says why
    }
  } else if (::fstat(given, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Kept::nothing;
  }
  const int fd = given < 0 ? owned.get() : given;
  const uint64_t size = uint64_t(st.st_size);
  if (already_there(fd, pr, size, done, size > proto::kMaxAheadSize ? keepalive() : nullptr)) {
    done.file = local.string();
    return Kept::complete;
  }
  if (pr.text.empty() && pr.digest.size() == proto::kPrefixMacLen && pr.size > 0 && pr.size <= size)
    return Kept::partial;
  return Kept::nothing;
}

std::string Client::mkdir(const std::string& remote, const std::string& name, uint32_t mode, int64_t mtime,
                          bool apply_attrs, std::string* dir_id) {
  proto::Message req =
      proto::request(proto::Op::mkdir, remote.empty() ? "." : remote, apply_attrs ? proto::kFlagPreserve : 0);
  req.text = name;
  req.mode = mode & 01777;  // never setuid/setgid (today's server applies mkdir modes as sent)
  req.mtime = mtime;
  proto::Message resp = ask(req);
  // A Response text holds at most kMaxMessage bytes (docs/PROTOCOL.md 3.2): an answer of that
  // length may have been cut, and a path built from it would name another directory.
  if (resp.text.size() >= proto::kMaxMessage)
    throw Failure(remote_name(printable(req.path)) + (name.empty() ? "" : "/" + printable(name)) +
                  ": path too long (the server's answer is limited to " + std::to_string(proto::kMaxMessage) +
                  " bytes in protocol " + std::to_string(proto::kVersion) + ")" + port_note());
  // The answer names the directory asked for (PROTOCOL.md 3.5): PATH, or PATH/NAME when NAME was
  // given. Every path of the tree is built below it, and the Ctrl-C line names them: taken as it
  // was, a hostile server's answer "backup/src2) for --resume; removed ..." forged that line's
  // clauses (a forty-fifth re-attack, B-F1). So the base is the client's own string, the one the
  // server chose between.
  const std::string asked = normal_request(req.path);
  if (dir_id) *dir_id = resp.digest;
  if (resp.text.empty()) return asked;
  const std::string answered = normal_request(resp.text);
  if (answered == asked) return asked;
  if (!name.empty() && answered == normal_request(req.path + "/" + name)) return answered;
  throw Failure("protocol error from " + conn_->peer() + ": the answer to mkdir " +
                remote_name(printable(req.path)) + (name.empty() ? "" : " (with " + printable(name) + ")") +
                " names another directory: " + proto::quoted(resp.text.substr(0, 200)));
}

static int named_descriptor(const fs::path& local);

namespace {
enum class LocalKind { other, descriptor, directory, special };
LocalKind guarded_kind(const fs::path& local);
}  // namespace

FileResult Client::get(const std::string& remote, const fs::path& local_in, uint64_t zero_size,
                       const std::function<void(uint64_t)>& on_start, const ProgressFn& progress) {
  fs::path local = local_in;
  // A descriptor (/dev/stdout) is written as it is, even one that is a directory (refused by
  // open_local): a name appended would reopen it through /proc (a twentieth re-attack, N9).
  if (local != "/dev/null" && guarded_kind(local) == LocalKind::directory) {
    if (auto planted = planted_destination_dir(local)) throw *planted;
    local /= fs::path(remote).filename();
  }
  return fetch(remote, local, zero_size, on_start, progress);
}

proto::Message Client::exchange(const proto::Message& req, const char* what) {
  conn_->send_message(req);
  proto::Message resp = conn_->recv_message(what);
  if (resp.type != proto::MsgType::response)
    throw Failure::link("protocol error from " + conn_->peer() + ": expected a response",
                        proto::Status::integrity);
  return resp;
}

proto::Message Client::ask(const proto::Message& req, const char* what) {
  // A get's data is due once it is answered ok: a failure after that leaves the session mid-file.
  const bool get = req.op == proto::Op::get;
  if (get) clean_failure_ = false;
  proto::Message resp = exchange(req, what);
  if (resp.status != proto::Status::ok) {
    if (get) clean_failure_ = true;  // refused: nothing comes, the session goes on
    throw refused(resp, req.op == proto::Op::put || req.op == proto::Op::probe ? put_shown(req.path, req.text)
                                                                               : req.path);
  }
  return resp;
}

proto::Message get_request(const std::string& remote, uint64_t size, uint8_t flags, uint64_t offset,
                           const std::string& digest) {
  proto::Message req = proto::request(proto::Op::get, remote, flags);
  req.size = size;
  if (flags & proto::kFlagResume) {
    req.offset = offset;
    req.digest = digest;
  }
  return req;
}

proto::Message Client::stat_remote(const std::string& remote, uint64_t zero_size, const char* what) {
  proto::Message req = proto::request(proto::Op::stat, remote);
  req.size = zero_size;
  return exchange(req, what);
}

bool Client::is_remote_dir(const std::string& remote, std::string* dir_id) {
  if (dir_id) dir_id->clear();
  if (remote.empty() || remote == "." || remote == "./" || remote == "/") return true;
  const proto::Message m = stat_remote(remote, 0, "the destination check");
  if (m.status != proto::Status::is_directory) return false;
  if (dir_id) *dir_id = m.digest;
  return true;
}

std::function<void()> Client::keepalive() {
  return [this, last = Clock::now()]() mutable {
    if (Clock::now() - last < std::chrono::milliseconds(500)) return;
    stat_remote(".", 0, "a keep-alive");  // whatever the status: the round trip is what counts
    last = Clock::now();
  };
}

// The descriptor of this process a destination names (/dev/stdout, /dev/fd/N, /proc/self/fd/N),
// or -1. Such a name is written through that descriptor as the process got it (recv host:f -
// >> log appends; a socket or pipe works), never reopened, which would truncate or fail.
static int named_descriptor(const fs::path& local) {
  std::error_code ec;
  const fs::path own = fs::canonical("/proc/self/fd", ec);
  if (ec) return -1;
  fs::path p = local;
  for (int hops = 0; hops < 8; ++hops) {
    const fs::path dir = fs::canonical(p.parent_path().empty() ? "." : p.parent_path(), ec);
    const std::string n = p.filename().string();
    if (!ec && dir == own && !n.empty() && n.size() < 8 &&
        n.find_first_not_of("0123456789") == std::string::npos)
      return std::stoi(n);
    if (!fs::is_symlink(p, ec)) return -1;
    const fs::path t = fs::read_symlink(p, ec);
    if (ec) return -1;
    p = t.is_absolute() ? t : p.parent_path() / t;
  }
  return -1;
}

namespace {

constexpr int kSourceFlags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

// A source opened for reading, following a symbolic link only by the kernel's rule for
// fs.protected_symlinks, whatever the sysctl says (files::planted_by): a link another user planted
// in a sticky directory such as /tmp is not followed, as for destinations (a thirty-second
// re-attack, A-N3: `send /tmp/report.txt`, another user's link to a private file, uploaded that
// file). A path the user typed is walked by files::resolve_guarded. An entry of a tree (dirfd
// given, its directory already walked) is opened at once with O_NOFOLLOW; only a link there
// (ELOOP) is walked by files::resolve_guarded_at from its directory, every link on the way judged.
// The file itself is opened with O_NOFOLLOW. Invalid with errno set when it cannot be opened.
UniqueFd open_guarded_source(int dirfd, const fs::path& name, const fs::path& shown) {
  struct stat link {};
  if (dirfd != AT_FDCWD) {
    UniqueFd fd(::openat(dirfd, name.c_str(), kSourceFlags | O_NOFOLLOW));
    if (fd || errno != ELOOP || ::fstatat(dirfd, name.c_str(), &link, AT_SYMLINK_NOFOLLOW) != 0) return fd;
  }
  const files::GuardedEntry g = dirfd == AT_FDCWD
                                    ? files::resolve_guarded(name)
                                    : files::resolve_guarded_at(dirfd, shown.parent_path(), name);
  if (const std::string why = dirfd == AT_FDCWD ? files::foreign_reach(g) : ""; !why.empty())
    throw Failure(printable(shown.string()) + ": " + why);
  UniqueFd fd(::openat(g.dir.get(), g.name.c_str(), kSourceFlags | (g.magic ? 0 : O_NOFOLLOW)));
  // A tree's link, judged on what it led to (the walk judged it too; this is what was opened).
  struct stat target {};
  if (fd && dirfd != AT_FDCWD && ::fstat(fd.get(), &target) == 0)
    if (const std::string why = files::foreign_link(link, target); !why.empty())
      throw Failure(printable(shown.string()) + ": " + why);
  return fd;
}

}  // namespace

UniqueFd open_source(int dirfd, const fs::path& name, const fs::path& shown, struct stat& st) {
  auto refused = [&shown](const std::string& why) { return Failure(printable(shown.string()) + ": " + why); };
  if (const int n = dirfd == AT_FDCWD ? named_descriptor(name) : -1;
      n >= 0 && !files::inherited_descriptor(n))
    throw refused("descriptor " + std::to_string(n) + " was not open when aesxfer started");
  UniqueFd fd = open_guarded_source(dirfd, name, shown);
  if (!fd || ::fstat(fd.get(), &st) != 0) throw refused(errno_text(errno));
  if (S_ISDIR(st.st_mode)) throw refused("is a directory");
  if (!S_ISREG(st.st_mode)) throw refused("not a regular file");
  // Blocking again: a regular file's reads never wait, and the data plane's loops expect it.
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

namespace {
const char* special_kind(const struct stat& st) {
  return S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
}

// The descriptor number a magic /proc link names when it is one of this process's own
// (/proc/self/fd/N), else -1.
int own_descriptor(const files::GuardedEntry& g) {
  struct stat dir {
  }, own{};
  if (::fstat(g.dir.get(), &dir) != 0 || ::stat("/proc/self/fd", &own) != 0 || dir.st_dev != own.st_dev ||
      dir.st_ino != own.st_ino || g.name.empty() || g.name.size() > 7 ||
      g.name.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(g.name);
}

// A FIFO, device or socket at the entry g names, written through (never replaced), unless another
// user made it in a sticky directory (the kernel's rule for fs.protected_fifos, whatever the sysctl
// says). Judged on the descriptor that is then reopened for writing: no name is looked up twice.
std::unique_ptr<AtomicFile> write_through_special(const files::GuardedEntry& g, const fs::path& local) {
  const std::string shown = printable(local.string());
  const UniqueFd e(::openat(g.dir.get(), g.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {
  }, ds{};
  if (!e || ::fstat(e.get(), &st) != 0 || ::fstat(g.dir.get(), &ds) != 0)
    throw Failure(shown + ": " + errno_text(errno));
  if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode))
    throw Failure(shown + ": changed while it was being opened");
  if (std::string why = files::planted_by(st.st_uid, ds); !why.empty())
    throw Failure(shown + ": " + special_kind(st) + " " + why +
                  " (not written through, as fs.protected_fifos refuses it)");
  const std::string again = "/proc/self/fd/" + std::to_string(e.get());
  const int fd = ::open(again.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw Failure(shown + ": " + errno_text(errno));
  return AtomicFile::write_through(fd, local);
}
}  // namespace

Failure reserved_destination(const fs::path& local) {
  return Failure(printable(local.string()) + ": " + files::kReservedShape);
}

namespace {
// A destination the user named, walked once from descriptors (files/guarded_path.h), and what is
// at its end: every decision about it (descriptor, directory, special file, refusal) is taken from
// this one walk, never from a second lookup of the name another user could race.
struct WalkedDest {
  files::GuardedEntry g;
  struct stat st {};
  bool exists = false;
};

WalkedDest walk_destination(const fs::path& local) {
  WalkedDest d;
  d.g = guarded_destination(local);
  d.exists = !d.g.magic && ::fstatat(d.g.dir.get(), d.g.name.c_str(), &d.st, AT_SYMLINK_NOFOLLOW) == 0;
  return d;
}

// What open_local() refuses at a walked destination before anything is written: a link to a
// directory path, a directory where the file goes (a twenty-seventh re-attack, N3: the rename at
// the end failed after 200 MB; not a path naming the directory itself, "d3/" for a source
// "tree/", where the server says what the source is: a twenty-eighth, N1), and a FIFO, device or
// socket another user made in a sticky directory (the kernel's fs.protected_fifos rule).
std::optional<Failure> refusal_at(const WalkedDest& d, const fs::path& local) {
  const std::string shown = printable(local.string());
  if (d.g.dir_form) return Failure(shown + ": not a directory (a link to a directory path)");
  if (!d.exists || S_ISREG(d.st.st_mode)) return std::nullopt;
  if (S_ISDIR(d.st.st_mode))
    return d.g.name == "." ? std::nullopt : std::optional<Failure>(Failure(shown + ": is a directory"));
  struct stat ds {};
  if (::fstat(d.g.dir.get(), &ds) != 0) return std::nullopt;
  if (std::string why = files::planted_by(d.st.st_uid, ds); !why.empty())
    return Failure(shown + ": " + special_kind(d.st) + " " + why +
                   " (not written through, as fs.protected_fifos refuses it)");
  return std::nullopt;
}

}  // namespace

std::optional<Failure> planted_destination_dir(const fs::path& local) {
  const std::string typed = local.string();
  if (typed.empty()) return std::nullopt;
  try {
    const WalkedDest d = walk_destination(local);
    if (std::string who = d.g.magic ? "" : files::planted_dir_at(d.g.dir.get(), d.g.name); !who.empty())
      return Failure(printable(typed) + ": " + who + ": nothing is written into it",
                     proto::Status::permission, EPERM);
  } catch (const Failure&) {
  }
  return std::nullopt;
}

files::GuardedEntry guarded_destination(const fs::path& local) {
  files::GuardedEntry g = files::resolve_guarded(local);
  if (const std::string why = files::foreign_reach(g); !why.empty())
    throw Failure(printable(local.string()) + ": " + why);
  if (g.dir && !g.magic)  // where it goes, and each directory above it
    if (auto planted = planted_way_refusal(g.dir.get(), local.string())) throw *planted;
  return g;
}

std::optional<Failure> planted_way_refusal(int dirfd, const std::string& shown) {
  if (const std::string why = files::planted_way_text(dirfd); !why.empty())
    return Failure(printable(shown) + ": " + why, proto::Status::permission, EPERM);
  return std::nullopt;
}

namespace {
LocalKind guarded_kind(const fs::path& local) {
  try {
    const WalkedDest d = walk_destination(local);
    if (d.g.magic) return LocalKind::descriptor;
    if (!d.exists || S_ISREG(d.st.st_mode)) return LocalKind::other;
    return S_ISDIR(d.st.st_mode) ? LocalKind::directory : LocalKind::special;
  } catch (const Failure&) {
    return LocalKind::other;  // open_local() refuses it with the reason
  }
}
}  // namespace

std::optional<Failure> destination_refusal(const fs::path& local) {
  if (files::is_reserved_name(local.filename().string())) return reserved_destination(local);
  try {
    const WalkedDest d = walk_destination(local);
    if (d.g.magic) return std::nullopt;  // a descriptor: judged when it is opened
    if (auto f = refusal_at(d, local)) return f;
    if (d.exists && S_ISREG(d.st.st_mode))
      if (std::string why = files::unreplaceable(d.g.dir.get(), d.g.name); !why.empty())
        return Failure(printable(local.string()) + ": " + why, proto::Status::permission, EPERM);
  } catch (const Failure& f) {
    return f;
  }
  return std::nullopt;
}

std::optional<Failure> room_refusal(int fd, uint64_t size, const std::string& shown, uint64_t copied) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return std::nullopt;  // a pipe, a device: written through
  const std::string short_by = files::space_shortfall(fd, size, false, copied);
  if (short_by.empty()) return std::nullopt;
  Failure f((shown.empty() ? "" : shown + ": ") + "no space left on device (" + short_by + ")",
            proto::Status::no_space, ENOSPC);
  f.size = size;  // a resumed get's callers put the whole file's
  return f;
}

std::optional<Failure> room_to_create(int dirfd, const std::string& shown, bool directory) {
  std::string full = files::inodes_short(dirfd);
  if (struct stat st{}; full.empty() && directory) {
    const bool known = ::fstat(dirfd, &st) == 0;
    full = files::space_shortfall(dirfd, known ? uint64_t(std::max<blksize_t>(st.st_blksize, 4096)) : 4096,
                                  true);
  }
  if (full.empty()) return std::nullopt;
  return Failure(shown + ": no space left on device (" + full + ")", proto::Status::no_space, ENOSPC);
}

// Where a get writes. Inside a tree (dirfd given): the name in that directory, through openat
// with O_NOFOLLOW (a symbolic link there is replaced, never followed). A destination the user
// named: a FIFO, character device or socket is written through (recv host:f /dev/stdout writes
// to standard output), a symbolic link to a regular file updates its target (beside the
// target), anything else gets the temporary file and the rename.
std::unique_ptr<AtomicFile> open_local(const fs::path& local, int dirfd) {
  if (dirfd != AT_FDCWD) {
    // A file of a listing takes an inode: its last ones are kept (C50-1).
    if (auto full = room_to_create(dirfd, printable(local.string()), false)) throw *full;
    return std::make_unique<AtomicFile>(dirfd, local.filename().string(), local);
  }
  // Resolved once, from descriptors, each link judged by the kernel's rule for sticky directories
  // whatever the sysctls say (files/guarded_path.h): what is written is what was checked (twenty-
  // second and twenty-third re-attacks: a link another user planted in /tmp, and a race on one).
  const WalkedDest d = walk_destination(local);
  const files::GuardedEntry& g = d.g;
  if (g.dir_form) throw Failure(printable(local.string()) + ": not a directory (a link to a directory path)");
  // A descriptor (/dev/stdout, /dev/fd/N, a link to /proc/self/fd/N) is told from that same walk,
  // never from a second lookup of the name (a twenty-fourth re-attack, N1: a race between two
  // lookups sent the file to standard output through another user's link).
  if (g.magic) {
    const int n = own_descriptor(g);
    if (n < 0) throw Failure(printable(local.string()) + ": a descriptor of another process");
    // Descriptor 1 is named as such: `recv host:f -` never typed "/dev/stdout".
    const fs::path shown = n == STDOUT_FILENO ? fs::path("standard output") : local;
    // Only a descriptor the process was given: any other is one of its own files or its
    // connection (a twentieth re-attack, N1: the file went into the socket in clear).
    if (!files::inherited_descriptor(n))
      throw Failure(printable(shown.string()) + ": descriptor " + std::to_string(n) +
                    " was not open when aesxfer started");
    struct stat dst {};
    if (::fstat(n, &dst) == 0 && S_ISDIR(dst.st_mode))
      throw Failure(printable(shown.string()) + ": is a directory");
    const int fd = ::fcntl(n, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) throw Failure(printable(shown.string()) + ": " + errno_text(errno));
    return AtomicFile::write_through(fd, shown);
  }
  if (auto f = refusal_at(d, local)) throw *f;
  // A FIFO, device or socket is written through: judged again on the descriptor it is opened as.
  if (d.exists && !S_ISREG(d.st.st_mode) && !S_ISDIR(d.st.st_mode)) return write_through_special(g, local);
  return std::make_unique<AtomicFile>(g.dir.get(), g.name, g.followed ? g.path : local);
}

static bool writes_through(const fs::path& local, int dirfd);
bool written_through(const fs::path& local) { return writes_through(local, AT_FDCWD); }

// True when a get into `local` must be written through (no temporary file, no resume, one stream):
// a descriptor or a special file, by the walk open_local() takes.
static bool writes_through(const fs::path& local, int dirfd) {
  if (dirfd != AT_FDCWD) return false;
  const LocalKind k = guarded_kind(local);
  return k == LocalKind::descriptor || k == LocalKind::special;
}

FileResult Client::fetch(const std::string& remote, const fs::path& local, uint64_t zero_size,
                         const std::function<void(uint64_t)>& on_start, const ProgressFn& progress,
                         uint64_t size_hint, int dirfd) {
  bool sink = local == "/dev/null" && dirfd == AT_FDCWD;
  // Until the get goes out, a failure here (a destination refused or that cannot be made) ends
  // nothing: the next file follows on this session (a twenty-eighth re-attack, N2: one planted
  // link among several sources ended the command).
  clean_failure_ = true;
  // Never a local file of the shapes aesxfer keeps for its own temporary and partial files: a later
  // recv of the file beside it would remove it as stale, or resume from it (a thirtieth re-attack,
  // N1: a single-file recv wrote one; recv -r skips them, and the server refuses them).
  if (!sink && files::is_reserved_name(local.filename().string())) throw reserved_destination(local);
  bool through = !sink && writes_through(local, dirfd);
  std::string not_resumed;
  if (opt_.resume && !sink && !through && remote != "/dev/zero")
    if (auto r = fetch_resumed(remote, local, zero_size, on_start, progress, size_hint, dirfd, not_resumed))
      return *r;
  try {
    FileResult r = fetch_whole(remote, local, zero_size, on_start, progress, size_hint, dirfd, sink, through);
    r.not_resumed = not_resumed;
    return r;
  } catch (const Failure& f) {
    throw passed_over(f, not_resumed);
  }
}

FileResult Client::fetch_whole(const std::string& remote, const fs::path& local, uint64_t zero_size,
                               const std::function<void(uint64_t)>& on_start, const ProgressFn& progress,
                               uint64_t size_hint, int dirfd, bool sink, bool through) {
  resume_offset_ = 0;
  if (!opt_.resume && !opt_.paced && !through &&
      (opt_.streams > 1 || (opt_.streams == 0 && auto_streams() > 1)) &&
      (size_hint == UINT64_MAX || streams_for(size_hint) > 1)) {
    // Ask the size first: a file big enough goes over several connections.
    proto::Message st = stat_remote(remote, zero_size);
    if (st.status != proto::Status::ok) throw refused(st, remote);
    int n = streams_for(st.size);
    if (n > 1) return get_parallel(remote, local, st, n, on_start, progress, dirfd);
  }
  // The destination first: one that cannot be made fails here, before the server opens the file
  // and starts sending it (a twenty-fifth re-attack, N3: the session then ended without a Result
  // and the server logged a "protocol error"). A refused get removes the temporary file again.
  std::unique_ptr<AtomicFile> out;
  if (!sink) out = open_local(local, dirfd);
  // The size known already (the sources' stats, a listing): a file that cannot fit fails alone,
  // before the get, and the session goes on (a thirty-third re-attack, B-N5: the later sources
  // were "not fetched").
  if (out && size_hint != UINT64_MAX)
    if (auto full = room_refusal(out->fd(), size_hint, out->shown().string())) throw *full;
  proto::Message resp = ask(get_request(remote, zero_size));

  FileResult r;
  r.file = remote;
  if (on_start) on_start(resp.size);
  auto t0 = Clock::now();
  proto::Message result;
  result.type = proto::MsgType::result;
  try {
    // A file that cannot fit is said before its first byte, as for parallel streams (a
    // thirty-second re-attack, B-N6: a 200 GB file filled the disk first).
    if (auto full = out ? room_refusal(out->fd(), resp.size, "") : std::nullopt) throw *full;
    r.checksum =
        recv_stream(*conn_, out ? out->fd() : -1, resp.size, progress, StreamOptions{0, opt_.fine_progress});
    if (out)
      out->commit(effective_mode(resp.mode, opt_.preserve), effective_mtime(resp.mtime, opt_.preserve));
  } catch (const Failure& e) {
    // A stream the server withdrew (the file changed as it read it) ended at its end record: this
    // file fails alone, nothing of it kept, and the session goes on.
    answer_failed_receive(e);
    throw Failure((out ? out->shown().string() : printable(local.string())) + ": " + e.what(), e.status,
                  e.err);
  }
  conn_->send_message(result);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = resp.size;
  r.record_size = conn_->record_size();
  r.verified = true;
  return r;
}

}  // namespace aesxfer::client
