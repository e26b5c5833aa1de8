// files/unique_fd.h: the one owner of a file descriptor. It closes on scope exit, on reset and
// on move-assignment, never twice, and release() hands the descriptor back unclosed.
#include "files/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <utility>

namespace aesxfer::files {
namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

int open_null() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

TEST(UniqueFd, ClosesWhenItGoesOutOfScope) {
  int raw = -1;
  {
    UniqueFd fd(open_null());
    raw = fd.get();
    ASSERT_GE(raw, 0);
    EXPECT_TRUE(fd);
    EXPECT_TRUE(is_open(raw));
  }
  EXPECT_FALSE(is_open(raw));
}

TEST(UniqueFd, MoveHandsOverOwnershipAndClosesWhatItHeld) {
  UniqueFd a(open_null()), b(open_null());
  const int ra = a.get(), rb = b.get();
  b = std::move(a);
  EXPECT_FALSE(is_open(rb)) << "the descriptor b held before the move is closed";
  EXPECT_EQ(b.get(), ra);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  UniqueFd c(std::move(b));
  EXPECT_EQ(c.get(), ra);
  EXPECT_TRUE(is_open(ra));
}

TEST(UniqueFd, ReleaseKeepsItOpenAndResetClosesIt) {
  UniqueFd fd(open_null());
  const int raw = fd.release();
  EXPECT_FALSE(fd);
  EXPECT_TRUE(is_open(raw));
  fd.reset(raw);
  EXPECT_TRUE(is_open(raw));
  fd.reset();
  EXPECT_FALSE(is_open(raw));
}

TEST(UniqueFd, CloseReportsTheKernelsAnswerOnce) {
  UniqueFd fd(open_null());
  const int raw = fd.get();
  EXPECT_EQ(fd.close(), 0);
  EXPECT_FALSE(fd);
  EXPECT_FALSE(is_open(raw));
  EXPECT_EQ(fd.close(), 0) << "closing an empty UniqueFd is a no-op";
}

}  // namespace
}  // namespace aesxfer::files
