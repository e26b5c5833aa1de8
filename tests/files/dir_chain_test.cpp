// files/dir_chain.h: directories below a top fd, in listing order, with a bounded number of
// ancestors kept open. Before it, the server's listing and the client's recv -r opened every
// directory from the top (N^2/2 openat calls for a chain N deep: 10 s of server CPU at N = 2000).
#include "files/dir_chain.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <stdexcept>
#include <string>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

using files::DirChain;
using files::UniqueFd;

struct Counted {
  size_t opens = 0;
  DirChain::Opener opener() {
    return [this](int at, const std::string& name, const std::string& rel) {
      ++opens;
      UniqueFd fd(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) throw std::runtime_error(rel + ": cannot open");
      return fd;
    };
  }
};

ino_t inode_of_fd(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return st.st_ino;
}

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_ino;
}

TEST(DirChain, ADeepChainCostsOneOpenPerLevelAndFewFds) {
  TempDir d("aesxfer-dirchain");
  const size_t depth = 1800;  // "d/" per level: the deepest path stays under PATH_MAX for cleanup
  {
    UniqueFd at(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (size_t i = 0; i < depth; ++i) {
      ASSERT_EQ(::mkdirat(at.get(), "d", 0700), 0) << i;
      at = UniqueFd(::openat(at.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    }
  }
  UniqueFd top(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  Counted c;
  DirChain chain(top.get(), c.opener());
  std::string rel;
  size_t most_held = 0;
  for (size_t i = 0; i < depth; ++i) {
    rel += i ? "/d" : "d";
    ASSERT_GE(chain.open(rel), 0);
    most_held = std::max(most_held, chain.held());
  }
  EXPECT_EQ(c.opens, depth);  // from the top each time: depth * (depth + 1) / 2 = 1.6 million
  EXPECT_LE(most_held, DirChain::kNear + depth / DirChain::kStride + 2);  // the last one and its parent
  // Back up to every level, deepest first (recv -r sets modes that way): at most kStride opens each.
  const size_t before = c.opens;
  for (size_t i = depth; i-- > 0;) {
    const std::string up = rel.substr(0, 2 * i + 1);
    ASSERT_EQ(inode_of_fd(chain.open(up)), inode_of(d / up)) << i;
  }
  EXPECT_LE(c.opens - before, depth * DirChain::kStride);
  EXPECT_GT(c.opens - before, 0u);
}

// A forty-ninth re-attack (A49-1): below a spine deeper than kNear, the leaves of one directory
// were each opened from the nearest kept level again (55 opens a leaf under a spine of 63). The
// parent of the last directory stays open: a sibling costs one open.
TEST(DirChain, SiblingsBelowADeepSpineCostOneOpenEach) {
  TempDir d("aesxfer-dirchain");
  std::string spine;
  for (int i = 0; i < 63; ++i) spine += i ? "/a" : "a";
  fs::create_directories(d / spine);
  constexpr int kLeaves = 100;
  for (int i = 0; i < kLeaves; ++i) fs::create_directory(d / spine / ("l" + std::to_string(i)));
  UniqueFd top(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  Counted c;
  DirChain chain(top.get(), c.opener());
  ASSERT_GE(chain.open(spine), 0);
  const size_t before = c.opens;
  for (int i = 0; i < kLeaves; ++i) {
    const std::string leaf = spine + "/l" + std::to_string(i);
    ASSERT_EQ(inode_of_fd(chain.open(leaf)), inode_of(d / leaf)) << i;
  }
  EXPECT_EQ(c.opens - before, size_t(kLeaves));
  EXPECT_LE(chain.held(), DirChain::kNear + 63 / DirChain::kStride + 2);
}

TEST(DirChain, EveryDirectoryOfATreeInListingOrderIsTheRightOne) {
  TempDir d("aesxfer-dirchain");
  const std::vector<std::string> dirs = {"a",    "a/b",    "a/b/c",    "a/b2", "a2",
                                         "a2/x", "a2/x/y", "a2/x/y/z", "b"};
  for (const auto& rel : dirs) fs::create_directory(d / rel);
  UniqueFd top(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  Counted c;
  DirChain chain(top.get(), c.opener());
  EXPECT_EQ(chain.open(""), top.get());
  for (int round = 0; round < 2; ++round)
    for (const auto& rel : dirs) {
      ASSERT_EQ(inode_of_fd(chain.open(rel)), inode_of(d / rel)) << rel;
      ASSERT_TRUE(chain.current());
      EXPECT_EQ(inode_of_fd(chain.current()->get()), inode_of(d / rel)) << rel;
      EXPECT_EQ(chain.open(rel), chain.current()->get());  // the same again: no open
    }
  EXPECT_EQ(c.opens, 2 * dirs.size());  // near the top every level is kept: one open each
  // A holder of current() keeps its directory after the chain moves on.
  chain.open("a2/x/y/z");
  auto held = chain.current();
  chain.open("b");
  EXPECT_EQ(inode_of_fd(held->get()), inode_of(d / "a2/x/y/z"));
}

TEST(DirChain, ASymlinkOnTheWayIsRefusedByTheOpener) {
  TempDir d("aesxfer-dirchain");
  fs::create_directories(d / "real/sub");
  fs::create_directory_symlink(d / "real", d / "link");
  UniqueFd top(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  Counted c;
  DirChain chain(top.get(), c.opener());
  EXPECT_GE(chain.open("real/sub"), 0);
  EXPECT_THROW(chain.open("link/sub"), std::runtime_error);
  EXPECT_THROW(chain.open("link"), std::runtime_error);
  EXPECT_EQ(inode_of_fd(chain.open("real")), inode_of(d / "real"));  // and goes on after a refusal
}

}  // namespace
}  // namespace aesxfer::test
