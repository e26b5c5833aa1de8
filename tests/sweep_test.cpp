// Expiry of kept partial files and temporary-file debris (server/sweep.h): unit tests of the
// sweeper on a directory, and end to end through a server that sweeps when a put arrives.
#include "server/sweep.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

using server::Sweeper;

void age(const fs::path& p, long days) {
  timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = std::time(nullptr) - days * 86400 - 60;
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << p;
}

TEST(Sweep, NamePatterns) {
  EXPECT_TRUE(Sweeper::is_partial_name(".a.bin.aesxfer-partial"));
  EXPECT_FALSE(Sweeper::is_partial_name("a.bin.aesxfer-partial"));  // not hidden: a user's file
  EXPECT_FALSE(Sweeper::is_partial_name(".aesxfer-partial"));
  EXPECT_TRUE(Sweeper::is_temp_name(".a.bin.aesxfer-Ab3xY9"));
  EXPECT_FALSE(Sweeper::is_temp_name(".a.bin.aesxfer-Ab3xY"));
  EXPECT_FALSE(Sweeper::is_temp_name(".a.bin.aesxfer-Ab3x.9"));
  EXPECT_FALSE(Sweeper::is_temp_name("a.bin.aesxfer-Ab3xY9"));
  EXPECT_FALSE(Sweeper::is_temp_name(".a.bin.aesxfer-partial"));
}

TEST(Sweep, OldDebrisGoesFreshAndLockedAndForeignStay) {
  TempDir d("aesxfer-sweep");
  auto make = [&](const std::string& n, long days) {
    write_text_file(d / n, "x");
    age(d / n, days);
  };
  make(".old.bin.aesxfer-partial", 8);
  make(".new.bin.aesxfer-partial", 1);
  make(".locked.bin.aesxfer-partial", 30);
  make(".old.bin.aesxfer-Q1w2E3", 2);
  make(".new.bin.aesxfer-R4t5Y6", 0);
  make("old-user-file.bin", 400);
  make("old.bin.aesxfer-partial", 400);  // not hidden: not ours
  fs::create_directory(d / ".dir.aesxfer-partial");
  age(d / ".dir.aesxfer-partial", 30);
  fs::create_symlink(d / "old-user-file.bin", d / ".link.aesxfer-partial");
  int lk = ::open((d / ".locked.bin.aesxfer-partial").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(lk, 0);
  ASSERT_EQ(::flock(lk, LOCK_EX | LOCK_NB), 0);  // a session resuming it right now

  std::vector<std::string> logged;
  Sweeper s(std::chrono::hours(24 * 7));
  EXPECT_EQ(s.sweep(d.path(), [&](const std::string& l) { logged.push_back(l); }), 2u);
  ::close(lk);
  EXPECT_FALSE(fs::exists(d / ".old.bin.aesxfer-partial"));
  EXPECT_FALSE(fs::exists(d / ".old.bin.aesxfer-Q1w2E3"));
  for (const char* kept :
       {".new.bin.aesxfer-partial", ".locked.bin.aesxfer-partial", ".new.bin.aesxfer-R4t5Y6",
        "old-user-file.bin", "old.bin.aesxfer-partial", ".dir.aesxfer-partial"})
    EXPECT_TRUE(fs::exists(d / kept)) << kept;
  EXPECT_TRUE(fs::is_symlink(d / ".link.aesxfer-partial"));
  EXPECT_EQ(logged.size(), 2u);

  // 0 days: partial files are kept for ever (temporary debris still expires).
  make(".old2.bin.aesxfer-partial", 100);
  Sweeper keep(std::chrono::seconds(0));
  EXPECT_EQ(keep.sweep(d.path(), nullptr), 0u);
  EXPECT_TRUE(fs::exists(d / ".old2.bin.aesxfer-partial"));
}

TEST(Sweep, ServerSweepsWhereAPutLands) {
  Workspace ws;
  fs::create_directories(ws.root / "in");
  write_text_file(ws.root / "in" / ".gone.aesxfer-partial", "x");
  age(ws.root / "in" / ".gone.aesxfer-partial", 3);
  write_text_file(ws.root / ".elsewhere.aesxfer-partial", "x");  // another directory: untouched
  age(ws.root / ".elsewhere.aesxfer-partial", 3);
  ServerProcess server(ws.home, ws.root, {"--partial-max-age", "2"});
  fs::path src = ws.local / "a.bin";
  write_random_file(src, 1000, 1);
  auto r = run_aesxfer({"send", src.string(), "127.0.0.1:in/", "-q", "-P", std::to_string(server.port())},
                       ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(ws.root / "in" / ".gone.aesxfer-partial"));
  EXPECT_TRUE(fs::exists(ws.root / ".elsewhere.aesxfer-partial"));
  EXPECT_TRUE(server.wait_for_log("expired partial file")) << server.log();
  EXPECT_EQ(sha256_file(ws.root / "in" / "a.bin"), sha256_file(src));
}

}  // namespace
}  // namespace aesxfer::test
