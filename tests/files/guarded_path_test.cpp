// files/guarded_path.h: a local path resolved from descriptors, a symbolic link followed only by
// the kernel's rule for sticky directories (fs.protected_symlinks), whatever the sysctl says. The
// tests run as root; "another user" is uid 65534.
#include "files/guarded_path.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "files/unique_fd.h"
#include "proto/failure.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

struct stat stat_fd(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return st;
}

struct stat stat_path(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st;
}

bool same(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// A sticky directory anyone may write to (as /tmp), owned by root, with a private directory beside it.
struct TempBase {
  TempDir tmp{"aesxfer-guarded"};
};
struct Sticky : TempBase, StickyShare {  // TempBase first: it is made before StickyShare uses it
  Sticky() : StickyShare(tmp.path()) { write_text_file(priv / "rc", "PRIVATE\n"); }
};

std::string refusal(const fs::path& p) {
  try {
    files::resolve_guarded(p);
  } catch (const proto::Failure& f) {
    return f.what();
  }
  return "";
}

// A forty-fifth re-attack (A45-1): each probe, mkdir or put walked every directory from its place
// up to the root, 12 ms of server CPU 2,043 levels down. With CleanWays the walk stops at a
// directory judged (with its way up) in the last `ttl`: what changes above it is seen within ttl.
TEST(CleanWays, AWalkStopsAtADirectoryJudgedLatelyAndSeesChangesWithinItsTime) {
  TempDir tmp("aesxfer-cleanways");
  const fs::path s = tmp.path() / "s", d = s / "d", e = d / "e";
  fs::create_directories(e);
  ASSERT_EQ(::chmod(s.c_str(), 0755), 0);
  ASSERT_EQ(::chown(d.c_str(), kNobody, kNobody), 0);  // another user's, in a directory only root writes
  const struct stat top = stat_path(tmp.path());
  files::CleanWays clean(std::chrono::milliseconds(400));
  files::UniqueFd efd(::open(e.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(efd);
  EXPECT_EQ(files::planted_way_text(efd.get(), &top, &clean), "");  // judged to the top, clean
  EXPECT_TRUE(clean.known(stat_path(e)));
  EXPECT_TRUE(clean.known(stat_path(d)));
  // s turns sticky and writable by others: d is now a directory another user planted there.
  ASSERT_EQ(::chmod(s.c_str(), 01777), 0);
  EXPECT_NE(files::planted_way_text(efd.get(), &top), "");          // a walk without the set sees it...
  EXPECT_EQ(files::planted_way_text(efd.get(), &top, &clean), "");  // ...one with it stops at e
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  EXPECT_NE(files::planted_way_text(efd.get(), &top, &clean).find("a directory owned by uid 65534"),
            std::string::npos);  // past its time, e is judged again, and the walk goes up to d
  // Nothing planted is ever remembered as clean.
  EXPECT_FALSE(clean.known(stat_path(e)));
}

TEST(GuardedPath, AnotherUsersLinkInAStickyDirectoryIsRefusedAnywhereOnTheWay) {
  Sticky s;
  s.link("x", s.priv / "rc", kNobody);  // the last component
  s.link("d", s.priv, kNobody);         // a directory on the way
  EXPECT_NE(refusal(s.shared / "x")
                .find("x: a symbolic link owned by uid 65534 in a sticky directory others "
                      "can write to (not followed, as fs.protected_symlinks refuses it)"),
            std::string::npos);
  for (const fs::path& p : {s.shared / "d" / "rc", s.shared / "d" / "new", s.shared / "d" / ""})
    EXPECT_NE(refusal(p).find("d: a symbolic link owned by uid 65534"), std::string::npos) << p;
  EXPECT_EQ(::geteuid(), 0u);  // the rule's "this user" below is root
}

TEST(GuardedPath, OwnLinksAndTheDirectoryOwnersAreFollowed) {
  Sticky s;
  s.link("mine", s.priv / "rc", 0);  // this user's (root's)
  files::GuardedEntry g = files::resolve_guarded(s.shared / "mine");
  EXPECT_EQ(g.name, "rc");
  EXPECT_TRUE(g.followed);
  EXPECT_EQ(g.path, s.priv / "rc");
  EXPECT_TRUE(same(stat_fd(g.dir.get()), stat_path(s.priv)));
  // A sticky directory owned by uid 65534: its owner's links count (the kernel's rule).
  ASSERT_EQ(::chown(s.shared.c_str(), kNobody, kNobody), 0);
  s.link("owners", s.priv, kNobody);
  g = files::resolve_guarded(s.shared / "owners" / "rc");
  EXPECT_EQ(g.name, "rc");
  EXPECT_TRUE(same(stat_fd(g.dir.get()), stat_path(s.priv)));
  // Not sticky: any link is followed (nothing the kernel refuses either).
  const fs::path open_dir = s.tmp / "open";
  fs::create_directories(open_dir);
  fs::permissions(open_dir, fs::perms(0777));
  fs::create_symlink(s.priv, open_dir / "l");
  ASSERT_EQ(::lchown((open_dir / "l").c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(files::resolve_guarded(open_dir / "l" / "rc").name, "rc");
}

TEST(GuardedPath, TheShapesOfAPath) {
  Sticky s;
  files::GuardedEntry g = files::resolve_guarded(s.priv / "missing");  // created by the caller
  EXPECT_EQ(g.name, "missing");
  EXPECT_FALSE(g.followed);
  g = files::resolve_guarded(s.priv / "new" / "");  // a directory to make, written with a "/"
  EXPECT_EQ(g.name, "new");
  g = files::resolve_guarded(s.priv / "");  // a directory itself
  EXPECT_EQ(g.name, ".");
  EXPECT_TRUE(same(stat_fd(g.dir.get()), stat_path(s.priv)));
  g = files::resolve_guarded(s.shared / ".." / "private" / "rc");
  EXPECT_EQ(g.name, "rc");
  EXPECT_TRUE(same(stat_fd(g.dir.get()), stat_path(s.priv)));
  EXPECT_NE(refusal(s.priv / "rc" / "x").find("not a directory"), std::string::npos);
  EXPECT_NE(refusal(s.priv / "nodir" / "x").find("no such file or directory"), std::string::npos);
  fs::create_symlink("loop", s.priv / "loop");
  EXPECT_NE(refusal(s.priv / "loop").find("too many levels of symbolic links"), std::string::npos);
  g = files::resolve_guarded("/proc/self/fd/1");  // only the kernel can follow it
  EXPECT_TRUE(g.magic);
  EXPECT_EQ(g.name, "1");
}

// The check and the use are one: another user swapping their own link and directory under the
// name (RENAME_EXCHANGE, as a racing attacker would) never gets the private directory used,
// however the race falls (a twenty-third re-attack, N2, won it against a check made on names).
TEST(GuardedPath, SwappingTheNameDuringTheWalkNeverLeadsThroughTheLink) {
  Sticky s;
  s.link("d", s.priv, kNobody);
  fs::create_directories(s.shared / "d.r");
  ASSERT_EQ(::chown((s.shared / "d.r").c_str(), kNobody, kNobody), 0);
  std::atomic<bool> stop{false};
  std::thread racer([&] {
    while (!stop)
      ::renameat2(AT_FDCWD, (s.shared / "d").c_str(), AT_FDCWD, (s.shared / "d.r").c_str(), RENAME_EXCHANGE);
  });
  const struct stat priv = stat_path(s.priv);
  int refused = 0, resolved = 0, through = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    try {
      files::GuardedEntry g = files::resolve_guarded(s.shared / "d" / "payload");
      ++resolved;
      if (same(stat_fd(g.dir.get()), priv)) ++through;
    } catch (const proto::Failure&) {
      ++refused;
    }
  }
  stop = true;
  racer.join();
  EXPECT_EQ(through, 0);
  EXPECT_GT(refused, 0);
  EXPECT_GT(resolved, 0);
  std::printf("[ guarded ] %d resolved into the other user's directory, %d refused, 0 through the link\n",
              resolved, refused);
}

}  // namespace
}  // namespace aesxfer::test
