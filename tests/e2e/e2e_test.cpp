// End-to-end: the real `aesxfer` binary, a real server process on 127.0.0.1, every cipher.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "crypto/suite.h"
#include "proto/record.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

struct CipherSuite {
  std::string cipher;
  std::string mac;  // empty: the default for the cipher
};

void PrintTo(const CipherSuite& s, std::ostream* os) {
  *os << s.cipher << (s.mac.empty() ? "" : " -m " + s.mac);
}

std::vector<CipherSuite> all_suites() {
  std::vector<CipherSuite> v;
  for (const auto& c : crypto::ciphers()) v.push_back({c.name, ""});
  v.push_back({"aes128-cbc", "none"});
  v.push_back({"none", "none"});
  return v;
}

std::string suite_name(const testing::TestParamInfo<CipherSuite>& info) {
  std::string s = info.param.cipher + (info.param.mac.empty() ? "" : "_mac_" + info.param.mac);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

std::vector<std::string> suite_args(const CipherSuite& s) {
  std::vector<std::string> a{"-c", s.cipher};
  if (!s.mac.empty()) {
    a.push_back("-m");
    a.push_back(s.mac);
  }
  return a;
}

// Checks the --json lines in `out`: one per file, every key present, verified true. Returns them.
std::vector<std::map<std::string, std::string>> check_json(const std::string& out, size_t files,
                                                           const std::string& cipher) {
  std::vector<std::map<std::string, std::string>> objs;
  auto lines = nonempty_lines(out);
  EXPECT_EQ(lines.size(), files) << out;
  for (const auto& l : lines) {
    auto o = parse_flat_json(l);
    EXPECT_TRUE(o.has_value()) << "not a JSON object: " << l;
    if (!o) continue;
    for (const char* k : {"file", "bytes", "seconds", "mb_per_s", "cipher", "mac", "verified"})
      EXPECT_TRUE(o->count(k)) << "missing key " << k << " in " << l;
    EXPECT_EQ((*o)["verified"], "true") << l;
    EXPECT_EQ((*o)["cipher"], cipher) << l;
    objs.push_back(*o);
  }
  return objs;
}

std::string zeros_sha256(uint64_t n, const fs::path& scratch) {
  {
    std::FILE* f = std::fopen(scratch.c_str(), "wb");
    std::vector<char> z(1 << 16, 0);
    for (uint64_t left = n; left > 0;) {
      size_t k = size_t(std::min<uint64_t>(left, z.size()));
      std::fwrite(z.data(), 1, k, f);
      left -= k;
    }
    std::fclose(f);
  }
  std::string h = sha256_file(scratch);
  fs::remove(scratch);
  return h;
}

class E2eCipher : public testing::TestWithParam<CipherSuite> {
 protected:
  Workspace ws;
  std::unique_ptr<ServerProcess> server;
  void SetUp() override { server = std::make_unique<ServerProcess>(ws.home, ws.root); }
  void TearDown() override {
    if (!server) return;
    EXPECT_EQ(server->stop(), 0) << "the server did not exit cleanly on SIGTERM";
    EXPECT_EQ(sanitizer_findings(server->log()), "");
    if (HasFailure()) std::cerr << "--- server log ---\n" << server->log();
  }
  std::vector<std::string> client(std::vector<std::string> a) {
    a.push_back("-P");
    a.push_back(std::to_string(server->port()));
    a.push_back("--timeout");
    a.push_back("20");
    a.push_back("--json");
    for (auto& s : suite_args(GetParam())) a.push_back(s);
    return a;
  }
};

TEST_P(E2eCipher, SizesRoundTrip) {
  const uint64_t P = proto::kDefaultPayload;
  const std::vector<uint64_t> sizes{0, 1, P - 1, P + 1, (uint64_t(2) << 20) + 12345};
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE("size " + std::to_string(sizes[i]));
    std::string name = "f" + std::to_string(i) + ".bin";
    fs::path src = ws.local / name;
    write_random_file(src, sizes[i], 1000 + i);
    std::string want = sha256_file(src);

    auto r = run_aesxfer(client({"send", src.string(), "127.0.0.1:" + name}), ws.home);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    auto js = check_json(r.out, 1, GetParam().cipher);
    if (!js.empty()) {
      EXPECT_EQ(js[0]["bytes"], std::to_string(sizes[i]));
    }
    ASSERT_TRUE(fs::exists(ws.root / name));
    EXPECT_EQ(fs::file_size(ws.root / name), sizes[i]);
    EXPECT_EQ(sha256_file(ws.root / name), want);
    EXPECT_TRUE(temp_debris(ws.root).empty());

    fs::path back = ws.local / ("back-" + name);
    r = run_aesxfer(client({"recv", "127.0.0.1:" + name, back.string()}), ws.home);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    check_json(r.out, 1, GetParam().cipher);
    ASSERT_TRUE(fs::exists(back));
    EXPECT_EQ(fs::file_size(back), sizes[i]);
    EXPECT_EQ(sha256_file(back), want);
    EXPECT_TRUE(temp_debris(ws.local).empty());
  }
}

