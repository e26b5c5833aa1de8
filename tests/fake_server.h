// A fake aesxfer server for the client's tests (a hostile server driven by hand): the real
// handshake with one host key per test process, then every request answered by a test's handler.
#pragma once
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/conn.h"
#include "net/handshake_driver.h"
#include "net/transfer.h"
#include "proto/handshake.h"
#include "proto/listing.h"

namespace aesxfer::test {

// The request a fake server's handler is answering (set by FakeServer for its handler's thread):
// a pipelined one's answers carry its tag (docs/PROTOCOL.md 3.10), as a real server's do.
inline thread_local const proto::Message* fake_current_request = nullptr;
// Set when the handler refused a pipelined put: its data is on the way, and FakeServer reads it
// to its end record and drops it (the skip rule), as a real server does.
inline thread_local bool fake_refused_ahead_put = false;

inline proto::Message response(proto::Status st, const std::string& text = "") {
  proto::Message m;
  m.type = proto::MsgType::response;
  m.status = st;
  m.text = text;
  if (fake_current_request && (fake_current_request->flags & proto::kFlagAhead) && st != proto::Status::ok &&
      fake_current_request->op == proto::Op::put)
    fake_refused_ahead_put = true;
  if (fake_current_request && (fake_current_request->flags & proto::kFlagAhead)) {
    m.tagged = true;
    m.tag = fake_current_request->tag;
  }
  return m;
}

// One listing page holding `entries` (the last one unless said otherwise), encoded.
inline std::vector<uint8_t> page_of(std::vector<proto::ListEntry> entries, bool last = true) {
  proto::ListPage p;
  p.last = last;
  p.entries = std::move(entries);
  std::vector<uint8_t> b;
  proto::encode_list_page(p, b);
  return b;
}

// A socket listening on 127.0.0.1 at an ephemeral port (written to `port`); -1 when it cannot.
// `rcvbuf`: the receive buffer its connections get (set before they are made, so their window is
// that small from the start), 0 for the kernel's.
inline int listen_loopback(uint16_t& port, int backlog = 8, int rcvbuf = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  port = ntohs(a.sin_port);
  return fd;
}

// The server's side of a session's start, as aesxfer serve does it: the real handshake with
// `host` (any client key accepted), the record keys, then Welcome (with `status` and `text`: a
// refusal). False when the handshake failed.
inline bool start_fake_session(net::Conn& c, const proto::Identity& host,
                               proto::Status status = proto::Status::ok, const std::string& text = "") {
  proto::ServerHandshake hs(host, [](const proto::PublicKey&) { return true; });
  if (net::drive_handshake(c, hs).ec) return false;
  c.start_records(hs.keys(), false);
  proto::Message w;
  w.type = proto::MsgType::welcome;
  w.status = status;
  w.text = text;
  c.send_message(w);
  return true;
}

// A fake aesxfer server: the real handshake with the process's test host key, then every request goes to
// `on_request`, which answers it by hand (the helpers below), until the client says bye or
// leaves. Serves the clients that connect, one after the other, until destroyed. `seen` records
// every request ("op path" plus " offset=N digest" for a get that offers a resume prefix).
class FakeServer {
 public:
  using Handler = std::function<void(net::Conn&, const proto::Message&)>;
  // `concurrent`: each connection served on its own thread (parallel streams), the handler then
  // called from several at once; else one after the other.
  // `rcvbuf`: as listen_loopback's (a server whose TCP acknowledges little).
  explicit FakeServer(Handler on_request, bool concurrent = false, int rcvbuf = 0)
      : on_request_(std::move(on_request)) {
    lfd_ = listen_loopback(port_, 8, rcvbuf);
    thread_ = std::thread([this, concurrent] {
      for (;;) {
        int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        if (concurrent)
          conns_.emplace_back([this, fd] { serve(fd); });
        else
          serve(fd);
      }
    });
  }
  ~FakeServer() {
    ::shutdown(lfd_, SHUT_RDWR);
    thread_.join();
    for (auto& t : conns_) t.join();
    ::close(lfd_);
  }
  uint16_t port() const { return port_; }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> g(mu_);
    return seen_;
  }
  // How many sessions ended with the client's Bye (PROTOCOL.md 3.3).
  int byes() {
    std::lock_guard<std::mutex> g(mu_);
    return byes_;
  }
  std::string seen_text() {
    std::string out;
    for (const auto& s : seen()) out += s + "\n";
    return out;
  }

