#include "client/client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <optional>

#include "crypto/util.h"
#include "net/atomic_file.h"
#include "net/handshake_driver.h"
#include "net/keystore.h"
#include "net/resume.h"

namespace aesxfer::net {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

// The first bytes a server sent, when they cannot start an aesxfer handshake frame (a u32 length
// of at most 4096 begins with two zero bytes): the start of its first line, for the message
// "HOST:PORT is not an aesxfer server (it sent 'SSH-2.0-OpenSSH_9.2p1')". Empty otherwise.
std::string foreign_greeting(const uint8_t* p, size_t n) {
  if (n < 2 || (p[0] == 0 && p[1] == 0)) return "";
  std::string line(reinterpret_cast<const char*>(p), std::min<size_t>(n, 60));
  line = line.substr(0, line.find_first_of("\r\n"));
  return printable(line);
}

// Appends the session's key log lines to `path`: created 0600, never through a symbolic link;
// one write per connection (O_APPEND), so the extra connections of --streams add their lines whole.
void write_keylog(const std::string& path, const proto::SessionKeys& keys) {
  int kfd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (kfd < 0) throw Failure("cannot write key log " + path + ": " + errno_text(errno));
  std::string lines = keys.keylog_lines();
  bool ok = ::write(kfd, lines.data(), lines.size()) == ssize_t(lines.size());
  crypto::secure_zero(lines.data(), lines.size());
  ::close(kfd);
  if (!ok) throw Failure("cannot write key log " + path);
}

}  // namespace

Failure refused(const proto::Message& m, const std::string& what) {
  std::string text = m.text.empty() ? proto::status_name(m.status) : m.text;
  // The server's text usually starts with the path it refuses ("nope.bin: no such file"), and
  // `what` ends with the path the user asked for: name it once.
  if (const size_t c = text.find(": "); c != std::string::npos && c > 0) {
    const std::string head = ":" + text.substr(0, c);
    if (what.size() >= head.size() && what.compare(what.size() - head.size(), head.size(), head) == 0)
      text = text.substr(c + 2);
  }
  return Failure(printable(what + ": " + text));
}

Client::Client(const ClientOptions& opt) : opt_(opt) {
  proto::Identity id = load_or_create_identity(opt_.home / "id_ed25519");
  int fd = connect_tcp(opt_.host, opt_.port, opt_.timeout);
  std::string hp = host_port(opt_.host, opt_.port);
  conn_ = std::make_unique<Conn>(fd, opt_.timeout, hp);

  proto::ClientHandshake hs(id, *opt_.cipher, *opt_.mac, {opt_.checksum, opt_.record_size});
  proto::Step step = hs.start();
  conn_->write_all(step.send.data(), step.send.size());
  HandshakeLimits lim;
  lim.closed_hint = " (is it an aesxfer server?)";
  lim.first_bytes = [&](const uint8_t* p, size_t n) {
    if (std::string g = foreign_greeting(p, n); !g.empty())
      throw Failure(hp + " is not an aesxfer server (it sent '" + g + "')");
  };
  step = drive_handshake(*conn_, hs, lim);
  if (step.ec)
    throw Failure("handshake with " + hp +
                  " failed: " + (step.detail.empty() ? step.ec.message() : step.detail));
  proto::PublicKey expected{};
  const fs::path known = opt_.home / "known_hosts";
  HostCheck hc;
  try {
    hc = check_known_host(known, hp, *hs.host_key(), &expected, !opt_.strict_host_keys);
  } catch (const std::runtime_error& e) {
    throw Failure(e.what());
  }
  switch (hc) {
    case HostCheck::known:
      break;
    case HostCheck::added:
      // As ssh says it: the user learns that a key was trusted on first use, and which.
      if (opt_.announce_new_host)
        std::fprintf(stderr, "aesxfer: Permanently added %s (%s) to the list of known hosts (%s)\n",
                     hp.c_str(), proto::fingerprint(*hs.host_key()).c_str(), known.c_str());
      break;
    case HostCheck::unknown:
      throw Failure("host key for " + hp + " is not known (" + proto::fingerprint(*hs.host_key()) +
                    ") and --strict-host-keys is set; add it to " + known.string() + " after checking it");
    case HostCheck::changed:
      throw Failure("host key for " + hp + " changed (expected " + proto::fingerprint(expected) + ", got " +
                    proto::fingerprint(*hs.host_key()) + "); if this is expected, remove its line from " +
                    known.string());
  }
  step = hs.confirm_host();
  if (step.ec) throw Failure("handshake with " + hp + " failed: " + step.ec.message());
  conn_->write_all(step.send.data(), step.send.size());
  keys_ = std::make_unique<proto::SessionKeys>(hs.keys());
  if (!opt_.keylog.empty()) write_keylog(opt_.keylog, *keys_);
  conn_->start_records(*keys_, true);
  tune_for_path(conn_->fd());
  proto::Message w = conn_->recv_message("the handshake");
  if (w.type != proto::MsgType::welcome) throw Failure("protocol error from " + hp + ": no welcome");
  if (w.status == proto::Status::refused) {
    // Say what to do, in the one line: the line for the server's authorized_keys, which is this
    // identity's .pub file, and where it goes (the server's text is the peer's; made printable).
    const std::string text = w.text.empty() ? proto::status_name(w.status) : w.text;
    throw Failure(printable(hp + " refused the login: " + text) + "; to be let in, add this line to " +
                  "$AESXFER_HOME/authorized_keys on the server (aesxfer keygen prints it): " +
                  encode_public_key(id.pk) + " " + key_comment());
  }
  if (w.status != proto::Status::ok) throw refused(w, hp + " refused the login");
}

