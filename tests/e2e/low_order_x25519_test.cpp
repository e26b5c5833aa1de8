// Issue 14 item 19: a ClientHello carrying a low-order X25519 value (the shared secret would be all
// zero) is refused before the server signs anything or derives keys (docs/PROTOCOL.md 1.5): the
// state machine answers nothing, and a real server closes the connection without a byte.
#include <gtest/gtest.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "crypto/checksum.h"
#include "crypto/suite.h"
#include "proto/error.h"
#include "proto/handshake.h"
#include "tests/harness.h"
#include "tests/test_util.h"

namespace aesxfer::proto {
namespace {

using test::Bytes;

// The X25519 public values whose shared secret is all zero for every private key: the points of
// order 1, 2, 4 and 8 and their non-canonical encodings (x + p, top bit set). These are the 14
// distinct public keys of the ZeroSharedSecret cases of Wycheproof's x25519_test.json (every case
// of that file also goes through the handshake in wycheproof_test.cpp).
const char* const kLowOrder[] = {
    "0000000000000000000000000000000000000000000000000000000000000000",  // 0
    "0100000000000000000000000000000000000000000000000000000000000000",  // 1
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",  // order 8
    "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",  // order 8
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  // p - 1
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b880",  // the same, top bit set
    "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f11d7",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  // p (= 0)
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  // p + 1 (= 1)
    "0000000000000000000000000000000000000000000000000000000000000080",
    "0100000000000000000000000000000000000000000000000000000000000080",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
};

// A ClientHello made by hand from the table of PROTOCOL.md 1.2.
Bytes hand_made_client_hello(const Bytes& kx) {
  Bytes f;
  f.reserve(85);
  for (uint8_t b : {0, 0, 0, 81, 1}) f.push_back(b);  // length 81, type 1
  const std::string magic = "AESXFER1";
  f.insert(f.end(), magic.begin(), magic.end());
  f.push_back(kVersion);
  f.push_back(crypto::find_cipher("aes128-gcm")->wire_id);
  f.push_back(crypto::find_mac("none")->wire_id);
  f.push_back(uint8_t(crypto::ChecksumAlg::xxh128));
  f.insert(f.end(), kx.begin(), kx.end());
  f.insert(f.end(), 32, 0x5a);  // random
  const Bytes rs = {0x00, 0x04, 0x00, 0x00};
  f.insert(f.end(), rs.begin(), rs.end());
  EXPECT_EQ(f.size(), 85u);
  return f;
}

TEST(LowOrderX25519, ServerRefusesBeforeSigning) {
  ASSERT_GE(sodium_init(), 0);
  const Identity host = Identity::generate(), client = Identity::generate();
  // Control: the same hand-made hello with an ordinary X25519 value gets a signed ServerHello.
  {
    uint8_t pk[32], sk[32];
    crypto_kx_keypair(pk, sk);
    ServerHandshake s(host, [](const PublicKey&) { return true; });
    const Bytes ch = hand_made_client_hello(Bytes(pk, pk + 32));
    const Step st = s.feed(ch.data(), ch.size());
    EXPECT_FALSE(st.ec) << st.detail;
    EXPECT_EQ(st.send.size(), 179u);
  }
  for (const char* x : kLowOrder) {
    SCOPED_TRACE(x);
    const Bytes kx = test::hex(x);
    uint8_t q[32], sk[32];
    randombytes_buf(sk, sizeof sk);
    ASSERT_EQ(-1, crypto_scalarmult(q, sk, kx.data())) << "not a low-order value";
    bool asked = false;
    ServerHandshake s(host, [&](const PublicKey&) { return asked = true; });
    const Bytes ch = hand_made_client_hello(kx);
    const Step st = s.feed(ch.data(), ch.size());
    EXPECT_EQ(st.ec, make_error_code(errc::bad_handshake));
    EXPECT_NE(st.detail.find("invalid client key exchange value"), std::string::npos) << st.detail;
    EXPECT_TRUE(st.send.empty()) << "the server answered (and signed) a low-order value";
    EXPECT_FALSE(st.done);
    EXPECT_FALSE(asked);
    // Nothing more is accepted on this connection.
    const Bytes auth = {0, 0, 0, 65, 3};
    const Step more = s.feed(auth.data(), auth.size());
    EXPECT_TRUE(more.ec);
    EXPECT_TRUE(more.send.empty());
  }
}

// On a real server: the connection is closed without a single byte sent, and the log says why.
TEST(LowOrderX25519, RealServerClosesWithoutAnswer) {
  test::Workspace ws;
  test::ServerProcess server(ws.home, ws.root, {"--timeout", "20", "--handshake-timeout", "20"});
  const Identity client = Identity::generate();
  for (const char* x : {kLowOrder[0], kLowOrder[2], kLowOrder[5]}) {
    SCOPED_TRACE(x);
    const Bytes ch = hand_made_client_hello(test::hex(x));
    const int fd = test::connect_loopback(server.port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, ch.data(), ch.size(), MSG_NOSIGNAL), ssize_t(ch.size()));
    size_t received = 0;
    bool closed = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd pf{fd, POLLIN, 0};
      if (::poll(&pf, 1, 200) <= 0) continue;
      uint8_t buf[512];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        received += size_t(n);
        continue;
      }
      closed = n == 0 || errno == ECONNRESET;
      break;
    }
    ::close(fd);
    EXPECT_TRUE(closed) << "still open after 10 s";
    EXPECT_EQ(received, 0u) << "the server sent something (a ServerHello) for a low-order value";
  }
  EXPECT_TRUE(server.wait_for_log("invalid client key exchange value")) << server.log();
  EXPECT_TRUE(server.running());
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(test::sanitizer_findings(server.log()), "");
}

}  // namespace
}  // namespace aesxfer::proto
