// StreamOptions::file_digest exists only so that bench/pipeline_floor can measure what the
// whole-file SHA-256 costs. These tests pin down that it cannot weaken a real transfer: a stream
// sent without the digest is refused by a receiver with the default options (which every product
// path uses), and the default stream still verifies.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "net/conn.h"
#include "net/transfer.h"
#include "crypto/suite.h"
#include "proto/handshake.h"

namespace aesxfer::test {
namespace {

struct Pair {
  proto::SessionKeys keys;
  std::unique_ptr<net::Conn> client, server;
  Pair() {
    keys.cipher = crypto::find_cipher("aes128-gcm");
    keys.mac = crypto::find_mac("none");
    for (auto* d : {&keys.c2s, &keys.s2c}) {
      for (size_t i = 0; i < sizeof d->enc; ++i) d->enc[i] = uint8_t(i * 7 + 1);
      for (size_t i = 0; i < sizeof d->mac; ++i) d->mac[i] = uint8_t(i * 5 + 3);
      for (size_t i = 0; i < sizeof d->iv; ++i) d->iv[i] = uint8_t(i + 11);
    }
    int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(l, 1), 0);
    EXPECT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(l);
    client = std::make_unique<net::Conn>(c, std::chrono::milliseconds(10000), "c");
    server = std::make_unique<net::Conn>(s, std::chrono::milliseconds(10000), "s");
    client->start_records(keys, true);
    server->start_records(keys, false);
  }
};

TEST(DigestSwitch, ReceiverWithDefaultsRefusesAStreamWithoutTheDigest) {
  Pair p;
  const uint64_t size = 3 * proto::kDefaultPayload + 5;
  net::StreamOptions off;
  off.file_digest = false;
  std::thread tx([&] { net::send_stream(*p.client, -1, size, nullptr, off); });
  try {
    net::recv_stream(*p.server, -1, size, nullptr);  // defaults, as every product path
    ADD_FAILURE() << "a stream without the whole-file SHA-256 was accepted";
  } catch (const net::RecvError& e) {
    EXPECT_NE(std::string(e.what()).find("SHA-256"), std::string::npos) << e.what();
  }
  tx.join();
}

TEST(DigestSwitch, DefaultStreamVerifiesAndDigestEqualsBothEnds) {
  Pair p;
  const uint64_t size = 2 * proto::kDefaultPayload + 1;
  std::array<uint8_t, 32> sent{};
  std::thread tx([&] { sent = net::send_stream(*p.client, -1, size, nullptr); });
  auto got = net::recv_stream(*p.server, -1, size, nullptr);
  tx.join();
  EXPECT_EQ(got, sent);
  EXPECT_NE(got, (std::array<uint8_t, 32>{}));
}

}  // namespace
}  // namespace aesxfer::test
