// files/link_walk.h: the one walker of symbolic-link chains (StrictModes for authorized_keys and
// the server's hidden names), and files/io.h's ownership_problem, the one "this user's own file"
// rule (partial files, resume bases, key logs, the sweeper).
#include "files/link_walk.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "files/io.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

struct Seen {
  std::vector<fs::path> names;
  std::vector<std::pair<fs::path, fs::path>> links;  // (link, the directory holding it)
  std::string result;
};

Seen walk(const fs::path& p, const std::string& stop_at = "") {
  Seen s;
  files::LinkWalk w;
  w.on_name = [&s](const fs::path& n) { s.names.push_back(n); };
  w.on_link = [&](const fs::path& link, const struct stat& st, const fs::path& dir) -> std::string {
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << link;
    s.links.emplace_back(link, dir);
    return link.filename() == stop_at ? "stopped at " + link.string() : "";
  };
  s.result = files::walk_links(p, w);
  return s;
}

TEST(LinkWalk, APathWithoutLinksHasOneName) {
  TempDir t("aesxfer-walk");
  const fs::path d = fs::canonical(t.path());
  fs::create_directory(d / "a");
  write_text_file(d / "a" / "f", "x");
  const Seen s = walk(d / "a" / "f");
  EXPECT_EQ(s.result, "");
  EXPECT_TRUE(s.links.empty());
  EXPECT_EQ(s.names, std::vector<fs::path>{d / "a" / "f"});
  // "." and ".." are resolved as the kernel does, and a name that does not exist yet is a name.
  EXPECT_EQ(walk(d / "a" / "." / ".." / "a" / "new").names, std::vector<fs::path>{d / "a" / "new"});
  EXPECT_EQ(walk(d / "a" / "..").names, std::vector<fs::path>{d});
}

TEST(LinkWalk, EveryNameOfTheLastComponentInTurn) {
  TempDir t("aesxfer-walk");
  const fs::path d = fs::canonical(t.path());
  fs::create_directory(d / "keys");
  fs::create_symlink("b", d / "a");                   // relative, in the same directory
  fs::create_symlink(d / "keys" / "later", d / "b");  // absolute, to a file not made yet
  const Seen s = walk(d / "a");
  EXPECT_EQ(s.result, "");
  EXPECT_EQ(s.names, (std::vector<fs::path>{d / "a", d / "b", d / "keys" / "later"}));
  ASSERT_EQ(s.links.size(), 2u);
  EXPECT_EQ(s.links[0], std::make_pair(d / "a", d));
  EXPECT_EQ(s.links[1], std::make_pair(d / "b", d));
}

TEST(LinkWalk, ALinkOnTheWayIsShownWithTheDirectoryThatHoldsIt) {
  TempDir t("aesxfer-walk");
  const fs::path d = fs::canonical(t.path());
  fs::create_directories(d / "real" / "inner");
  fs::create_directory(d / "up");
  fs::create_symlink("../real", d / "up" / "via");
  write_text_file(d / "real" / "inner" / "f", "x");
  const Seen s = walk(d / "up" / "via" / "inner" / "f");
  EXPECT_EQ(s.result, "");
  ASSERT_EQ(s.links.size(), 1u);
  EXPECT_EQ(s.links[0], std::make_pair(d / "up" / "via", d / "up"));
  // The name is the resolved one: a directory link is not a name of the file.
  EXPECT_EQ(s.names, std::vector<fs::path>{d / "real" / "inner" / "f"});
}

TEST(LinkWalk, ALoopEndsAfterFortyLinksAndACallerCanStopTheWalk) {
  TempDir t("aesxfer-walk");
  const fs::path d = fs::canonical(t.path());
  fs::create_symlink("y", d / "x");
  fs::create_symlink("x", d / "y");
  const Seen loop = walk(d / "x");
  EXPECT_EQ(loop.result, "too many symbolic links on the way to " + (d / "x").string());
  EXPECT_EQ(loop.links.size(), 40u);
  const Seen stopped = walk(d / "x", "y");
  EXPECT_EQ(stopped.result, "stopped at " + (d / "y").string());
  EXPECT_EQ(stopped.links.size(), 2u);
  EXPECT_EQ(stopped.names, (std::vector<fs::path>{d / "x", d / "y"}));
}

TEST(OwnershipProblem, OnlyThisUsersFileWithOneLinkAndNoneOfTheForbiddenBits) {
  TempDir t("aesxfer-own");
  const fs::path f = t / "f";
  write_text_file(f, "x");
  auto problem = [&](unsigned forbidden) {
    struct stat st {};
    EXPECT_EQ(::lstat(f.c_str(), &st), 0);
    return files::ownership_problem(st, forbidden);
  };
  fs::permissions(f, fs::perms(0600));
  EXPECT_EQ(problem(077), "");
  fs::permissions(f, fs::perms(0644));
  EXPECT_EQ(problem(022), "");
  EXPECT_EQ(problem(077), "readable by group or others (mode 0644)");
  fs::permissions(f, fs::perms(0620));
  EXPECT_EQ(problem(022), "writable by group or others (mode 0620)");
  fs::permissions(f, fs::perms(0666));
  EXPECT_EQ(problem(077), "readable and writable by group or others (mode 0666)");
  EXPECT_EQ(problem(0), "");
  fs::create_hard_link(f, t / "second");
  EXPECT_EQ(problem(0), "has 2 links (another name would receive the data)");
  fs::remove(t / "second");
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(f.c_str(), 65534, 65534), 0);
    EXPECT_EQ(problem(0), "owned by uid 65534, not by this user (uid 0)");
  }
}

}  // namespace
}  // namespace aesxfer::test
