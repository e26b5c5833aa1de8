// files/io.h read_small_file: the one reader of whole small files (the identity, known_hosts,
// authorized_keys). It reads to the end, stops once past its cap (so the caller can refuse a file
// too long), reports a failed read's errno, and with a small cap never moves what it read.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "files/io.h"
#include "files/unique_fd.h"

namespace aesxfer::files {
namespace {

// A pipe holding `text`, its writing end closed: a file of exactly that content.
UniqueFd pipe_of(const std::string& text) {
  int p[2];
  if (::pipe(p) != 0) return UniqueFd();
  const ssize_t n = ::write(p[1], text.data(), text.size());
  ::close(p[1]);
  if (n != ssize_t(text.size())) {
    ::close(p[0]);
    return UniqueFd();
  }
  return UniqueFd(p[0]);
}

TEST(ReadSmallFile, ReadsToTheEndAndAppends) {
  const std::string text(10000, 'k');
  UniqueFd fd = pipe_of(text);
  ASSERT_TRUE(fd);
  std::string out = "head:";
  EXPECT_EQ(read_small_file(fd.get(), out, 1 << 20), 0);
  EXPECT_EQ(out, "head:" + text);
}

TEST(ReadSmallFile, StopsPastItsCapSoTheCallerCanTellALongFile) {
  const std::string text(20000, 'x');
  UniqueFd fd = pipe_of(text);
  ASSERT_TRUE(fd);
  std::string out;
  EXPECT_EQ(read_small_file(fd.get(), out, 4096), 0);
  EXPECT_GT(out.size(), 4096u);
  EXPECT_LE(out.size(), 4096u + 4096u);
  EXPECT_EQ(out, text.substr(0, out.size()));

  UniqueFd exact = pipe_of(std::string(4096, 'y'));
  ASSERT_TRUE(exact);
  std::string all;
  EXPECT_EQ(read_small_file(exact.get(), all, 4096), 0);
  EXPECT_EQ(all.size(), 4096u);  // exactly the cap is not too long
}

TEST(ReadSmallFile, ASmallCapNeverMovesTheBytesRead) {
  UniqueFd fd = pipe_of(std::string(4000, 's'));
  ASSERT_TRUE(fd);
  std::string out;
  read_small_file(fd.get(), out, 4096);
  const char* at = out.data();
  UniqueFd more = pipe_of(std::string(96, 't'));
  ASSERT_TRUE(more);
  // A second read into the same string within the reserve made for the cap: same buffer.
  EXPECT_EQ(read_small_file(more.get(), out, 4096), 0);
  EXPECT_EQ(out.data(), at);
  EXPECT_EQ(out.size(), 4096u);
}

TEST(ReadSmallFile, AFailedReadGivesItsErrno) {
  UniqueFd fd(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  std::string out;
  EXPECT_EQ(read_small_file(fd.get(), out, 4096), EBADF);
  EXPECT_TRUE(out.empty());
}

}  // namespace
// The figures of the free-space lines: one unit by the size, and one byte in the singular (a
// thirty-sixth re-attack, B11: "1 bytes to receive, 0 bytes free").
TEST(SizeText, OneByteIsSingular) {
  EXPECT_EQ(files::size_text(0), "0 bytes");
  EXPECT_EQ(files::size_text(1), "1 byte");
  EXPECT_EQ(files::size_text(2), "2 bytes");
  EXPECT_EQ(files::size_text(10 << 10), "10 KiB");
  EXPECT_EQ(files::size_text(uint64_t(10) << 20), "10 MiB");
}

}  // namespace aesxfer::files
