// Issue 14 item 17 (protocol 4): a passive observer cannot link sessions to a client identity.
// The client's long-term Ed25519 key travels only inside the sealed ClientAuth (PROTOCOL.md 1.4):
// every byte the real client sends is captured through a loopback relay and searched for the key
// in every form a tool could print it (raw, base64 as in id_ed25519.pub, SHA-256, fingerprint),
// while the login and the transfer still succeed. A protocol-3 client gets the version refusal.
#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "files/keystore.h"
#include "proto/handshake.h"
#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using Bytes = std::vector<uint8_t>;

bool contains(const Bytes& hay, const Bytes& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}
Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

using IdentityPrivacy = ServerTest;
using Clock = std::chrono::steady_clock;

TEST_F(IdentityPrivacy, ClientKeyNeverCrossesTheWireInClear) {
  write_random_file(ws.local / "f.bin", 100000, 17);
  for (const std::vector<std::string>& suite :
       {std::vector<std::string>{"-c", "none", "-m", "none"}, std::vector<std::string>{"-c", "aes128-gcm"}}) {
    SCOPED_TRACE(suite[1]);
    FaultSpec spec;
    spec.tag_len = suite[1] == "none" ? 0 : 16;
    spec.capture_c2s = true;
    Relay relay(server->port(), spec);
    std::vector<std::string> args{"send",
                                  (ws.local / "f.bin").string(),
                                  "127.0.0.1:f.bin",
                                  "-P",
                                  std::to_string(relay.port()),
                                  "--timeout",
                                  "10",
                                  "-q"};
    args.insert(args.end(), suite.begin(), suite.end());
    const ProcResult r = run_aesxfer(args, ws.home, 60);
    ASSERT_EQ(r.exit_code, 0) << r.describe();  // the login succeeded
    EXPECT_EQ(sha256_file(ws.root / "f.bin"), sha256_file(ws.local / "f.bin"));
    ASSERT_TRUE(relay.wait_done(10));
    const Bytes wire = relay.captured_c2s();
    ASSERT_GT(wire.size(), 100000u);  // the whole session went through the relay
    const proto::Identity id = files::load_identity(ws.home / "id_ed25519");
    const Bytes pk(id.pk.begin(), id.pk.end());
    const std::string line = files::encode_public_key(id.pk);  // "aesxfer-ed25519 <base64>"
    const std::string b64 = line.substr(line.find(' ') + 1);
    Bytes digest(32);
    crypto_hash_sha256(digest.data(), pk.data(), pk.size());
    const std::string fp = proto::fingerprint(id.pk);
    EXPECT_FALSE(contains(wire, pk)) << "the client's public key is on the wire";
    EXPECT_FALSE(contains(wire, bytes_of(b64.substr(0, 40)))) << "its base64 is on the wire";
    EXPECT_FALSE(contains(wire, digest)) << "its SHA-256 is on the wire";
    EXPECT_FALSE(contains(wire, bytes_of(fp.substr(7, 20)))) << "its fingerprint is on the wire";
    // The control: the capture does hold what is in clear (the ClientHello's magic) and, with
    // cipher none, the file's name.
    EXPECT_TRUE(contains(wire, bytes_of("AESXFER1")));
    if (suite[1] == "none") {
      EXPECT_TRUE(contains(wire, bytes_of("f.bin")));
    }
  }
}

// An unauthorized client: its key is not on the wire either, yet the server (which learns it by
// opening ClientAuth) names it in its log, and the client reads the refusal inside the channel.
TEST_F(IdentityPrivacy, UnauthorizedKeyIsNamedInTheServerLogOnly) {
  TempDir other("aesxfer-other");
  write_text_file(ws.local / "f", "x");
  FaultSpec spec;
  spec.capture_c2s = true;
  Relay relay(server->port(), spec);
  const ProcResult r = run_aesxfer(
      {"send", (ws.local / "f").string(), "127.0.0.1:f", "-P", std::to_string(relay.port()), "-q"},
      other.path(), 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("not authorized"), std::string::npos) << r.err;
  ASSERT_TRUE(relay.wait_done(10));
  const proto::Identity id = files::load_identity(other.path() / "id_ed25519");
  EXPECT_FALSE(contains(relay.captured_c2s(), Bytes(id.pk.begin(), id.pk.end())));
  EXPECT_TRUE(server->wait_for_log("refused unauthorized client key " + proto::fingerprint(id.pk)))
      << server->log();
  EXPECT_FALSE(fs::exists(ws.root / "f"));
}