TEST_P(E2eCipher, DevNullAndDevZero) {
  fs::path src = ws.local / "sink.bin";
  const uint64_t n = 3 * proto::kDefaultPayload + 77;
  write_random_file(src, n, 42);
  auto r = run_aesxfer(client({"send", src.string(), "127.0.0.1:/dev/null"}), ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto js = check_json(r.out, 1, GetParam().cipher);
  if (!js.empty()) {
    EXPECT_EQ(js[0]["bytes"], std::to_string(n));
  }
  EXPECT_TRUE(fs::is_empty(ws.root)) << "a put to /dev/null left something in the root";

  const uint64_t z = 2 * proto::kDefaultPayload + 5;
  fs::path dst = ws.local / "zeros.bin";
  r = run_aesxfer(client({"recv", "127.0.0.1:/dev/zero", dst.string(), "--size", std::to_string(z)}),
                  ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  js = check_json(r.out, 1, GetParam().cipher);
  if (!js.empty()) {
    EXPECT_EQ(js[0]["bytes"], std::to_string(z));
  }
  ASSERT_TRUE(fs::exists(dst));
  EXPECT_EQ(fs::file_size(dst), z);
  EXPECT_EQ(sha256_file(dst), zeros_sha256(z, ws.local / "expect-zeros"));
  EXPECT_TRUE(temp_debris(ws.local).empty());
}

INSTANTIATE_TEST_SUITE_P(E2e, E2eCipher, testing::ValuesIn(all_suites()), suite_name);

class E2e : public testing::Test {
 protected:
  Workspace ws;
  std::unique_ptr<ServerProcess> server;
  void SetUp() override { server = std::make_unique<ServerProcess>(ws.home, ws.root); }
  void TearDown() override {
    if (!server) return;
    EXPECT_EQ(server->stop(), 0) << "the server did not exit cleanly on SIGTERM";
    EXPECT_EQ(sanitizer_findings(server->log()), "");
    if (HasFailure()) std::cerr << "--- server log ---\n" << server->log();
  }
  std::vector<std::string> with_port(std::vector<std::string> a) {
    a.push_back("-P");
    a.push_back(std::to_string(server->port()));
    a.push_back("--timeout");
    a.push_back("20");
    return a;
  }
};

TEST_F(E2e, SeveralFilesInOneSend) {
  fs::create_directories(ws.root / "inbox");
  std::vector<std::string> args{"send"};
  std::map<std::string, std::string> want;
  const std::vector<uint64_t> sizes{0, 1, proto::kDefaultPayload, 700000};
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::string name = "multi" + std::to_string(i);
    write_random_file(ws.local / name, sizes[i], 7 + i);
    want[name] = sha256_file(ws.local / name);
    args.push_back((ws.local / name).string());
  }
  args.push_back("127.0.0.1:inbox");
  args.push_back("--json");
  auto r = run_aesxfer(with_port(args), ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  check_json(r.out, sizes.size(), "aes128-gcm");
  for (const auto& [name, sha] : want) {
    ASSERT_TRUE(fs::exists(ws.root / "inbox" / name)) << name;
    EXPECT_EQ(sha256_file(ws.root / "inbox" / name), sha) << name;
  }
  EXPECT_TRUE(temp_debris(ws.root / "inbox").empty());
  // The server logged one line per file.
  EXPECT_TRUE(server->wait_for_log("multi3"));
}

// "HOST:" and "HOST:." put the file in the root under its own name, like scp.
TEST_F(E2e, SendIntoRootDirectory) {
  write_random_file(ws.local / "named.bin", 5000, 11);
  auto r = run_aesxfer(with_port({"send", (ws.local / "named.bin").string(), "127.0.0.1:.", "-q"}), ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_TRUE(fs::exists(ws.root / "named.bin"));
  EXPECT_EQ(sha256_file(ws.root / "named.bin"), sha256_file(ws.local / "named.bin"));
}

TEST_F(E2e, ServerStopsCleanlyOnSigterm) {
  write_random_file(ws.local / "s.bin", 1000, 1);
  auto r = run_aesxfer(with_port({"send", (ws.local / "s.bin").string(), "127.0.0.1:s.bin", "-q"}), ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(server->stop(), 0) << server->log();
  EXPECT_NE(server->log().find("SIGTERM"), std::string::npos) << server->log();
}

TEST_F(E2e, JsonOutputHasEveryKey) {
  write_random_file(ws.local / "j.bin", 100000, 5);
  auto r = run_aesxfer(
      with_port({"send", (ws.local / "j.bin").string(), "127.0.0.1:j.bin", "--json", "-c", "aes128-ctr"}),
      ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto objs = check_json(r.out, 1, "aes128-ctr");
  ASSERT_EQ(objs.size(), 1u);
  auto& o = objs[0];
  EXPECT_EQ(o["bytes"], "100000");
  EXPECT_EQ(o["mac"], "hmac-sha256");
  EXPECT_NE(o["file"].find("j.bin"), std::string::npos);
  EXPECT_GE(std::stod(o["seconds"]), 0.0);
  EXPECT_GE(std::stod(o["mb_per_s"]), 0.0);

  r = run_aesxfer(with_port({"recv", "127.0.0.1:j.bin", (ws.local / "j2.bin").string(), "--json"}), ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  objs = check_json(r.out, 1, "aes128-gcm");
  ASSERT_EQ(objs.size(), 1u);
  EXPECT_EQ(objs[0]["mac"], "aead");
  EXPECT_EQ(objs[0]["bytes"], "100000");
}

TEST_F(E2e, OverwriteAndRecvIntoDirectory) {
  write_text_file(ws.root / "over.txt", "old contents");
  write_random_file(ws.local / "over.txt", 4321, 9);
  auto r =
      run_aesxfer(with_port({"send", (ws.local / "over.txt").string(), "127.0.0.1:over.txt", "-q"}), ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "over.txt"), sha256_file(ws.local / "over.txt"));
  fs::create_directories(ws.local / "into");
  r = run_aesxfer(with_port({"recv", "127.0.0.1:over.txt", (ws.local / "into").string(), "-q"}), ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_TRUE(fs::exists(ws.local / "into" / "over.txt"));
  EXPECT_EQ(sha256_file(ws.local / "into" / "over.txt"), sha256_file(ws.local / "over.txt"));
  EXPECT_TRUE(r.out.empty()) << "-q printed: " << r.out;
}

// ---------------------------------------------------------------------------------------------
// LargeTransfer: ~300 MiB, every cipher, both directions. Excluded from the sanitizer run.

constexpr uint64_t kLargeSize = (uint64_t(300) << 20) + 4321;

class LargeTransfer : public testing::TestWithParam<CipherSuite> {
 protected:
  static inline TempDir* shared_dir = nullptr;
  static inline std::string shared_sha;
  static fs::path large_file() { return shared_dir->path() / "large.bin"; }
  static void SetUpTestSuite() {
    shared_dir = new TempDir("aesxfer-large");
    write_random_file(large_file(), kLargeSize, 0x5eed);
    shared_sha = sha256_file(large_file());
    // Flush it now, so the first cipher's figures do not pay for this file's writeback.
    int fd = ::open(large_file().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
  }
  static void TearDownTestSuite() {
    delete shared_dir;
    shared_dir = nullptr;
  }
};

double mbps_of(const std::string& out) {
  auto lines = nonempty_lines(out);
  if (lines.empty()) return -1;
  auto o = parse_flat_json(lines.back());
  if (!o || !o->count("mb_per_s")) return -1;
  return std::stod((*o)["mb_per_s"]);
}

TEST_P(LargeTransfer, BothDirections) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root, {"-q"});
  std::vector<std::string> common{"-P", std::to_string(server.port()), "--json", "--timeout", "60"};
  for (auto& s : suite_args(GetParam())) common.push_back(s);

  std::vector<std::string> send{"send", large_file().string(), "127.0.0.1:large.bin"};
  send.insert(send.end(), common.begin(), common.end());
  auto r = run_aesxfer(send, ws.home, 600);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  check_json(r.out, 1, GetParam().cipher);
  double up = mbps_of(r.out);
  ASSERT_EQ(fs::file_size(ws.root / "large.bin"), kLargeSize);
  EXPECT_EQ(sha256_file(ws.root / "large.bin"), shared_sha);

  std::vector<std::string> recv{"recv", "127.0.0.1:large.bin", (ws.local / "large.bin").string()};
  recv.insert(recv.end(), common.begin(), common.end());
  r = run_aesxfer(recv, ws.home, 600);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  check_json(r.out, 1, GetParam().cipher);
  double down = mbps_of(r.out);
  ASSERT_EQ(fs::file_size(ws.local / "large.bin"), kLargeSize);
  EXPECT_EQ(sha256_file(ws.local / "large.bin"), shared_sha);

  std::printf("[ MB/s    ] %-14s %-12s send %8.1f MB/s  recv %8.1f MB/s\n", GetParam().cipher.c_str(),
              GetParam().mac.empty() ? "(default)" : GetParam().mac.c_str(), up, down);
  RecordProperty("send_mb_per_s", std::to_string(up));
  RecordProperty("recv_mb_per_s", std::to_string(down));
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(sanitizer_findings(server.log()), "");
}

std::vector<CipherSuite> large_suites() {
  std::vector<CipherSuite> v;
  for (const auto& c : crypto::ciphers()) v.push_back({c.name, ""});
  return v;
}

INSTANTIATE_TEST_SUITE_P(LargeTransfer, LargeTransfer, testing::ValuesIn(large_suites()), suite_name);

}  // namespace
}  // namespace aesxfer::test
