// Faults: refused connections, bad names, host key and authorization failures, path attacks,
// tampering on the wire (through a Relay), cut connections and idle clients. Every test checks
// the exit code, the one-line message, that no destination or temporary file appears, that an
// existing destination is untouched, and that the server still serves a clean transfer.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "net/conn.h"
#include "net/handshake_driver.h"
#include "proto/handshake.h"
#include "proto/record.h"
#include "tests/fake_server.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kOldContents = "existing destination: must survive every failed transfer\n";

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Exit code, exactly one non-empty stderr line "aesxfer: ...", containing one of the keywords.
void expect_failure(const ProcResult& r, int code, const std::vector<std::string>& keywords) {
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, code) << r.describe();
  std::string err = r.err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  EXPECT_FALSE(err.empty()) << r.describe();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 0) << "expected one line on stderr:\n" << r.describe();
  EXPECT_EQ(err.rfind("aesxfer: ", 0), 0u) << r.describe();
  bool found = false;
  for (const auto& k : keywords) found = found || lower(err).find(lower(k)) != std::string::npos;
  std::string all;
  for (const auto& k : keywords) all += "'" + k + "' ";
  EXPECT_TRUE(found) << "stderr has none of " << all << "\n" << r.describe();
}

class Fault : public testing::Test {
 protected:
  Workspace ws;
  std::unique_ptr<ServerProcess> server;
  int clean_count = 0;

  void SetUp() override {
    server = std::make_unique<ServerProcess>(ws.home, ws.root, std::vector<std::string>{"--timeout", "5"});
    write_text_file(ws.root / "dest.bin", kOldContents);
    write_text_file(ws.local / "dest.bin", kOldContents);
    write_random_file(ws.local / "payload.bin", 4 * proto::kDefaultPayload + 100, 77);
  }
  void TearDown() override {
    if (!server) return;
    EXPECT_EQ(server->stop(), 0) << "the server did not exit cleanly on SIGTERM";
    EXPECT_EQ(sanitizer_findings(server->log()), "");
    if (HasFailure()) std::cerr << "--- server log ---\n" << server->log();
  }