Client::~Client() = default;

void Client::throw_receivers_reason(const std::string& remote) {
  // The receiver may have said why it stopped (disk full, ...) before closing.
  try {
    conn_->set_timeout(std::chrono::milliseconds(2000));
    proto::Message m = conn_->recv_message("the transfer");
    if (m.type == proto::MsgType::result && m.status != proto::Status::ok)
      throw refused(m, conn_->peer() + ":" + remote);
  } catch (const Failure& reason) {
    if (std::string(reason.what()).find(remote) != std::string::npos) throw;
  }
}

void Client::expect_ok_result(const std::string& remote) {
  proto::Message res = conn_->recv_message("the transfer");
  if (res.type != proto::MsgType::result) throw Failure("protocol error: expected a result");
  if (res.status != proto::Status::ok) throw refused(res, conn_->peer() + ":" + remote);
}

void Client::send_failure_result(const RecvError& e) noexcept {
  try {
    proto::Message result;
    result.type = proto::MsgType::result;
    result.status = proto::Status(e.status);
    result.text = e.what();
    conn_->send_message(result);
  } catch (...) {
  }
}

void Client::bye() noexcept {
  for (auto& c : extra_) c->bye();
  try {
    proto::Message m;
    m.type = proto::MsgType::bye;
    conn_->send_message(m);
  } catch (...) {
  }
}

