// Issue 7 end to end: send -r (mkdir under the root, confined), -p (mode and mtime), -l (bandwidth
// limit), --json-progress, and --resume after a connection cut by the Relay.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using Clock = std::chrono::steady_clock;

class Issue7 : public ServerTest {
 protected:
  // src/{a.bin, sub/b.txt, sub/deep/c.bin, empty/}
  fs::path make_tree() {
    fs::path src = ws.local / "src";
    fs::create_directories(src / "sub" / "deep");
    fs::create_directories(src / "empty");
    write_random_file(src / "a.bin", 300000, 1);
    write_text_file(src / "sub" / "b.txt", "hello\n");
    write_random_file(src / "sub" / "deep" / "c.bin", 70000, 2);
    return src;
  }
  void expect_same_tree(const fs::path& src, const fs::path& dst) {
    for (const char* f : {"a.bin", "sub/b.txt", "sub/deep/c.bin"}) {
      ASSERT_TRUE(fs::is_regular_file(dst / f)) << dst / f;
      EXPECT_EQ(sha256_file(dst / f), sha256_file(src / f)) << f;
    }
    EXPECT_TRUE(fs::is_directory(dst / "empty"));
    EXPECT_TRUE(temp_debris(dst).empty());
    EXPECT_TRUE(temp_debris(dst / "sub").empty());
  }
};

using Recursive = Issue7;
using Preserve = Issue7;
using Limit = Issue7;
using Resume = Issue7;