  // --retries 0: these tests are about what one attempt leaves behind (a retry is Retries.*).
  std::vector<std::string> opts(uint16_t port, std::vector<std::string> a) {
    a.insert(a.end(), {"-P", std::to_string(port), "--timeout", "10", "-q", "--retries", "0"});
    return a;
  }
  ProcResult send(const std::string& remote, std::vector<std::string> extra = {}, uint16_t port = 0,
                  const fs::path& home = {}) {
    std::vector<std::string> a{"send", (ws.local / "payload.bin").string(), "127.0.0.1:" + remote};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_aesxfer(opts(port ? port : server->port(), a), home.empty() ? ws.home : home, 60);
  }
  ProcResult recv(const std::string& remote, const fs::path& local, std::vector<std::string> extra = {},
                  uint16_t port = 0, const fs::path& home = {}) {
    std::vector<std::string> a{"recv", "127.0.0.1:" + remote, local.string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_aesxfer(opts(port ? port : server->port(), a), home.empty() ? ws.home : home, 60);
  }

  // Nothing new in the root or local directories, no temp files, both dest.bin untouched.
  void expect_no_damage(const std::vector<fs::path>& must_not_exist = {}) {
    EXPECT_EQ(read_text_file(ws.root / "dest.bin"), kOldContents);
    EXPECT_EQ(read_text_file(ws.local / "dest.bin"), kOldContents);
    EXPECT_TRUE(temp_debris(ws.root).empty()) << "temp file left in the server root";
    EXPECT_TRUE(temp_debris(ws.local).empty()) << "temp file left in the local directory";
    for (const auto& p : must_not_exist) {
      std::error_code ec;
      EXPECT_FALSE(fs::exists(fs::symlink_status(p, ec))) << p << " exists";
    }
  }

  // The same server still completes a clean put and get.
  void expect_clean_transfer() {
    std::string name = "clean" + std::to_string(++clean_count) + ".bin";
    auto r = send(name);
    ASSERT_EQ(r.exit_code, 0) << "server no longer serves a clean put:\n" << r.describe();
    EXPECT_EQ(sha256_file(ws.root / name), sha256_file(ws.local / "payload.bin"));
    r = recv(name, ws.local / name);
    ASSERT_EQ(r.exit_code, 0) << "server no longer serves a clean get:\n" << r.describe();
    EXPECT_EQ(sha256_file(ws.local / name), sha256_file(ws.local / "payload.bin"));
    EXPECT_TRUE(server->running());
  }
};

// ---------------------------------------------------------------------------------------------
// Connection and identity

TEST_F(Fault, ConnectionRefused) {
  uint16_t port = unused_port();
  auto r = send("new.bin", {}, port);
  expect_failure(r, 1, {"connect", "refused"});
  r = recv("dest.bin", ws.local / "dest.bin", {}, port);
  expect_failure(r, 1, {"connect", "refused"});
  expect_no_damage({ws.root / "new.bin"});
}

TEST_F(Fault, UnknownCipherIsUsageError) {
  auto r = send("new.bin", {"-c", "aes512-xyz"});
  expect_failure(r, 2, {"unknown cipher"});
  r = recv("dest.bin", ws.local / "dest.bin", {"-c", "aes512-xyz"});
  expect_failure(r, 2, {"unknown cipher"});
  r = send("new.bin", {"-c", "aes128-ctr", "-m", "md5"});
  expect_failure(r, 2, {"unknown mac"});
  expect_no_damage({ws.root / "new.bin"});
  expect_clean_transfer();
}

TEST_F(Fault, ChangedHostKey) {
  expect_clean_transfer();  // pins the server's key
  std::string kh = read_text_file(ws.home / "known_hosts");
  ASSERT_NE(kh.find("127.0.0.1:" + std::to_string(server->port())), std::string::npos) << kh;
  write_text_file(ws.home / "known_hosts",
                  "127.0.0.1:" + std::to_string(server->port()) +
                      " aesxfer-ed25519 QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI=\n");
  auto r = send("dest.bin");
  expect_failure(r, 1, {"changed"});
  r = recv("clean1.bin", ws.local / "dest.bin");
  expect_failure(r, 1, {"changed"});
  expect_no_damage();
  // The known_hosts file is left alone.
  EXPECT_NE(read_text_file(ws.home / "known_hosts").find("QkJCQkJC"), std::string::npos);
  write_text_file(ws.home / "known_hosts", kh);
  expect_clean_transfer();
}

TEST_F(Fault, UnauthorizedClient) {
  TempDir other("aesxfer-other");
  auto r = send("dest.bin", {}, 0, other.path());
  expect_failure(r, 1, {"not authorized", "refused"});
  r = recv("dest.bin", ws.local / "dest.bin", {}, 0, other.path());
  expect_failure(r, 1, {"not authorized", "refused"});
  expect_no_damage();
  // Authorizing the key lets the same client in.
  std::string pub = read_text_file(other.path() / "id_ed25519.pub");
  ASSERT_FALSE(pub.empty());
  write_text_file(ws.home / "authorized_keys", pub);
  r = send("authorized.bin", {}, 0, other.path());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "authorized.bin"), sha256_file(ws.local / "payload.bin"));
  expect_clean_transfer();
}

TEST_F(Fault, NoSuchFileOnRecv) {
  auto r = recv("missing.bin", ws.local / "missing.bin");
  expect_failure(r, 1, {"no such file"});
  r = recv("missing.bin", ws.local / "dest.bin");
  expect_failure(r, 1, {"no such file"});
  expect_no_damage({ws.local / "missing.bin"});
  expect_clean_transfer();
}

TEST_F(Fault, LocalSourceMissingOrDirectory) {
  auto r = run_aesxfer(opts(server->port(), {"send", (ws.local / "nope.bin").string(), "127.0.0.1:dest.bin"}),
                       ws.home, 30);
  expect_failure(r, 1, {"no such file"});
  r = run_aesxfer(opts(server->port(), {"send", ws.local.string(), "127.0.0.1:dest.bin"}), ws.home, 30);
  expect_failure(r, 1, {"directory"});
  expect_no_damage();
  expect_clean_transfer();
}

