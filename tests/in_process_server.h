// The server's request path in this process, for tests of the handlers and of
// the client's parts against them without the binary: a loopback listener whose
// every connection runs the real handshake and server::serve_requests
// (server/requests.h) on its own thread, all sessions sharing one Root,
// PartsRegistry and Sweeper as `aesxfer serve` does. Any client key is
// accepted. The log lines and each session's end (its error, or "" after a bye)
// are kept for the test to read.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "crypto/suite.h"
#include "net/conn.h"
#include "net/handshake_driver.h"
#include "proto/handshake.h"
#include "server/requests.h"

namespace aesxfer::test {

class InProcessServer {
 public:
  explicit InProcessServer(const std::filesystem::path &root) : root_(root) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(lfd_, reinterpret_cast<sockaddr *>(&a), sizeof a);
    ::listen(lfd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr *>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_ = std::thread([this] {
      for (;;) {
        int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        std::lock_guard<std::mutex> g(mu_);
        sessions_.emplace_back([this, fd] { session(fd); });
      }
    });
  }
  ~InProcessServer() {
    ::shutdown(lfd_, SHUT_RDWR);
    accept_.join();
    std::vector<std::thread> s;
    {
      std::lock_guard<std::mutex> g(mu_);
      s.swap(sessions_);
    }
    for (auto &t : s) t.join();
    ::close(lfd_);
  }
  uint16_t port() const { return port_; }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> g(mu_);
    return log_;
  }
  // How each finished session ended: "" after the client's bye, else the
  // Failure's text.
  std::vector<std::string> ends() {
    std::lock_guard<std::mutex> g(mu_);
    return ends_;
  }
  // Waits (up to 10 s) until `n` sessions have ended.
  bool wait_ends(size_t n) {
    for (int i = 0; i < 1000; ++i) {
      if (ends().size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Client options for this server: loopback, aes128-gcm, the test's
  // AESXFER_HOME.
  client::ClientOptions client_options(const std::filesystem::path &home) const {
    client::ClientOptions co;
    co.host = "127.0.0.1";
    co.port = port_;
    co.cipher = crypto::find_cipher("aes128-gcm");
    co.mac = crypto::find_mac("none");
    co.home = home;
    co.timeout = std::chrono::milliseconds(10000);
    co.streams = 1;
    return co;
  }

 private:
  void session(int fd) {
    std::string end;
    try {
      net::Conn c(fd, std::chrono::milliseconds(10000), "client");
      proto::ServerHandshake hs(host(), [](const proto::PublicKey &) { return true; });
      proto::Step st = net::drive_handshake(c, hs);
      if (st.ec) throw proto::Failure("handshake failed: " + st.ec.message());
      c.start_records(hs.keys(), false);
      proto::Message w;
      w.type = proto::MsgType::welcome;
      c.send_message(w);
      server::RequestContext ctx{
          c, hs.keys(), root_, limits_, parts_, sweeper_, listings_, [this](const std::string &l) {
            std::lock_guard<std::mutex> g(mu_);
            log_.push_back(l);
          }};
      server::serve_requests(ctx);
    } catch (const std::exception &e) {
      end = e.what();
      if (end.empty()) end = "failed";
    }
    std::lock_guard<std::mutex> g(mu_);
    ends_.push_back(end);
  }
  // One host key for the test process (see FakeServer::shared_host: known_hosts
  // is shared).
  static const proto::Identity &host() {
    static const proto::Identity id = proto::Identity::generate();
    return id;
  }

  server::Root root_;
  server::RequestLimits limits_;
  server::PartsRegistry parts_;
  server::Sweeper sweeper_{std::chrono::hours(24 * 7)};
  server::ListingMemory listings_;
  std::mutex mu_;
  std::vector<std::string> log_, ends_;
  std::vector<std::thread> sessions_;
  std::thread accept_;
  int lfd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace aesxfer::test
