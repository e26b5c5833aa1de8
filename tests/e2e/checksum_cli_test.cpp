// The negotiated whole-file checksum end to end through the binary (the unit tests are in
// tests/net/checksum_test.cpp): the hex in --json equals `xxh128sum FILE` or `sha256sum FILE`, for
// send, recv and a resumed send; the server's checksum policy and record-size cap.
#include <gtest/gtest.h>

#include "crypto/checksum.h"
#include "proto/handshake.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using crypto::ChecksumAlg;

std::string sum_hex(ChecksumAlg a, const uint8_t* p, size_t n) {
  crypto::FileChecksum f(a);
  f.update(p, n);
  return f.final().hex();
}

// End to end through the binary.
class ChecksumCli : public ServerTest {};

TEST_F(ChecksumCli, JsonHexEqualsTheReferenceTools) {
  fs::path src = ws.local / "src.bin";
  write_random_file(src, 5 * proto::kDefaultPayload + 12345, 21);
  const std::string xxh = tool_hex("xxh128sum", src), sha = tool_hex("sha256sum", src);
  struct Case {
    std::vector<std::string> args;
    std::string alg, hex;
  } cases[] = {{{}, "xxh128", xxh},
               {{"--checksum", "sha256"}, "sha256", sha},
               {{"--checksum", "XXH128", "--record-size", "4K"}, "xxh128", xxh},
               {{"--checksum", "none", "--record-size", "1M"}, "none", ""}};
  for (const auto& c : cases) {
    std::vector<std::string> a = {"send", src.string(), "127.0.0.1:dst.bin", "--json", "--streams", "1"};
    a.insert(a.end(), c.args.begin(), c.args.end());
    auto r = run(a);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    auto j = parse_flat_json(r.out);
    ASSERT_TRUE(j) << r.out;
    EXPECT_EQ((*j)["checksum.alg"], c.alg) << r.out;
    EXPECT_EQ((*j)["checksum.hex"], c.hex) << r.out;
    EXPECT_EQ(sha256_file(ws.root / "dst.bin"), sha) << r.out;
    // And back.
    fs::path back = ws.local / "back.bin";
    std::vector<std::string> b = {"recv", "127.0.0.1:dst.bin", back.string(), "--json", "--streams", "1"};
    b.insert(b.end(), c.args.begin(), c.args.end());
    auto g = run(b);
    ASSERT_EQ(g.exit_code, 0) << g.describe();
    auto k = parse_flat_json(g.out);
    ASSERT_TRUE(k) << g.out;
    EXPECT_EQ((*k)["checksum.hex"], c.hex) << g.out;
    EXPECT_EQ(tool_hex("sha256sum", back), sha);
    fs::remove(back);
  }
  // The record size the server agreed is reported.
  auto r = run({"send", src.string(), "127.0.0.1:dst.bin", "--json", "--record-size", "64K"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ((*parse_flat_json(r.out))["record_size"], "65536") << r.out;
  // -v puts the checksum on the summary line.
  auto v = run({"send", src.string(), "127.0.0.1:dst.bin", "-v"});
  ASSERT_EQ(v.exit_code, 0) << v.describe();
  EXPECT_NE(v.out.find("xxh128 " + xxh), std::string::npos) << v.out;
}

// "verified" says something checked the bytes (a twenty-sixth re-attack's note: it said true with
// no MAC and no checksum). The records' MAC alone, or the checksum alone, is a check.
TEST_F(ChecksumCli, VerifiedOnlyWhenSomethingCheckedTheBytes) {
  fs::path src = ws.local / "src.bin";
  write_random_file(src, 300000, 23);
  struct Case {
    std::vector<std::string> args;
    std::string verified;
  } cases[] = {{{"-c", "none", "-m", "none", "--checksum", "none"}, "false"},
               {{"-c", "none", "-m", "none"}, "true"},
               {{"-c", "none", "--checksum", "none"}, "true"},
               {{"-c", "aes128-gcm", "--checksum", "none"}, "true"}};
  const std::vector<std::vector<std::string>> ways = {
      {"send", src.string(), "127.0.0.1:dst.bin", "--json"},
      {"recv", "127.0.0.1:dst.bin", (ws.local / "back.bin").string(), "--json"}};
  for (const auto& c : cases) {
    for (std::vector<std::string> a : ways) {
      a.insert(a.end(), c.args.begin(), c.args.end());
      auto r = run(a);
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      auto j = parse_flat_json(r.out);
      ASSERT_TRUE(j) << r.out;
      EXPECT_EQ((*j)["verified"], c.verified) << r.out;
    }
  }
}

TEST_F(ChecksumCli, ResumedSendCarriesTheWholeFilesChecksum) {
  fs::path src = ws.local / "src.bin";
  write_random_file(src, 6 * proto::kDefaultPayload + 1, 22);
  // The server already holds the first 2 records as a kept partial file.
  std::string all = read_text_file(src);
  write_text_file(ws.root / ".dst.bin.aesxfer-partial", all.substr(0, 2 * proto::kDefaultPayload));
  auto r = run({"send", src.string(), "127.0.0.1:dst.bin", "--resume", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto j = parse_flat_json(r.out);
  ASSERT_TRUE(j) << r.out;
  EXPECT_EQ((*j)["resumed_from"], std::to_string(2 * proto::kDefaultPayload)) << r.out;
  EXPECT_EQ((*j)["checksum.hex"], tool_hex("xxh128sum", src)) << r.out;
  EXPECT_EQ(sha256_file(ws.root / "dst.bin"), sha256_file(src));
}

TEST_F(ChecksumCli, StreamsReportOneChecksumPerRange) {
  fs::path src = ws.local / "src.bin";
  write_random_file(src, 4 * proto::kDefaultPayload, 23);
  auto r = run({"send", src.string(), "127.0.0.1:dst.bin", "--streams", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto j = parse_flat_json(r.out);
  ASSERT_TRUE(j) << r.out;
  EXPECT_EQ((*j)["streams"], "2") << r.out;
  // Each range's hex is the checksum of that range alone.
  std::string all = read_text_file(src);
  const auto* d = reinterpret_cast<const uint8_t*>(all.data());
  const size_t half = 2 * proto::kDefaultPayload;
  EXPECT_NE((*j)["checksum"].find(sum_hex(ChecksumAlg::xxh128, d, half)), std::string::npos) << r.out;
  EXPECT_NE((*j)["checksum"].find(sum_hex(ChecksumAlg::xxh128, d + half, half)), std::string::npos) << r.out;
}

TEST_F(ChecksumCli, NoneWarnsAndUnknownIsAUsageError) {
  fs::path src = ws.local / "src.bin";
  write_random_file(src, 1000, 24);
  auto r = run({"send", src.string(), "127.0.0.1:dst.bin", "--checksum", "none"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("warning: checksum none"), std::string::npos) << r.err;
  auto u = run({"send", src.string(), "127.0.0.1:dst.bin", "--checksum", "md5"});
  EXPECT_EQ(u.exit_code, 2) << u.describe();
  EXPECT_NE(u.err.find("unknown checksum 'md5'"), std::string::npos) << u.err;
  auto big = run({"send", src.string(), "127.0.0.1:dst.bin", "--record-size", "2M"});
  EXPECT_EQ(big.exit_code, 2) << big.describe();
}

// serve's three allow lists refuse an unknown name alike: a usage error (exit 2) that names the
// command, the option and the name quoted (an eighteenth re-attack, N5: --ciphers and --macs
// gave exit 1 and no "serve:").
TEST(ServeAllowLists, AnUnknownNameIsAUsageErrorInEachList) {
  Workspace ws;
  const std::pair<std::string, std::string> lists[] = {
      {"--ciphers", "unknown cipher 'foo' in --ciphers"},
      {"--macs", "unknown MAC 'foo' in --macs"},
      {"--checksums", "unknown checksum 'foo' in --checksums"}};
  for (const auto& [option, says] : lists) {
    auto r = run_aesxfer({"serve", "-P", "0", "--root", ws.root.string(), option, "foo"}, ws.home, 30);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.err.rfind("aesxfer: serve: " + says + " (known: ", 0), 0u) << r.err;
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  }
}

// The same for the other things serve is told before it starts (a twentieth re-attack, N8): a root
// that is not there (was exit 1, "root /x: No such file or directory"), a congestion control the
// kernel lacks (no "serve:"); and an empty name on send and recv (": no such file").
TEST(ServeAllowLists, AMissingRootAndAnUnknownControlAreUsageErrorsNamedAsOptions) {
  Workspace ws;
  auto r = run_aesxfer({"serve", "-P", "0", "--root", (ws.root / "nope").string()}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err, "aesxfer: serve: --root " + (ws.root / "nope").string() + ": no such file or directory\n");
  r = run_aesxfer({"serve", "-P", "0", "--root", ws.root.string(), "--congestion", "nosuch"}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err.rfind("aesxfer: serve: --congestion nosuch unavailable", 0), 0u) << r.err;
  r = run_aesxfer({"send", "", "127.0.0.1:x"}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err, "aesxfer: send: an empty name ('') is no file\n");
  r = run_aesxfer({"recv", "127.0.0.1:x", ""}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.err.rfind("aesxfer: recv: an empty destination ('') names no file", 0), 0u) << r.err;
}

class ChecksumPolicy : public ServerTest {
  std::vector<std::string> server_args() const override {
    return {"--checksums", "sha256", "--max-record-size", "64K"};
  }
};

TEST_F(ChecksumPolicy, ServerRequiresOneAndCapsTheRecordSize) {
  fs::path src = ws.local / "src.bin";
  write_random_file(src, 300000, 25);
  auto r = run({"send", src.string(), "127.0.0.1:dst.bin"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("does not allow checksum xxh128 (it allows: sha256)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.root / "dst.bin"));
  auto ok = run(
      {"send", src.string(), "127.0.0.1:dst.bin", "--checksum", "sha256", "--record-size", "1M", "--json"});
  ASSERT_EQ(ok.exit_code, 0) << ok.describe();
  auto j = parse_flat_json(ok.out);
  ASSERT_TRUE(j) << ok.out;
  EXPECT_EQ((*j)["record_size"], "65536");
  EXPECT_EQ((*j)["checksum.hex"], tool_hex("sha256sum", src));
}

}  // namespace
}  // namespace aesxfer::test