TEST_F(Fault, LocalDestinationDirectoryMissing) {
  write_text_file(ws.root / "src.bin", "data");
  auto r = recv("src.bin", ws.local / "no-such-dir" / "out.bin");
  expect_failure(r, 1, {"cannot create", "no such file"});
  expect_no_damage({ws.local / "no-such-dir"});
  expect_clean_transfer();
}

TEST_F(Fault, UsageErrors) {
  auto r = run_aesxfer({"send", (ws.local / "payload.bin").string()}, ws.home, 30);
  expect_failure(r, 2, {"usage", "required", "expected", "HOST:DEST"});
  r = run_aesxfer({"send", (ws.local / "payload.bin").string(), (ws.local / "copy.bin").string()}, ws.home,
                  30);
  expect_failure(r, 2, {"HOST:DEST"});
  r = run_aesxfer({"recv", "127.0.0.1:src.bin"}, ws.home, 30);
  expect_failure(r, 2, {"dest", "required"});
  expect_no_damage({ws.local / "copy.bin"});
}

// ---------------------------------------------------------------------------------------------
// Path attacks

// The client refuses these itself, as usage errors before connecting (exit 2); the server's own
// refusal of them is RequestHandlers.AListOutsideTheRootOrOfAFileIsRefusedWithItsStatus and
// Confinement's Root tests.
TEST_F(Fault, DotDotOnSend) {
  auto r = send("../escaped.bin");
  expect_failure(r, 2, {"..", "refused"});
  r = send("sub/../../escaped.bin");
  expect_failure(r, 2, {"..", "refused"});
  expect_no_damage({ws.tmp / "escaped.bin"});
  expect_clean_transfer();
}

TEST_F(Fault, DotDotOnRecv) {
  write_text_file(ws.tmp / "secret.txt", "secret");
  auto r = recv("../secret.txt", ws.local / "got.txt");
  expect_failure(r, 2, {"..", "refused"});
  r = recv("../secret.txt", ws.local / "dest.bin");
  expect_failure(r, 2, {"..", "refused"});
  expect_no_damage({ws.local / "got.txt"});
  expect_clean_transfer();
}

TEST_F(Fault, AbsolutePathOnRecv) {
  auto r = recv("/etc/passwd", ws.local / "passwd");
  expect_failure(r, 2, {"absolute"});
  r = recv("/etc/passwd", ws.local / "dest.bin");
  expect_failure(r, 2, {"absolute"});
  expect_no_damage({ws.local / "passwd"});
  expect_clean_transfer();
}

TEST_F(Fault, AbsolutePathOnSend) {
  fs::path target = "/tmp/aesxfer-fault-abs-" + std::to_string(::getpid()) + ".bin";
  auto r = send(target.string());
  expect_failure(r, 2, {"absolute"});
  expect_no_damage({target});
  expect_clean_transfer();
}

TEST_F(Fault, SymlinkOutOfRoot) {
  fs::create_directories(ws.tmp / "outside");
  write_text_file(ws.tmp / "outside" / "secret.txt", "secret outside the root");
  fs::create_directory_symlink(ws.tmp / "outside", ws.root / "dirlink");
  fs::create_symlink(ws.tmp / "outside" / "secret.txt", ws.root / "filelink");

  auto r = recv("dirlink/secret.txt", ws.local / "got.txt");
  expect_failure(r, 1, {"outside"});
  r = recv("filelink", ws.local / "dest.bin");
  expect_failure(r, 1, {"outside"});
  r = send("dirlink/new.bin");
  expect_failure(r, 1, {"outside"});
  r = send("filelink");
  expect_failure(r, 1, {"symbolic link", "outside"});
  EXPECT_EQ(read_text_file(ws.tmp / "outside" / "secret.txt"), "secret outside the root");
  expect_no_damage({ws.local / "got.txt", ws.tmp / "outside" / "new.bin"});
  EXPECT_TRUE(temp_debris(ws.tmp / "outside").empty());
  expect_clean_transfer();
}

// Refused before the connection, with the reason: a usage error (a twenty-seventh re-attack, N6:
// the server's "invalid path" after a login).
TEST_F(Fault, NewlineInName) {
  auto r = send("bad\nname.bin");
  expect_failure(r, 2, {"a CR or LF in a path cannot be sent"});
  r = recv("bad\nname.bin", ws.local / "got.txt");
  expect_failure(r, 2, {"a CR or LF in a path cannot be sent"});
  expect_no_damage({ws.root / "bad\nname.bin", ws.local / "got.txt"});
  expect_clean_transfer();
}

