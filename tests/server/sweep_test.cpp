// Expiry of kept partial files and temporary-file debris (server/sweep.h): unit tests of the
// sweeper on a directory. The server that sweeps when a put arrives: tests/e2e/sweep_e2e_test.cpp.
#include "server/sweep.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include "files/atomic_file.h"
#include "files/unique_fd.h"
#include "server/root.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

using server::Sweeper;

TEST(Sweep, NamePatterns) {
  EXPECT_TRUE(files::is_partial_name(".a.bin.aesxfer-partial"));
  EXPECT_FALSE(files::is_partial_name("a.bin.aesxfer-partial"));  // not hidden: a user's file
  EXPECT_FALSE(files::is_partial_name(".aesxfer-partial"));
  EXPECT_TRUE(files::is_temp_name(".a.bin.aesxfer-tmp-Ab3xY9q0Zz"));
  EXPECT_FALSE(files::is_temp_name(".a.bin.aesxfer-tmp-Ab3xY9q0Z"));
  EXPECT_FALSE(files::is_temp_name(".a.bin.aesxfer-tmp-Ab3xY.q0Zz"));
  EXPECT_FALSE(files::is_temp_name("a.bin.aesxfer-tmp-Ab3xY9q0Zz"));
  EXPECT_FALSE(files::is_temp_name(".a.bin.aesxfer-partial"));
  // The fourth re-attack (N3): names a user gives, with the shape of the old ".aesxfer-XXXXXX".
  EXPECT_FALSE(files::is_temp_name(".db.aesxfer-backup"));
  EXPECT_FALSE(files::is_temp_name(".a.bin.aesxfer-Ab3xY9"));
  for (int i = 0; i < 20; ++i) {
    const std::string n = files::random_temp_name("a.bin");
    EXPECT_TRUE(files::is_temp_name(n)) << n;
    EXPECT_EQ(n.rfind(".a.bin.aesxfer-tmp-", 0), 0u) << n;
  }
  const std::string longest = files::random_temp_name(std::string(255, 'x'));
  EXPECT_LE(longest.size(), 255u);
  EXPECT_TRUE(files::is_temp_name(longest)) << longest;
}

// A thirty-third re-attack (A-N1): the memory of swept directories was emptied whole once it held
// 4,096, so a client that probed into that many others had a large directory read again seconds
// after its sweep. Filling it now forgets what is past the interval, else the oldest: a directory
// swept a moment ago stays remembered while 5,000 others are swept.
TEST(Sweep, ADirectorySweptAMomentAgoIsNotSweptAgainAfterManyOthers) {
  TempDir d("aesxfer-sweepmem");
  fs::create_directories(d / "big");
  auto plant = [&] {
    write_text_file(d / "big" / ".stale.aesxfer-tmp-ABCDEFGHIJ", "x");
    fs::permissions(d / "big" / ".stale.aesxfer-tmp-ABCDEFGHIJ", fs::perms(0600));
    make_old(d / "big" / ".stale.aesxfer-tmp-ABCDEFGHIJ", 3);
  };
  Sweeper sweeper(std::chrono::hours(24 * 7));
  auto sweep = [&](const fs::path& dir) {
    files::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    sweeper.maybe_sweep(fd.get(), dir.string(), [](const std::string&) {});
  };
  plant();
  sweep(d / "big");
  EXPECT_FALSE(fs::exists(d / "big" / ".stale.aesxfer-tmp-ABCDEFGHIJ")) << "the first sweep";
  for (int i = 0; i < 5000; ++i) {
    fs::create_directory(d / ("o" + std::to_string(i)));
    sweep(d / ("o" + std::to_string(i)));
  }
  plant();
  sweep(d / "big");
  EXPECT_TRUE(fs::exists(d / "big" / ".stale.aesxfer-tmp-ABCDEFGHIJ")) << "swept again within 10 minutes";
}

// A sweep reads a chunk of names a visit, from one allowance for the whole server, and no client
// key pays for it (a forty-seventh re-attack, A47-1: charged to the key whose put brought it,
// 90,000 names another local user planted locked that key out of its puts for 40 s). A directory
// larger than a chunk is swept by the next visits, each going on where the last stopped; with the
// allowance spent, nothing is read.
TEST(Sweep, ADirectoryIsSweptAChunkAVisitFromTheServersAllowance) {
  TempDir d("aesxfer-sweepchunk");
  constexpr int kStale = 300;
  for (int i = 0; i < kStale; ++i) {
    const fs::path f = d / (".f" + std::to_string(i) + ".aesxfer-tmp-ABCDEFGHIJ");
    write_text_file(f, "");
    fs::permissions(f, fs::perms(0600));
    make_old(f, 3);
  }
  auto stale_left = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(d.path()))
      n += files::is_temp_name(e.path().filename().string());
    return n;
  };
  files::UniqueFd fd(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  {
    Sweeper s(std::chrono::hours(24 * 7), std::chrono::hours(24), {1000, 0, 100});
    s.maybe_sweep(fd.get(), "d", nullptr);
    const int after_one = stale_left();
    EXPECT_GE(after_one, kStale - 100) << "one visit reads 100 names at most";
    EXPECT_LT(after_one, kStale) << "and removes what it read";
    for (int i = 0; i < 3; ++i) s.maybe_sweep(fd.get(), "d", nullptr);  // 400 names read in all
    EXPECT_EQ(stale_left(), 0) << "the visits go on where the last one stopped";
  }
  for (int i = 0; i < kStale; ++i) {
    const fs::path f = d / (".f" + std::to_string(i) + ".aesxfer-tmp-ABCDEFGHIJ");
    write_text_file(f, "");
    fs::permissions(f, fs::perms(0600));
    make_old(f, 3);
  }
  Sweeper poor(std::chrono::hours(24 * 7), std::chrono::hours(24), {150, 0, 100});
  for (int i = 0; i < 10; ++i) poor.maybe_sweep(fd.get(), "d", nullptr);
  EXPECT_GE(stale_left(), kStale - 150) << "150 names are all the allowance lets the sweeps read";
}

