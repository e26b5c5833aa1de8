// net/handshake_driver.h: the one handshake loop, both ends over a socket pair.
#include "net/handshake_driver.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "crypto/suite.h"
#include "proto/error.h"

namespace aesxfer::net {
namespace {

using namespace std::chrono_literals;
using proto::Failure;

struct Ends {
  std::unique_ptr<Conn> client, server;
  Ends() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("socketpair");
    client = std::make_unique<Conn>(sv[0], 5000ms, "server");
    server = std::make_unique<Conn>(sv[1], 5000ms, "client");
  }
};

// Both ends driven by the same function; the client's ClientAuth and its first record leave in
// one write, so the server's driver must hand the record's bytes back to the connection.
TEST(HandshakeDriver, BothEndsAndRecordsRightBehindTheLastFrame) {
  Ends e;
  proto::Identity host = proto::Identity::generate(), me = proto::Identity::generate();
  proto::ServerHandshake sh(host, [&](const proto::PublicKey& k) { return k == me.pk; });
  proto::Message got;
  std::string server_error;
  std::thread server([&] {
    try {
      proto::Step st = drive_handshake(*e.server, sh);
      if (st.ec || !st.done) throw Failure("server: " + st.ec.message());
      e.server->start_records(sh.keys(), false);
      got = e.server->recv_message("the test");
    } catch (const std::exception& x) {
      server_error = x.what();
    }
  });
  proto::ClientHandshake ch(me, *crypto::find_cipher("aes128-gcm"), *crypto::find_mac("none"));
  proto::Step st = ch.start();
  e.client->write_all(st.send.data(), st.send.size());
  st = drive_handshake(*e.client, ch);
  ASSERT_FALSE(st.ec) << st.ec.message();
  ASSERT_TRUE(st.check_host);
  EXPECT_EQ(*ch.host_key(), host.pk);
  std::vector<uint8_t> out = ch.confirm_host().send;
  // A Bye record sealed by hand and appended to ClientAuth.
  proto::RecordSealer sealer(*ch.keys().cipher, *ch.keys().mac, ch.keys().c2s);
  std::vector<uint8_t> rec(proto::kHeaderLen + 1 + sealer.max_overhead());
  rec[proto::kHeaderLen] = uint8_t(proto::MsgType::bye);
  rec.resize(sealer.seal(proto::RecordType::control, 0, rec.data(), 1));
  out.insert(out.end(), rec.begin(), rec.end());
  e.client->write_all(out.data(), out.size());
  server.join();
  EXPECT_EQ(server_error, "");
  EXPECT_EQ(got.type, proto::MsgType::bye);
}

TEST(HandshakeDriver, WholeHandshakeDeadline) {
  Ends e;
  proto::Identity host = proto::Identity::generate();
  proto::ServerHandshake sh(host, [](const proto::PublicKey&) { return true; });
  HandshakeLimits lim;
  lim.total = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    drive_handshake(*e.server, sh, lim);
    FAIL() << "a silent client passed the handshake";
  } catch (const Failure& f) {
    EXPECT_STREQ(f.what(), "handshake not completed within 0.3 s");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_EQ(e.server->timeout(), 5000ms) << "the per-read timeout is put back";
}

TEST(HandshakeDriver, PeerClosesOrSendsSomethingElse) {
  {
    Ends e;
    proto::Identity host = proto::Identity::generate();
    proto::ServerHandshake sh(host, [](const proto::PublicKey&) { return true; });
    e.client.reset();
    HandshakeLimits lim;
    lim.closed_hint = " (hint)";
    try {
      drive_handshake(*e.server, sh, lim);
      FAIL();
    } catch (const Failure& f) {
      EXPECT_STREQ(f.what(), "client closed the connection during the handshake (hint)");
    }
  }
  {
    Ends e;
    proto::Identity host = proto::Identity::generate();
    proto::ServerHandshake sh(host, [](const proto::PublicKey&) { return true; });
    const std::string junk = "SSH-2.0-OpenSSH_9.2p1\r\n";
    e.client->write_all(reinterpret_cast<const uint8_t*>(junk.data()), junk.size());
    std::string seen;
    HandshakeLimits lim;
    lim.first_bytes = [&](const uint8_t* p, size_t n) { seen.assign(reinterpret_cast<const char*>(p), n); };
    proto::Step st = drive_handshake(*e.server, sh, lim);
    EXPECT_EQ(st.ec, make_error_code(proto::errc::bad_handshake));
    EXPECT_EQ(seen, junk);
  }
}

}  // namespace
}  // namespace aesxfer::net