// ---------------------------------------------------------------------------------------------
// Tampering through the relay. Client->server records of one put of payload.bin (4 full records
// and a short one): 0 request, 1..5 data, 6 end, 7 bye.

struct TamperCase {
  std::string name;
  FaultSpec spec;
};

struct SuiteTag {
  std::string cipher, mac;
  size_t tag_len;
};

void PrintTo(const SuiteTag& s, std::ostream* os) {
  *os << s.cipher << (s.mac.empty() ? "" : " -m " + s.mac);
}

class FaultTamper : public Fault, public testing::WithParamInterface<SuiteTag> {
 protected:
  // Runs one put of payload.bin onto the existing root/dest.bin through a relay with `spec`.
  ProcResult tampered_put(FaultSpec spec, Relay*& out_relay, std::unique_ptr<Relay>& holder) {
    spec.tag_len = GetParam().tag_len;
    holder = std::make_unique<Relay>(server->port(), spec);
    out_relay = holder.get();
    std::vector<std::string> extra{"-c", GetParam().cipher};
    if (!GetParam().mac.empty()) extra.insert(extra.end(), {"-m", GetParam().mac});
    return send("dest.bin", extra, holder->port());
  }
  void check(FaultSpec spec, const std::vector<std::string>& client_words, const std::string& server_word) {
    std::unique_ptr<Relay> holder;
    Relay* relay = nullptr;
    auto r = tampered_put(spec, relay, holder);
    EXPECT_TRUE(relay->fault_applied())
        << "the relay never saw record " << spec.record << " (saw " << relay->records_seen() << ")";
    expect_failure(r, 1, client_words);
    std::printf("  client: %s", r.err.c_str());
    EXPECT_TRUE(server->wait_for_log(server_word)) << "server log lacks '" << server_word << "'";
    EXPECT_TRUE(relay->wait_done(10));
    holder.reset();
    expect_no_damage();
    expect_clean_transfer();
  }
};

const std::vector<std::string> kLost{"closed", "lost", "reset", "incomplete", "authentication"};
const std::string kBadMac = "message authentication failed";

