// files::FileWindow: the mapping a sender seals from, and what happens when the file shrinks under
// it (zeros and shrank(), never a SIGBUS that kills the process).
#include "files/file_window.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>

#include "proto/failure.h"
#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

// A temporary file of `n` random bytes, removed at the end.
struct TempFile {
  std::string path;
  int fd = -1;
  Bytes data;
  explicit TempFile(size_t n) {
    char tmpl[] = "/tmp/aesxfer-window-XXXXXX";
    fd = ::mkstemp(tmpl);
    path = tmpl;
    std::mt19937_64 rng(n);
    data = random_bytes(rng, n);
    EXPECT_EQ(::write(fd, data.data(), n), ssize_t(n));
  }
  ~TempFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
};

TEST(FileWindow, ReadsTheFileAndKeepsTheWindowWhileItHoldsTheRange) {
  TempFile f(3 << 20);
  ASSERT_TRUE(files::FileWindow::mappable(f.fd));
  files::FileWindow w;
  const uint8_t* a = w.at(f.fd, 5, 1000, 1 << 20);
  EXPECT_EQ(Bytes(a, a + 1000), Bytes(f.data.begin() + 5, f.data.begin() + 1005));
  const uint8_t* b = w.at(f.fd, 4096 * 3 + 7, 500, 1 << 20);  // inside the window: no remapping
  EXPECT_EQ(b, a - 5 + 4096 * 3 + 7);
  const uint8_t* c = w.at(f.fd, (2 << 20) + 13, (1 << 20) - 13, 1 << 20);  // the file's last byte
  EXPECT_EQ(Bytes(c, c + (1 << 20) - 13), Bytes(f.data.begin() + (2 << 20) + 13, f.data.end()));
  EXPECT_FALSE(w.shrank());
  EXPECT_FALSE(files::FileWindow::mappable(-1));
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  EXPECT_FALSE(files::FileWindow::mappable(p[0]));
  ::close(p[0]);
  ::close(p[1]);
}

TEST(FileWindow, RangeBeyondTheFilesEndFails) {
  TempFile f(1 << 20);
  files::FileWindow w;
  EXPECT_THROW(w.at(f.fd, (1 << 20) - 10, 11, 1 << 20), proto::Failure);
}

TEST(FileWindow, ShrinkUnderTheWindowReadsZerosAndIsReported) {
  TempFile f(8 << 20);
  files::FileWindow w;
  const volatile uint8_t* p = w.at(f.fd, 0, 4096, 8 << 20);
  ASSERT_EQ(::ftruncate(f.fd, 1 << 20), 0);
  uint8_t gone = 0xff;
  for (size_t i = 0; i < 4096; ++i) gone &= p[(5 << 20) + i];  // SIGBUS without the handler
  EXPECT_EQ(gone, 0);
  EXPECT_TRUE(w.shrank());
  EXPECT_EQ(p[100], f.data[100]);  // what is still in the file reads as before
  files::FileWindow next;          // a new window starts unshrunk
  EXPECT_FALSE(next.shrank());
}

// The handler takes only faults inside a window: any other SIGBUS still ends the process.
TEST(FileWindowDeathTest, AFaultOutsideAWindowStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempFile f(1 << 20);
  files::FileWindow w;  // the handler is installed
  EXPECT_EXIT(
      {
        void* m = ::mmap(nullptr, 1 << 20, PROT_READ, MAP_SHARED, f.fd, 0);
        if (::ftruncate(f.fd, 0) != 0) std::_Exit(3);
        volatile uint8_t x = static_cast<volatile uint8_t*>(m)[4096];
        (void)x;
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
  EXPECT_EXIT(::raise(SIGBUS), ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace aesxfer::test