TEST(Sweep, OldDebrisGoesFreshAndLockedAndForeignStay) {
  TempDir d("aesxfer-sweep");
  auto make = [&](const std::string& n, long days) {
    write_text_file(d / n, "x");
    fs::permissions(d / n, fs::perms(0600));  // as the server makes its temporary and partial files
    make_old(d / n, days);
  };
  make(".old.bin.aesxfer-partial", 8);
  make(".new.bin.aesxfer-partial", 1);
  make(".locked.bin.aesxfer-partial", 30);
  make(".old.bin.aesxfer-tmp-Q1w2E3r4T5", 2);
  make(".new.bin.aesxfer-tmp-R4t5Y6u7I8", 0);
  make("old-user-file.bin", 400);
  make("old.bin.aesxfer-partial", 400);  // not hidden: not ours
  fs::create_directory(d / ".dir.aesxfer-partial");
  make_old(d / ".dir.aesxfer-partial", 30);
  fs::create_symlink(d / "old-user-file.bin", d / ".link.aesxfer-partial");
  // A third re-attack (R3): a user's file with a temporary file's shape, but not its marks (0644;
  // another user's; a second link) is no debris.
  make(".db.aesxfer-backup", 400);
  fs::permissions(d / ".db.aesxfer-backup", fs::perms(0644));
  make(".linked.aesxfer-tmp-Zz9Yy8Xx7W", 400);
  fs::create_hard_link(d / ".linked.aesxfer-tmp-Zz9Yy8Xx7W", d / "second-name");
  // The fourth (N3): the same name, the user's own and 0600 like a temporary file: the name
  // alone tells it apart now (".aesxfer-tmp-" and ten characters).
  make(".own.aesxfer-backup", 400);
  make(".theirs.aesxfer-partial", 400);
  if (::geteuid() == 0)
    EXPECT_EQ(::chown((d / ".theirs.aesxfer-partial").c_str(), 65534, 65534), 0);
  else
    fs::permissions(d / ".theirs.aesxfer-partial", fs::perms(0660));
  int lk = ::open((d / ".locked.bin.aesxfer-partial").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(lk, 0);
  ASSERT_EQ(::flock(lk, LOCK_EX | LOCK_NB), 0);  // a session resuming it right now

  std::vector<std::string> logged;
  Sweeper s(std::chrono::hours(24 * 7));
  EXPECT_EQ(s.sweep(d.path(), [&](const std::string& l) { logged.push_back(l); }), 2u);
  ::close(lk);
  EXPECT_FALSE(fs::exists(d / ".old.bin.aesxfer-partial"));
  EXPECT_FALSE(fs::exists(d / ".old.bin.aesxfer-tmp-Q1w2E3r4T5"));
  for (const char* kept :
       {".new.bin.aesxfer-partial", ".locked.bin.aesxfer-partial", ".new.bin.aesxfer-tmp-R4t5Y6u7I8",
        "old-user-file.bin", "old.bin.aesxfer-partial", ".dir.aesxfer-partial", ".db.aesxfer-backup",
        ".linked.aesxfer-tmp-Zz9Yy8Xx7W", ".theirs.aesxfer-partial", ".own.aesxfer-backup"})
    EXPECT_TRUE(fs::exists(d / kept)) << kept;
  EXPECT_TRUE(fs::is_symlink(d / ".link.aesxfer-partial"));
  ASSERT_EQ(logged.size(), 1u);  // one line for the sweep
  EXPECT_NE(logged[0].find(" partial=1 temporary=1 first="), std::string::npos) << logged[0];

  // 0 days: partial files are kept for ever (temporary debris still expires).
  make(".old2.bin.aesxfer-partial", 100);
  Sweeper keep(std::chrono::seconds(0));
  EXPECT_EQ(keep.sweep(d.path(), nullptr), 0u);
  EXPECT_TRUE(fs::exists(d / ".old2.bin.aesxfer-partial"));
}

// A temporary file a session is writing stays however old it looks: a producer of "send -" may
// be silent for a day (a nineteenth re-attack, N1: the sweep removed a live stream's temporary
// file and the put failed at its end, the stream lost). The server's TempFile holds a lock on it.
TEST(Sweep, ATemporaryFileBeingWrittenStays) {
  TempDir d("aesxfer-sweep");
  {
    server::Place dest{files::UniqueFd(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)),
                       "live.bin", "live.bin"};
    ASSERT_TRUE(dest.dir);
    server::TempFile live(dest);
    std::vector<fs::path> tmp;
    for (const auto& e : fs::directory_iterator(d.path())) tmp.push_back(e.path());
    ASSERT_EQ(tmp.size(), 1u);
    make_old(tmp[0], 3);
    Sweeper s(std::chrono::hours(24 * 7));
    EXPECT_EQ(s.sweep(d.path(), nullptr), 0u);
    EXPECT_TRUE(fs::exists(tmp[0]));
    live.discard();
  }
  // Once nobody holds it, it is debris like any other.
  write_text_file(d / ".gone.bin.aesxfer-tmp-Q1w2E3r4T5", "x");
  fs::permissions(d / ".gone.bin.aesxfer-tmp-Q1w2E3r4T5", fs::perms(0600));
  make_old(d / ".gone.bin.aesxfer-tmp-Q1w2E3r4T5", 3);
  EXPECT_EQ(Sweeper(std::chrono::hours(24 * 7)).sweep(d.path(), nullptr), 1u);
}

}  // namespace
}  // namespace aesxfer::test