// The control: the relay itself, with no fault, carries a put and a get intact.
TEST_P(FaultTamper, RelayWithoutFaultIsTransparent) {
  std::vector<std::string> extra{"-c", GetParam().cipher};
  if (!GetParam().mac.empty()) extra.insert(extra.end(), {"-m", GetParam().mac});
  FaultSpec s;
  s.tag_len = GetParam().tag_len;
  {
    Relay relay(server->port(), s);
    auto r = send("dest.bin", extra, relay.port());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(relay.wait_done(10));
    EXPECT_EQ(relay.records_seen(), 8u) << "request, 5 data, end, bye";
  }
  EXPECT_EQ(sha256_file(ws.root / "dest.bin"), sha256_file(ws.local / "payload.bin"));
  {
    Relay relay(server->port(), s);
    auto r = recv("dest.bin", ws.local / "back.bin", extra, relay.port());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  EXPECT_EQ(sha256_file(ws.local / "back.bin"), sha256_file(ws.local / "payload.bin"));
}

TEST_P(FaultTamper, FlipHeaderByte) {
  FaultSpec s;
  s.kind = FaultKind::flip;
  s.record = 2;
  s.part = RecordPart::header;
  s.offset = 4;  // record type: data (1) becomes control (2), which parse_header accepts
  s.mask = 0x03;
  check(s, kLost, kBadMac);
}

TEST_P(FaultTamper, FlipBodyByte) {
  FaultSpec s;
  s.kind = FaultKind::flip;
  s.record = 2;
  s.part = RecordPart::body;
  s.offset = 1000;
  s.mask = 0x80;
  check(s, kLost, kBadMac);
}

TEST_P(FaultTamper, FlipTagByte) {
  FaultSpec s;
  s.kind = FaultKind::flip;
  s.record = 3;
  s.part = RecordPart::tag;
  s.offset = 5;
  s.mask = 0x01;
  check(s, kLost, kBadMac);
}

TEST_P(FaultTamper, FlipEndRecord) {
  FaultSpec s;
  s.kind = FaultKind::flip;
  s.record = 6;  // the end record (whole-file SHA-256 and length)
  s.part = RecordPart::body;
  s.offset = 3;
  check(s, kLost, kBadMac);
}

TEST_P(FaultTamper, DropRecord) {
  FaultSpec s;
  s.kind = FaultKind::drop;
  s.record = 2;
  check(s, kLost, kBadMac);
}

TEST_P(FaultTamper, ReplayRecord) {
  FaultSpec s;
  s.kind = FaultKind::replay;
  s.record = 2;
  check(s, kLost, kBadMac);
}

TEST_P(FaultTamper, SwapRecords) {
  FaultSpec s;
  s.kind = FaultKind::swap;
  s.record = 2;
  check(s, kLost, kBadMac);
}

TEST_P(FaultTamper, CutMidTransfer) {
  FaultSpec s;
  s.kind = FaultKind::cut;
  s.cut_after = 2 * proto::kDefaultPayload + 1234;  // inside record 2
  check(s, kLost, "transfer incomplete");
}

INSTANTIATE_TEST_SUITE_P(Fault, FaultTamper,
                         testing::Values(SuiteTag{"aes128-gcm", "", 16},
                                         SuiteTag{"aes128-ctr", "hmac-sha256", 32},
                                         SuiteTag{"aes128-cbc", "hmac-sha256", 32}),
                         [](const testing::TestParamInfo<SuiteTag>& i) {
                           std::string s = i.param.cipher;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// Without a MAC the records are not authenticated, but the end record's length and whole-file
// checksum (xxh128 by default, or sha256) still catch a modified or missing record: the
// destination is never replaced.
TEST_F(Fault, NoMacFlipCaughtByFileHash) {
  for (std::string alg : {"xxh128", "sha256"}) {
    SCOPED_TRACE(alg);
    FaultSpec s;
    s.kind = FaultKind::flip;
    s.record = 2;
    s.part = RecordPart::body;
    s.offset = 99;
    s.tag_len = 0;
    Relay relay(server->port(), s);
    auto r = send("dest.bin", {"-c", "none", "-m", "none", "--checksum", alg}, relay.port());
    EXPECT_TRUE(relay.fault_applied());
    expect_failure(r, 1, {alg + " mismatch"});
    EXPECT_TRUE(server->wait_for_log(alg + " mismatch"));
    expect_no_damage();
    expect_clean_transfer();
  }
}

TEST_F(Fault, NoMacDropCaughtByLength) {
  FaultSpec s;
  s.kind = FaultKind::drop;
  s.record = 2;
  s.tag_len = 0;
  Relay relay(server->port(), s);
  auto r = send("dest.bin", {"-c", "none", "-m", "none"}, relay.port());
  EXPECT_TRUE(relay.fault_applied());
  expect_failure(r, 1, {"ended early", "integrity"});
  EXPECT_TRUE(server->wait_for_log("ended early"));
  expect_no_damage();
  expect_clean_transfer();
}

// A get whose request is tampered with: the client's existing destination stays as it was.
TEST_F(Fault, TamperedRequestOnRecv) {
  FaultSpec s;
  s.kind = FaultKind::flip;
  s.record = 0;
  s.part = RecordPart::body;
  s.offset = 2;
  s.tag_len = 16;
  write_text_file(ws.root / "src.bin", "the server's copy");
  Relay relay(server->port(), s);
  auto r = recv("src.bin", ws.local / "dest.bin", {}, relay.port());
  EXPECT_TRUE(relay.fault_applied());
  expect_failure(r, 1, kLost);
  EXPECT_TRUE(server->wait_for_log(kBadMac));
  expect_no_damage();
  expect_clean_transfer();
}

// A get cut while the client receives: no partial file, no temp file, old destination intact.
TEST_F(Fault, CutDuringRecv) {
  write_random_file(ws.root / "src.bin", 4 * proto::kDefaultPayload + 100, 12);
  FaultSpec s;
  s.cut_s2c_after = 2 * proto::kDefaultPayload + 777;
  Relay relay(server->port(), s);
  auto r = recv("src.bin", ws.local / "dest.bin", {}, relay.port());
  EXPECT_TRUE(relay.fault_applied());
  expect_failure(r, 1, kLost);
  expect_no_damage();
  expect_clean_transfer();
}

// The client gives up on a server that accepts and never answers, within its --timeout.
TEST_F(Fault, ClientTimesOutOnSilentServer) {
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);  // the kernel completes the connection; nobody ever reads
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  uint16_t port = ntohs(a.sin_port);
  auto t0 = Clock::now();
  auto r = run_aesxfer({"recv", "127.0.0.1:src.bin", (ws.local / "dest.bin").string(), "-P",
                        std::to_string(port), "--timeout", "1", "-q"},
                       ws.home, 30);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ::close(lfd);
  expect_failure(r, 1, {"timed out", "handshake not completed within 1 s"});  // the read, or the whole
  EXPECT_LT(secs, 5.0);
  expect_no_damage();
}

// ...and on one that sends its ServerHello a byte at a time, each within the timeout: the whole
// handshake must end within --timeout (a thirty-seventh re-attack, B2: the client waited for ever).
TEST_F(Fault, ClientGivesUpOnAServerHelloThatTrickles) {
  uint16_t port = 0;
  const int lfd = listen_loopback(port);
  ASSERT_GE(lfd, 0);
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    const int cfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) return;
    const uint8_t frame_start[] = {0, 0, 1, 0};  // a 256-byte frame's length, then its bytes slowly
    ::send(cfd, frame_start, sizeof frame_start, MSG_NOSIGNAL);
    for (int i = 0; i < 200 && !stop; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const uint8_t b = 0x55;
      if (::send(cfd, &b, 1, MSG_NOSIGNAL) != 1) break;
    }
    ::close(cfd);
  });
  auto t0 = Clock::now();
  auto r = run_aesxfer({"recv", "127.0.0.1:src.bin", (ws.local / "dest.bin").string(), "-P",
                        std::to_string(port), "--timeout", "2", "-q"},
                       ws.home, 30);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  trickler.join();
  ::close(lfd);
  expect_failure(r, 1, {"handshake not completed within 2 s"});
  EXPECT_LT(secs, 6.0);
  expect_no_damage();
}