TEST_F(Recursive, NewDestinationBecomesTheCopy) {
  fs::path src = make_tree();
  auto r = run({"send", "-r", src.string(), "127.0.0.1:copy", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.root / "copy");
}

TEST_F(Recursive, ExistingDirectoryReceivesTheTreeUnderItsName) {
  fs::path src = make_tree();
  fs::create_directories(ws.root / "inbox");
  auto r = run({"send", "-r", src.string(), "127.0.0.1:inbox", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(nonempty_lines(r.out).size(), 3u) << r.out;  // one line per file
  expect_same_tree(src, ws.root / "inbox" / "src");
  // Again into the root itself ("HOST:." like scp).
  r = run({"send", "-r", (src / "").string(), "127.0.0.1:.", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.root / "src");
}

TEST_F(Recursive, DirectoryWithoutDashRIsRefused) {
  fs::path src = make_tree();
  auto r = run({"send", src.string(), "127.0.0.1:x", "-q"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("use -r"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.root / "x"));
}

TEST_F(Recursive, ConfinedToTheRoot) {
  fs::path src = make_tree();
  TempDir outside("aesxfer-outside");
  fs::create_symlink(outside.path(), ws.root / "esc");
  for (const char* dest : {"../up", "esc", "esc/sub", "/abs/dir"}) {
    SCOPED_TRACE(dest);
    auto r = run({"send", "-r", src.string(), std::string("127.0.0.1:") + dest, "-q"});
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_FALSE(r.err.empty());
  }
  EXPECT_TRUE(fs::is_empty(outside.path())) << "something was created outside the root";
  EXPECT_FALSE(fs::exists(ws.tmp.path() / "up"));
  // A directory in the tree replaced by a file on the server: refused, nothing written through it.
  write_text_file(ws.root / "clash", "file");
  auto r = run({"send", "-r", src.string(), "127.0.0.1:clash/src", "-q"});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "clash"), "file");
}

TEST_F(Preserve, DashPKeepsModeAndMtime) {
  fs::path f = ws.local / "p.bin";
  write_random_file(f, 50000, 3);
  ::chmod(f.c_str(), 0751);
  struct timespec ts[2] = {{1577934245, 0}, {1577934245, 0}};  // 2020-01-02
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), ts, 0), 0);
  auto r = run({"send", "-p", f.string(), "127.0.0.1:p.bin", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  struct stat st {};
  ASSERT_EQ(::stat((ws.root / "p.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0751u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1577934245);
  // And back with recv -p.
  ::chmod((ws.root / "p.bin").c_str(), 0640);
  r = run({"recv", "-p", "127.0.0.1:p.bin", (ws.local / "back.bin").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_EQ(::stat((ws.local / "back.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1577934245);
}

TEST_F(Preserve, WithoutDashPModeIsMaskedAndMtimeIsNow) {
  mode_t um = ::umask(022);  // the server child inherited the test's umask; read it back
  ::umask(um);
  fs::path f = ws.local / "n.bin";
  write_random_file(f, 1000, 4);
  ::chmod(f.c_str(), 04777);
  struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, f.c_str(), ts, 0), 0);
  auto before = std::time(nullptr);
  auto r = run({"send", f.string(), "127.0.0.1:n.bin", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  struct stat st {};
  ASSERT_EQ(::stat((ws.root / "n.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u & ~unsigned(um)) << "setuid dropped, umask applied";
  EXPECT_GE(st.st_mtim.tv_sec, before - 2);
  r = run({"recv", "127.0.0.1:n.bin", (ws.local / "n2.bin").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_EQ(::stat((ws.local / "n2.bin").c_str(), &st), 0);
  EXPECT_GE(st.st_mtim.tv_sec, before - 2);
  EXPECT_EQ(st.st_mode & 07777, 0777u & ~unsigned(um));
}

TEST_F(Preserve, RecursiveDirectoriesKeepModeAndMtime) {
  fs::path src = make_tree();
  ::chmod((src / "sub").c_str(), 0750);
  struct timespec ts[2] = {{1500000000, 0}, {1500000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (src / "sub").c_str(), ts, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, (src / "sub" / "b.txt").c_str(), ts, 0), 0);
  auto r = run({"send", "-r", "-p", src.string(), "127.0.0.1:tree", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.root / "tree");
  struct stat st {};
  ASSERT_EQ(::stat((ws.root / "tree" / "sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1500000000);
  ASSERT_EQ(::stat((ws.root / "tree" / "sub" / "b.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, 1500000000);
}

TEST_F(Limit, OneMebibyteAt4096KbitTakesAboutTwoSeconds) {
  fs::path f = ws.local / "l.bin";
  write_random_file(f, 1 << 20, 5);
  auto t0 = Clock::now();
  auto r = run({"send", "-l", "4096", f.string(), "127.0.0.1:l.bin", "-q"});
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_GE(secs, 1.8) << "4096 Kbit/s is 512000 B/s: 1 MiB needs ~2.05 s";
  EXPECT_LT(secs, 10.0);
  EXPECT_EQ(sha256_file(ws.root / "l.bin"), sha256_file(f));
  std::printf("[ limit   ] 1 MiB at -l 4096: %.2f s\n", secs);
}

// A file smaller than the bucket's burst was never paced (it was 16 KiB at least: 12,000 bytes at
// -l 64 took no time), and below about 1.1 Kbit/s one record outlasted the server's idle timeout
// (a twenty-second re-attack, N1). The burst is 4 KiB at least, and -l under 8 Kbit/s (but 0, no
// limit) is a usage error.
TEST_F(Limit, ASmallFileIsPacedAndTooLowARateIsRefused) {
  fs::path f = ws.local / "s.bin";
  write_random_file(f, 12000, 7);
  auto t0 = Clock::now();
  auto r = run({"send", "-l", "64", f.string(), "127.0.0.1:s.bin", "-q"});
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_GE(secs, 0.8) << "64 Kbit/s is 8000 B/s: 12,000 bytes less a 4 KiB burst need ~1 s";
  EXPECT_EQ(sha256_file(ws.root / "s.bin"), sha256_file(f));
  for (const char* low : {"1", "0.5", "7.9"}) {
    r = run({"send", "-l", low, f.string(), "127.0.0.1:low.bin", "-q"});
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(
        r.err.find("at least 8 Kbit/s, the slowest the limiter paces (one 4 KiB record every 4 s; 0 for "
                   "no limit), got '" +
                   std::string(low) + "'"),
        std::string::npos)
        << r.err;
  }
  r = run({"send", "-l", "0", f.string(), "127.0.0.1:zero.bin", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(ws.root / "low.bin"));
}

TEST_F(Limit, JsonProgressLines) {
  fs::path f = ws.local / "j.bin";
  const uint64_t n = 3 << 20;
  write_random_file(f, n, 6);
  auto r = run({"send", "-l", "8192", "--json-progress", "-q", f.string(), "127.0.0.1:j.bin"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto lines = nonempty_lines(r.out);
  ASSERT_GE(lines.size(), 3u) << "~3 s at 1 MB/s: a line every 0.5 s and a final one\n" << r.out;
  uint64_t prev = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto o = parse_flat_json(lines[i]);
    ASSERT_TRUE(o) << lines[i];
    for (const char* k : {"file", "bytes", "total_bytes", "mb_per_s", "seconds", "done"})
      EXPECT_TRUE(o->count(k)) << k << " missing in " << lines[i];
    uint64_t b = std::stoull((*o)["bytes"]);
    EXPECT_GE(b, prev);
    prev = b;
    EXPECT_EQ((*o)["total_bytes"], std::to_string(n));
    EXPECT_EQ((*o)["done"], i + 1 == lines.size() ? "true" : "false") << lines[i];
  }
  EXPECT_EQ(prev, n);
  auto last = parse_flat_json(lines.back());
  ASSERT_TRUE(last);
  EXPECT_GT(std::stod((*last)["seconds"]), 2.0);
  EXPECT_GT(std::stod((*last)["mb_per_s"]), 0.5);
  EXPECT_LT(std::stod((*last)["mb_per_s"]), 1.3);
}

// A file cut off in its data (--retries 0) ends its --json-progress lines with one that says so:
// "done":false, "error", and the bytes it had reached (a twenty-eighth re-attack's note: no final
// line at all).
TEST_F(Limit, AFileCutOffEndsItsJsonProgressWithTheError) {
  fs::path f = ws.local / "cut.bin";
  const uint64_t n = 3 << 20;
  write_random_file(f, n, 8);
  FaultSpec cut;
  cut.kind = FaultKind::cut;
  cut.cut_after = uint64_t(1) << 20;
  Relay relay(server->port(), cut);
  auto r =
      run({"send", "-l", "16384", "--json-progress", "-q", "--retries", "0", f.string(), "127.0.0.1:cut.bin"},
          relay.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(relay.fault_applied());
  auto lines = nonempty_lines(r.out);
  ASSERT_GE(lines.size(), 2u) << r.out;
  for (size_t i = 0; i + 1 < lines.size(); ++i)
    EXPECT_EQ(lines[i].find("\"error\""), std::string::npos) << lines[i];
  const auto last = nlohmann::json::parse(lines.back());
  EXPECT_FALSE(last.at("done").get<bool>()) << lines.back();
  EXPECT_FALSE(last.at("error").get<std::string>().empty()) << lines.back();
  EXPECT_EQ(last.at("total_bytes").get<uint64_t>(), n) << lines.back();
  EXPECT_GT(last.at("bytes").get<uint64_t>(), 0u) << lines.back();
  EXPECT_LT(last.at("bytes").get<uint64_t>(), n) << lines.back();
  // The error line names the file it stopped, as the JSON line does (a twenty-ninth re-attack,
  // B-N5: "connection reset", with no file).
  const auto err = nonempty_lines(r.err);
  ASSERT_FALSE(err.empty());
  EXPECT_NE(err.back().find(f.string()), std::string::npos) << r.err;
}

// --resume: a put cut after ~3 MiB keeps .NAME.aesxfer-partial on the server; the second run sends
// only the rest (counted in records through a Relay) and the whole-file SHA-256 still verifies.
TEST_F(Resume, CutThenResumeSendsOnlyTheRest) {
  const uint64_t n = (uint64_t(8) << 20) + 1234;
  fs::path f = ws.local / "big.bin";
  write_random_file(f, n, 7);
  std::string want = sha256_file(f);
  {
    FaultSpec cut;
    cut.kind = FaultKind::cut;
    cut.cut_after = uint64_t(3) << 20;
    Relay relay(server->port(), cut);
    auto r = run({"send", "--resume", f.string(), "127.0.0.1:big.bin", "-q", "--retries", "0"}, relay.port());
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(relay.fault_applied());
    ASSERT_TRUE(server->wait_for_log("partial file kept", 10)) << server->log();
  }
  fs::path partial = ws.root / ".big.bin.aesxfer-partial";
  ASSERT_TRUE(fs::exists(partial));
  uint64_t kept = fs::file_size(partial);
  EXPECT_GT(kept, uint64_t(1) << 20);
  EXPECT_LT(kept, n);
  EXPECT_FALSE(fs::exists(ws.root / "big.bin"));

  FaultSpec none;
  Relay count(server->port(), none);
  auto r = run({"send", "--resume", f.string(), "127.0.0.1:big.bin", "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["resumed_from"], std::to_string(kept));
  EXPECT_EQ((*o)["bytes"], std::to_string(n));
  count.wait_done(10);
  // Records after the handshake: probe, request, data..., end, bye. A whole send is 33 data records.
  size_t whole = size_t((n + (256 << 10) - 1) / (256 << 10)) + 4;
  size_t rest = size_t((n - kept + (256 << 10) - 1) / (256 << 10)) + 4;
  EXPECT_EQ(count.records_seen(), rest);
  EXPECT_LT(count.records_seen(), whole);
  std::printf("[ resume  ] kept %llu of %llu bytes; second run %zu records (whole file: %zu)\n",
              (unsigned long long)kept, (unsigned long long)n, count.records_seen(), whole);
  ASSERT_TRUE(fs::exists(ws.root / "big.bin"));
  EXPECT_EQ(sha256_file(ws.root / "big.bin"), want);
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_TRUE(temp_debris(ws.root).empty());
}

TEST_F(Resume, MismatchedPartialIsSentAgainWhole) {
  const uint64_t n = (uint64_t(2) << 20) + 99;
  fs::path f = ws.local / "m.bin";
  write_random_file(f, n, 8);
  // A partial file that is not a prefix of ours (another version of the file).
  write_random_file(ws.root / ".m.bin.aesxfer-partial", 1 << 20, 9);
  auto r = run({"send", "--resume", f.string(), "127.0.0.1:m.bin", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["resumed_from"], "0");
  EXPECT_EQ(sha256_file(ws.root / "m.bin"), sha256_file(f));
  EXPECT_TRUE(temp_debris(ws.root).empty());
  // And with no partial file at all, --resume is a plain send.
  r = run({"send", "--resume", f.string(), "127.0.0.1:m2.bin", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "m2.bin"), sha256_file(f));
}

TEST_F(Resume, PartialFileLongerThanTheSourceIsIgnored) {
  fs::path f = ws.local / "s.bin";
  write_random_file(f, 1000, 10);
  write_random_file(ws.root / ".s.bin.aesxfer-partial", 5000, 10);
  auto r = run({"send", "--resume", f.string(), "127.0.0.1:s.bin", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "s.bin"), sha256_file(f));
  EXPECT_FALSE(fs::exists(ws.root / ".s.bin.aesxfer-partial"));
}

// Issue 16 item 4 (protocol 4): send -r --resume of a tree that is half on the server already. The
// files the server holds whole and identical are not sent (reported resumed at their end); the
// missing ones, the one that differs at the same size and the large one go whole; a probe of
// every file is pipelined first. Counted in records from the client (through a Relay) and in the
// server's put lines.
TEST_F(Resume, DashRSendsOnlyWhatTheServerLacks) {
  fs::path top = ws.local / "tree";
  std::map<std::string, std::string> sums;
  for (int d = 0; d < 2; ++d)
    for (int i = 0; i < 6; ++i) {
      std::string rel = "d" + std::to_string(d) + "/f" + std::to_string(i);
      fs::create_directories(top / ("d" + std::to_string(d)));
      write_random_file(top / rel, 4096, uint64_t(100 + d * 10 + i));
      sums[rel] = sha256_file(top / rel);
    }
  write_random_file(top / "big", uint64_t(3) << 20, 99);
  sums["big"] = sha256_file(top / "big");
  auto r = run({"send", "-r", top.string(), "127.0.0.1:.", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // Half the small files gone, one changed at the same size, the large one gone.
  const std::vector<std::string> missing{"d0/f0", "d0/f2", "d0/f4", "d1/f1", "d1/f3", "d1/f5"};
  for (const auto& m : missing) fs::remove(ws.root / "tree" / m);
  write_random_file(ws.root / "tree" / "d1" / "f0", 4096, 7777);
  fs::remove(ws.root / "tree" / "big");
  // The server logs a put after its answer, so the first run's last line can come after the
  // client's exit: wait for it, or it is counted with the second run (seen on a loaded machine).
  ASSERT_TRUE(server->wait_for_log("op=put file=\"tree/d1/f5\"", 20)) << server->log();
  const std::string before = server->log();

  FaultSpec none;
  Relay count(server->port(), none);
  r = run({"send", "-r", "--resume", top.string(), "127.0.0.1:.", "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::set<std::string> sent, skipped;
  for (const auto& line : nonempty_lines(r.out)) {
    auto o = parse_flat_json(line);
    ASSERT_TRUE(o) << line;
    std::string rel = fs::path((*o)["file"]).lexically_relative(top).generic_string();
    if ((*o)["resumed_from"] == (*o)["bytes"])
      skipped.insert(rel);
    else if ((*o)["resumed_from"] == "0")
      sent.insert(rel);
    else
      ADD_FAILURE() << line;
  }
  std::set<std::string> want_sent(missing.begin(), missing.end());
  want_sent.insert({"d1/f0", "big"});
  EXPECT_EQ(sent, want_sent);
  EXPECT_EQ(skipped.size(), 12u + 1u - want_sent.size());
  for (const auto& [rel, sum] : sums) EXPECT_EQ(sha256_file(ws.root / "tree" / rel), sum) << rel;
  EXPECT_TRUE(temp_debris(ws.root / "tree" / "d0").empty());
  count.wait_done(10);
  // Records from the client after the handshake: the top's mkdir, 2 mkdirs, 13 probes, 7 small
  // puts of 3 records (request, data, end), the large put with its own exchange of 3.6 (probe,
  // request, 12 data records, end), bye.
  EXPECT_EQ(count.records_seen(), 1u + 2u + 13u + 7u * 3u + 15u + 1u);
  const std::string log = server->log().substr(before.size());
  size_t puts = 0;
  for (size_t at = 0; (at = log.find(" op=put file=", at)) != std::string::npos; ++at) ++puts;
  EXPECT_EQ(puts, want_sent.size()) << log;

  // Everything there now: a second resume sends no file data at all (probes, mkdirs, bye).
  Relay again(server->port(), none);
  r = run({"send", "-r", "--resume", top.string(), "127.0.0.1:.", "-q"}, again.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  again.wait_done(10);
  EXPECT_EQ(again.records_seen(), 1u + 2u + 13u + 1u);
}

// A single file the server holds whole and identical: send --resume sends the probe and nothing
// more; the same size with other contents goes whole.
TEST_F(Resume, CompleteDestinationIsNotSentAgain) {
  fs::path f = ws.local / "c.bin";
  write_random_file(f, (uint64_t(2) << 20) + 5, 31);
  fs::copy_file(f, ws.root / "c.bin");
  FaultSpec none;
  {
    Relay count(server->port(), none);
    auto r = run({"send", "--resume", f.string(), "127.0.0.1:c.bin", "--json"}, count.port());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    auto o = parse_flat_json(nonempty_lines(r.out).back());
    ASSERT_TRUE(o) << r.out;
    EXPECT_EQ((*o)["resumed_from"], (*o)["bytes"]);
    EXPECT_EQ((*o)["verified"], "true");
    count.wait_done(10);
    EXPECT_EQ(count.records_seen(), 2u);  // probe, bye
  }
  {  // what a person reads: one line saying the file is up to date
    auto r = run({"send", "--resume", f.string(), "127.0.0.1:c.bin"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(nonempty_lines(r.out),
              std::vector<std::string>{
                  f.string() + ": 2097157 bytes, up to date (size and checksum match), nothing moved"})
        << r.out;
  }
  write_random_file(ws.root / "c.bin", (uint64_t(2) << 20) + 5, 32);
  auto r = run({"send", "--resume", f.string(), "127.0.0.1:c.bin", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["resumed_from"], "0");
  EXPECT_EQ(sha256_file(ws.root / "c.bin"), sha256_file(f));
}

}  // namespace
}  // namespace aesxfer::test