// A protocol-3 client (its ClientHello carries its key at body offset 76, 112 bytes) is told
// the version by a ServerHello with status 3 and this build's version, and the server logs both.
// A twenty-fifth re-attack (N1): a stranger with fresh keys in a loop (no authorized key needed)
// wrote a log line per refused key, 4,771 lines in 5 s. Ten lines a second at most, the next one
// counting those left out; an operator still sees each of a few refusals.
// A stranger that resets the connection right after its ClientAuth: the server's failed send of
// the refusal was logged outside every budget, 1,560 lines a second (a forty-first re-attack,
// A-F1). Every failure before a key is accepted is within a budget (one line a second before the
// key is known, ten for refused keys).
TEST_F(IdentityPrivacy, StrangersThatResetAfterTheirAuthCostTheLogTenLinesASecond) {
  const proto::Identity id = proto::Identity::generate();
  const auto t0 = Clock::now();
  int tried = 0;
  while (Clock::now() - t0 < std::chrono::milliseconds(1500)) {
    net::Conn c(net::connect_tcp("127.0.0.1", server->port(), std::chrono::milliseconds(5000)),
                std::chrono::milliseconds(8000), "test");
    proto::ClientHandshake hs(id, *crypto::find_cipher("aes128-gcm"), *crypto::find_mac("none"));
    proto::Step step = hs.start();
    c.write_all(step.send.data(), step.send.size());
    step = net::drive_handshake(c, hs);
    ASSERT_FALSE(step.ec) << step.detail;
    step = hs.confirm_host();
    c.write_all(step.send.data(), step.send.size());
    const linger reset{1, 0};
    ::setsockopt(c.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    ++tried;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  size_t lines = 0;
  for (const auto& l : nonempty_lines(server->log())) lines += l.find(" error=") != std::string::npos;
  std::printf("[reset   ] %d resets after ClientAuth in %.1f s: %zu log lines\n", tried, secs, lines);
  EXPECT_GT(tried, 20);
  EXPECT_LE(double(lines), 11 * (secs + 2)) << server->log().substr(0, 4000);
}

TEST_F(IdentityPrivacy, RefusedKeysCostTheLogTenLinesASecond) {
  TempDir other("aesxfer-stranger");
  const fs::path id = other.path() / "id_ed25519";
  const auto t0 = Clock::now();
  int tried = 0;
  while (Clock::now() - t0 < std::chrono::milliseconds(1500)) {
    try {
      HandSession s(server->port(), id);
    } catch (const proto::Failure&) {
    }
    ++tried;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  try {
    HandSession s(server->port(), id);
  } catch (const proto::Failure&) {
  }
  ASSERT_TRUE(server->wait_for_log("refused_keys_without_a_line=", 5)) << server->log().substr(0, 4000);
  const std::string log = server->log();
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("refused unauthorized client key", at)) != std::string::npos; ++at)
    ++lines;
  std::printf("[refused ] %d refused logins in %.1f s: %zu log lines\n", tried, secs, lines);
  EXPECT_GT(tried, 20);
  EXPECT_LE(double(lines), 10 * (secs + 2) + 1) << log.substr(0, 4000);
}

TEST_F(IdentityPrivacy, Version3ClientHelloGetsTheVersionRefusal) {
  Bytes ch = {0, 0, 0, 113, 1, 'A', 'E', 'S', 'X', 'F', 'E', 'R', '1', 3, 1, 2, 2};
  ch.insert(ch.end(), 32, 0x09);  // X25519 value
  ch.insert(ch.end(), 32, 0x5a);  // random
  ch.insert(ch.end(), 32, 0x77);  // client Ed25519 key (protocol 3)
  for (uint8_t b : {0x00, 0x04, 0x00, 0x00}) ch.push_back(b);
  const int fd = connect_loopback(server->port());
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::send(fd, ch.data(), ch.size(), MSG_NOSIGNAL), ssize_t(ch.size()));
  Bytes got;
  uint8_t buf[512];
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.insert(got.end(), buf, buf + n);
  ::close(fd);
  ASSERT_EQ(got.size(), 4u + 1 + 174);  // one ServerHello, then the server closed
  EXPECT_EQ(got[4], 2);                 // ServerHello
  EXPECT_EQ(got[13], proto::kVersion);  // the client reads "the server speaks protocol version 5"
  EXPECT_EQ(got[14], 3);                // status: bad version
  EXPECT_TRUE(server->wait_for_log("client speaks protocol version 3, this server " +
                                   std::to_string(proto::kVersion)))
      << server->log();
}

}  // namespace
}  // namespace aesxfer::test