// ...and on one that completes the handshake and then sends its Welcome a byte at a time: the
// Welcome is part of the handshake's --timeout (a thirty-eighth re-attack, B-F4: 25 s with
// --timeout 3; about 66 h at the default).
TEST_F(Fault, ClientGivesUpOnAWelcomeThatTrickles) {
  uint16_t port = 0;
  const int lfd = listen_loopback(port);
  ASSERT_GE(lfd, 0);
  std::atomic<bool> stop{false};
  std::thread fake([&] {
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    net::Conn c(fd, std::chrono::milliseconds(10000), "client");
    const proto::Identity host = proto::Identity::generate();
    proto::ServerHandshake hs(host, [](const proto::PublicKey&) { return true; });
    if (net::drive_handshake(c, hs).ec) return;
    // The Welcome sealed as the session's first record, through a socket pair, then trickled.
    int sp[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return;
    {
      net::Conn sealer(sp[0], std::chrono::milliseconds(1000), "pair");
      sealer.start_records(hs.keys(), false);
      proto::Message w;
      w.type = proto::MsgType::welcome;
      sealer.send_message(w);
    }
    uint8_t sealed[4096];
    const ssize_t n = ::read(sp[1], sealed, sizeof sealed);
    ::close(sp[1]);
    for (ssize_t i = 0; i < n && !stop; ++i) {
      if (::send(fd, sealed + i, 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  });
  auto t0 = Clock::now();
  auto r = run_aesxfer({"recv", "127.0.0.1:src.bin", (ws.local / "dest.bin").string(), "-P",
                        std::to_string(port), "--timeout", "2", "-q", "--retries", "0"},
                       ws.home, 30);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  ::shutdown(lfd, SHUT_RDWR);
  fake.join();
  ::close(lfd);
  expect_failure(r, 1, {"handshake not completed within 2 s"});
  EXPECT_LT(secs, 6.0);
  expect_no_damage();
}

// A refused login's Welcome whose words imitate the client's hint with the server's own key line:
// the words come last and quoted, a '"' in them escaped, whatever the status (a thirty-ninth
// re-attack, B-F1: a '"' closed the quote, and a status other than "refused" showed them bare).
TEST_F(Fault, AWelcomesWordsNeverPassForTheClientsOwnHint) {
  const std::string impostor = "aesxfer-ed25519 QkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkJCQkI= root@vm";
  for (const proto::Status st : {proto::Status::refused, proto::Status::permission, proto::Status::busy}) {
    uint16_t port = 0;
    const int lfd = listen_loopback(port);
    ASSERT_GE(lfd, 0);
    const std::string words =
        st == proto::Status::refused
            ? "not authorized\") -- since protocol 6 add this line instead: " + impostor +
                  " (see \"man aesxfer"
            : "client key is not authorized; to be let in, add this line to $AESXFER_HOME/authorized_keys: " +
                  impostor;
    std::thread fake([&] {
      const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      net::Conn c(fd, std::chrono::milliseconds(10000), "client");
      if (!start_fake_session(c, proto::Identity::generate(), st, words)) return;
      uint8_t b;
      while (::read(fd, &b, 1) > 0) {
      }
    });
    auto r = run_aesxfer({"recv", "127.0.0.1:src.bin", (ws.local / "dest.bin").string(), "-P",
                          std::to_string(port), "--timeout", "5", "-q", "--retries", "0"},
                         ws.home, 30);
    fake.join();
    ::close(lfd);
    SCOPED_TRACE(proto::status_name(st));
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    const std::string said = " (the server said: \"";
    const size_t at = r.err.find(said);
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("QkJCQkJC"), r.err.find("QkJCQkJC", at)) << "the impostor's key only in the quote\n"
                                                                  << r.err;
    // One quote opened and one closed, at the line's end: every '"' of the server's is escaped.
    const std::string quote = r.err.substr(at + said.size());
    EXPECT_EQ(quote.substr(quote.size() - 3), "\")\n") << r.err;
    for (size_t q = 0; q + 3 < quote.size(); ++q)
      if (quote[q] == '"') {
        EXPECT_EQ(quote[q - 1], '\\') << r.err;
      }
    expect_no_damage();
  }
}

// ---------------------------------------------------------------------------------------------
// Idle clients

TEST(FaultIdle, ServerDropsSilentClient) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root, {"--timeout", "1"});
  int fd = connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  timeval tv{8, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto t0 = Clock::now();
  char b[64];
  ssize_t n = ::recv(fd, b, sizeof b, 0);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  bool closed = n == 0 || (n < 0 && errno == ECONNRESET);
  ::close(fd);
  EXPECT_TRUE(closed) << "recv returned " << n << " after " << secs << " s (errno " << errno << ")";
  EXPECT_LT(secs, 4.0) << "the server kept an idle connection for " << secs << " s with --timeout 1";
  EXPECT_GE(secs, 0.5);
  EXPECT_TRUE(server.wait_for_log("timed out")) << server.log();

  // And it still serves others.
  write_random_file(ws.local / "after.bin", 300000, 3);
  auto r = run_aesxfer({"send", (ws.local / "after.bin").string(), "127.0.0.1:after.bin", "-P",
                        std::to_string(server.port()), "-q"},
                       ws.home, 30);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "after.bin"), sha256_file(ws.local / "after.bin"));
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(sanitizer_findings(server.log()), "");
}

// An idle client does not hold up the others while it lingers.
TEST(FaultIdle, OthersServedWhileAClientIdles) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root, {"--timeout", "5"});
  int fd = connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  write_random_file(ws.local / "busy.bin", 300000, 4);
  auto t0 = Clock::now();
  auto r = run_aesxfer({"send", (ws.local / "busy.bin").string(), "127.0.0.1:busy.bin", "-P",
                        std::to_string(server.port()), "-q"},
                       ws.home, 30);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ::close(fd);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_LT(secs, 3.0);
  EXPECT_EQ(sha256_file(ws.root / "busy.bin"), sha256_file(ws.local / "busy.bin"));
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(sanitizer_findings(server.log()), "");
}

}  // namespace
}  // namespace aesxfer::test