  // A server of one tree: a list request gets `entries` for "tree", and every get `content`.
  static Handler serves_tree(std::vector<proto::ListEntry> entries, std::string content) {
    return
        [entries = std::move(entries), content = std::move(content)](net::Conn& c, const proto::Message& m) {
          if (m.op == proto::Op::list)
            send_listing(c, "tree", entries);
          else if (m.op == proto::Op::get)
            send_file(c, content);
        };
  }
  // Answers a get with `content` (mode, mtime as given) and reads the client's Result.
  static void send_file(net::Conn& c, const std::string& content, uint32_t mode = 0644,
                        int64_t mtime = 1000000000) {
    proto::Message ok = response(proto::Status::ok);
    ok.size = content.size();
    ok.mode = mode;
    ok.mtime = mtime;
    c.send_message(ok);
    int fd = ::memfd_create("fake", MFD_CLOEXEC);
    if (::write(fd, content.data(), content.size()) != ssize_t(content.size())) throw proto::Failure("memfd");
    ::lseek(fd, 0, SEEK_SET);
    net::send_stream(c, fd, content.size(), nullptr, net::StreamOptions{});
    ::close(fd);
    // A pipelined get's Result comes later, between requests (the loop passes over it).
    if (!ok.tagged) c.recv_message("the result");
  }
  // Answers a list request for `dir` with these entries.
  static void send_listing(net::Conn& c, const std::string& dir, const std::vector<proto::ListEntry>& entries,
                           uint32_t mode = 0755) {
    send_raw_listing(c, dir, entries.size(), {page_of(entries)}, mode);
  }
  // Answers a list request with Response{ok, size = n, text = dir} and these raw page payloads.
  static void send_raw_listing(net::Conn& c, const std::string& dir, uint64_t n,
                               const std::vector<std::vector<uint8_t>>& pages, uint32_t mode = 0755) {
    proto::Message ok = response(proto::Status::ok, dir);
    ok.size = n;
    ok.mode = mode;
    ok.mtime = 1000000000;
    c.send_message(ok);
    for (const auto& p : pages) {
      std::memcpy(c.payload_buffer(), p.data(), p.size());
      c.send_record(proto::RecordType::control, 0, p.size());
    }
  }

 private:
  void serve(int fd) {
    try {
      net::Conn c(fd, std::chrono::milliseconds(10000), "client");
      if (!start_fake_session(c, host_)) return;
      for (;;) {
        proto::Message m = c.recv_message("the session");
        if (m.type == proto::MsgType::bye) {
          std::lock_guard<std::mutex> g(mu_);
          ++byes_;
          return;
        }
        if (m.type != proto::MsgType::request) continue;
        {
          std::lock_guard<std::mutex> g(mu_);
          std::string line = std::string(m.op == proto::Op::get    ? "get"
                                         : m.op == proto::Op::list ? "list"
                                         : m.op == proto::Op::stat ? "stat"
                                         : m.op == proto::Op::put  ? "put"
                                                                   : "other") +
                             " " + m.path;
          if (!m.digest.empty()) line += " offset=" + std::to_string(m.offset) + " digest";
          seen_.push_back(line);
        }
        fake_current_request = &m;
        fake_refused_ahead_put = false;
        on_request_(c, m);
        fake_current_request = nullptr;
        if (fake_refused_ahead_put) net::recv_stream(c, -1, m.size, nullptr);
      }
    } catch (const std::exception&) {
    }
  }
  // One host key for every fake server of the test process: the tests share an AESXFER_HOME,
  // and an ephemeral port reused by a later fake server must not look like a changed host key
  // (RecvTree.HostileListingsAreRefusedBeforeAnythingIsWritten failed once that way).
  static const proto::Identity& shared_host() {
    static const proto::Identity id = proto::Identity::generate();
    return id;
  }
  proto::Identity host_ = shared_host();
  Handler on_request_;
  std::mutex mu_;
  std::vector<std::string> seen_;
  int byes_ = 0;
  int lfd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::vector<std::thread> conns_;  // concurrent: one per connection (only thread_ adds)
};

}  // namespace aesxfer::test