FileResult Client::put(const fs::path& local, const std::string& remote,
                       const std::function<void(uint64_t)>& on_start, const ProgressFn& progress,
                       const std::string& name) {
  clean_failure_ = true;  // until a request goes out
  int fd = ::open(local.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Failure(printable(local.string()) + ": " + errno_text(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  ::fstat(fd, &st);
  if (S_ISDIR(st.st_mode)) throw Failure(printable(local.string()) + ": is a directory");
  if (!S_ISREG(st.st_mode)) throw Failure(printable(local.string()) + ": not a regular file");
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

  proto::Message req;
  req.type = proto::MsgType::request;
  req.op = proto::Op::put;
  req.path = remote;
  req.text = name.empty() ? local.filename().string() : name;
  req.size = uint64_t(st.st_size);
  req.mode = st.st_mode & 07777;
  req.mtime = st.st_mtim.tv_sec;
  if (opt_.preserve) req.flags |= proto::kFlagPreserve;
  clean_failure_ = false;
  if (!opt_.resume && !opt_.paced) {
    int n = streams_for(req.size);
    if (n > 1) return put_parallel(fd, local, req, n, on_start, progress);
  }
  std::optional<PrefixScan> scan;
  if (opt_.resume && remote != "/dev/null") {
    // Ask what the server kept of an earlier attempt; resume only if our prefix hashes the same.
    proto::Message probe = req;
    probe.op = proto::Op::probe;
    proto::Message pr = ask(probe);
    if (pr.status != proto::Status::ok) throw refused(pr, conn_->peer() + ":" + remote);
    if (pr.digest.size() == proto::kPrefixMacLen && pr.size > 0 && pr.size <= req.size) {
      // One pass, with keep-alives: the keyed digest to compare and the checksum state the stream
      // continues from, so the server does not wait while the prefix is read a second time.
      scan = scan_prefix(*keys_, fd, pr.size, -1, keepalive());
      if (crypto::ct_equal(scan->mac.data(), pr.digest.data(), proto::kPrefixMacLen)) req.offset = pr.size;
    }
    req.flags |= proto::kFlagResume;
  }
  proto::Message resp = ask(req);
  if (resp.status != proto::Status::ok) {
    clean_failure_ = true;  // refused before any data: the session goes on
    throw refused(resp, conn_->peer() + ":" + remote);
  }

  FileResult r;
  r.file = local.string();
  resume_offset_ = req.offset;
  if (on_start) on_start(req.size);
  auto t0 = Clock::now();
  try {
    StreamOptions so{req.offset, opt_.fine_progress};
    if (req.offset) so.prefix_hash = &scan->sum;
    r.checksum = send_stream(*conn_, fd, req.size, progress, so);
  } catch (const Failure&) {
    throw_receivers_reason(remote);
    throw;
  }
  expect_ok_result(remote);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = req.size;
  r.record_size = conn_->record_size();
  r.resumed_from = req.offset;
  r.verified = true;
  return r;
}

std::string Client::mkdir(const std::string& remote, const std::string& name, uint32_t mode, int64_t mtime,
                          bool apply_attrs) {
  proto::Message req;
  req.type = proto::MsgType::request;
  req.op = proto::Op::mkdir;
  req.path = remote.empty() ? "." : remote;
  req.text = name;
  req.mode = mode & 01777;  // never setuid/setgid (today's server applies mkdir modes as sent)
  req.mtime = mtime;
  if (apply_attrs) req.flags |= proto::kFlagPreserve;
  proto::Message resp = ask(req);
  if (resp.status != proto::Status::ok) throw refused(resp, conn_->peer() + ":" + req.path);
  // A Response text holds at most kMaxMessage bytes (docs/PROTOCOL.md 3.2): an answer of that
  // length may have been cut, and a path built from it would name another directory.
  if (resp.text.size() >= proto::kMaxMessage)
    throw Failure(conn_->peer() + ":" + printable(req.path) + (name.empty() ? "" : "/" + printable(name)) +
                  ": path too long (the server's answer is limited to " + std::to_string(proto::kMaxMessage) +
                  " bytes in protocol " + std::to_string(proto::kVersion) + ")");
  return resp.text.empty() ? req.path : resp.text;
}

FileResult Client::get(const std::string& remote, const fs::path& local_in, uint64_t zero_size,
                       const std::function<void(uint64_t)>& on_start, const ProgressFn& progress) {
  fs::path local = local_in;
  std::error_code ec;
  if (local != "/dev/null" && fs::is_directory(local, ec)) local /= fs::path(remote).filename();
  return fetch(remote, local, zero_size, on_start, progress);
}

proto::Message Client::ask(const proto::Message& req, const char* what) {
  conn_->send_message(req);
  proto::Message resp = conn_->recv_message(what);
  if (resp.type != proto::MsgType::response) throw Failure("protocol error: expected a response");
  return resp;
}

proto::Message Client::stat_remote(const std::string& remote, uint64_t zero_size, const char* what) {
  proto::Message req;
  req.type = proto::MsgType::request;
  req.op = proto::Op::stat;
  req.path = remote;
  req.size = zero_size;
  return ask(req, what);
}

bool Client::is_remote_dir(const std::string& remote) {
  if (remote.empty() || remote == "." || remote == "./" || remote == "/") return true;
  proto::Message st = stat_remote(remote, 0, "the destination check");
  const std::string dir = ": is a directory";
  return st.status != proto::Status::ok && st.text.size() >= dir.size() &&
         st.text.compare(st.text.size() - dir.size(), dir.size(), dir) == 0;
}

std::function<void()> Client::keepalive() {
  return [this, last = Clock::now()]() mutable {
    if (Clock::now() - last < std::chrono::milliseconds(500)) return;
    stat_remote(".", 0, "a keep-alive");  // whatever the status: the round trip is what counts
    last = Clock::now();
  };
}

// Where a get writes. Inside a tree (dirfd given): the name in that directory, through openat
// with O_NOFOLLOW (a symbolic link there is replaced, never followed). A destination the user
// named: a FIFO, character device or socket is written through (recv host:f /dev/stdout writes
// to standard output), a symbolic link to a regular file updates its target (beside the
// target), anything else gets the temporary file and the rename.
std::unique_ptr<AtomicFile> open_local(const fs::path& local, int dirfd) {
  if (dirfd != AT_FDCWD) return std::make_unique<AtomicFile>(dirfd, local.filename().string(), local);
  struct stat st {};
  bool exists = ::stat(local.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    int fd = ::open(local.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) throw Failure(printable(local.string()) + ": " + errno_text(errno));
    return AtomicFile::write_through(fd, local);
  }
  struct stat lst {};
  if (::lstat(local.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    std::error_code ec;
    fs::path target = fs::weakly_canonical(local, ec);
    if (ec) throw Failure(printable(local.string()) + ": " + ec.message());
    // /dev/stdout and friends: a link into /proc/self/fd names an open file of this process,
    // which only writing through reaches.
    if (target.string().rfind("/proc/", 0) == 0 ||
        fs::read_symlink(local, ec).string().rfind("/proc/", 0) == 0) {
      int fd = ::open(local.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
      if (fd < 0) throw Failure(printable(local.string()) + ": " + errno_text(errno));
      return AtomicFile::write_through(fd, local);
    }
    return std::make_unique<AtomicFile>(target);
  }
  return std::make_unique<AtomicFile>(local);
}

// True when a get into `local` must be written through (no temporary file, no resume, one stream).
static bool writes_through(const fs::path& local, int dirfd) {
  if (dirfd != AT_FDCWD) return false;
  struct stat st {};
  if (::stat(local.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return true;
  std::error_code ec;
  return fs::is_symlink(local, ec) && fs::read_symlink(local, ec).string().rfind("/proc/", 0) == 0;
}

FileResult Client::fetch(const std::string& remote, const fs::path& local, uint64_t zero_size,
                         const std::function<void(uint64_t)>& on_start, const ProgressFn& progress,
                         uint64_t size_hint, int dirfd) {
  bool sink = local == "/dev/null" && dirfd == AT_FDCWD;
  bool through = !sink && writes_through(local, dirfd);
  if (opt_.resume && !sink && !through && remote != "/dev/zero")
    return fetch_resumed(remote, local, zero_size, on_start, progress, dirfd);
  resume_offset_ = 0;
  if (!opt_.resume && !opt_.paced && !through &&
      (opt_.streams > 1 || (opt_.streams == 0 && auto_streams() > 1)) &&
      (size_hint == UINT64_MAX || streams_for(size_hint) > 1)) {
    // Ask the size first: a file big enough goes over several connections.
    proto::Message st = stat_remote(remote, zero_size);
    if (st.status != proto::Status::ok) throw refused(st, conn_->peer() + ":" + remote);
    int n = streams_for(st.size);
    if (n > 1) return get_parallel(remote, local, st, n, on_start, progress, dirfd);
  }
  proto::Message req;
  req.type = proto::MsgType::request;
  req.op = proto::Op::get;
  req.path = remote;
  req.size = zero_size;
  proto::Message resp = ask(req);
  if (resp.status != proto::Status::ok) throw refused(resp, conn_->peer() + ":" + remote);

  std::unique_ptr<AtomicFile> out;
  if (!sink) out = open_local(local, dirfd);

  FileResult r;
  r.file = remote;
  if (on_start) on_start(resp.size);
  auto t0 = Clock::now();
  proto::Message result;
  result.type = proto::MsgType::result;
  try {
    r.checksum =
        recv_stream(*conn_, out ? out->fd() : -1, resp.size, progress, StreamOptions{0, opt_.fine_progress});
    if (out)
      out->commit(effective_mode(resp.mode, opt_.preserve), effective_mtime(resp.mtime, opt_.preserve));
  } catch (const RecvError& e) {
    send_failure_result(e);
    throw Failure(printable(local.string()) + ": " + e.what());
  }
  conn_->send_message(result);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = resp.size;
  r.record_size = conn_->record_size();
  r.verified = true;
  return r;
}

}  // namespace aesxfer::net
