// The scp-style progress meter: redrawn by its own ticker, "- stalled -" when no byte moved for
// the stall time (scp's STALL_TIME is 5 s), scp's units (1024-based), and a resumed transfer's
// rate counting only the bytes that moved.
#include "app/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "app/pacing.h"

namespace aesxfer::test {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

TEST(Progress, ShowsStalledWhenNothingMoves) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    app::Progress p("file.bin", true, f, std::chrono::milliseconds(300));
    p.start(1000);
    p.update(10);
    // No update for 2.2 s: the ticker (once a second) must have drawn the stall at least once.
    std::this_thread::sleep_for(std::chrono::milliseconds(2200));
    const std::string mid = contents(f);
    EXPECT_NE(mid.find("- stalled -"), std::string::npos) << mid;
    // It moves again: the next draw shows an ETA, not the stall.
    std::fseek(f, 0, SEEK_END);
    long before = std::ftell(f);
    p.update(500);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    std::string after = contents(f).substr(size_t(before));
    EXPECT_NE(after.find("ETA"), std::string::npos) << after;
    EXPECT_EQ(after.find("- stalled -"), std::string::npos) << after;
    p.finish(1000, 3.3);
  }
  const std::string all = contents(f);
  EXPECT_NE(all.find("100%"), std::string::npos);
  EXPECT_EQ(all.back(), '\n');
  std::fclose(f);
}

// A forty-third re-attack (outside the classes): a server's size near 2^63 bytes made the ETA a
// negative number ("-35791394:-8 ETA") and the percentage overflow. What would take 100 hours or
// more shows "--:-- ETA"; an hour or more shows hours, as scp does.
TEST(Progress, AHugeSizeShowsNoGarbageEta) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    app::Progress p("huge.bin", true, f, std::chrono::seconds(30));
    p.start(uint64_t(INT64_MAX));
    p.update(uint64_t(1) << 30);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    const std::string mid = contents(f);
    EXPECT_NE(mid.find("--:-- ETA"), std::string::npos) << mid;
    EXPECT_EQ(mid.find("-3"), std::string::npos) << mid;
    EXPECT_NE(mid.find(" 0% "), std::string::npos) << mid;
    p.finish(uint64_t(1) << 30, 1.1);
  }
  std::fclose(f);
}

TEST(Progress, DisabledPrintsNothingAndStartsNoThread) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    app::Progress p("x", false, f);
    p.start(10);
    p.update(5);
    p.finish(10, 1);
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(Progress, ResumedRateCountsOnlyWhatMoved) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    // 900 MiB were already there; 100 MiB move in about a second.
    app::Progress p("big.iso", true, f);
    const uint64_t mib = 1 << 20;
    p.start(1000 * mib, 900 * mib);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    p.finish(1000 * mib, 1.0);
  }
  const std::string all = contents(f);
  const size_t at = all.rfind("MB/s");
  ASSERT_NE(at, std::string::npos) << all;
  size_t b = all.rfind(' ', at);
  const double rate = std::stod(all.substr(b + 1, at - b - 1));
  EXPECT_GT(rate, 50) << all;  // about 100 MB/s (2^20 bytes), not 1000
  EXPECT_LT(rate, 200) << all;
  std::fclose(f);
}

// send -: a stream of unknown size shows the bytes so far, the rate and the time elapsed, never a
// percentage or an ETA; a stall still shows. Its JSON progress has "total_bytes":null until the
// final line, which has the size.
TEST(Progress, UnknownTotalShowsBytesRateAndElapsedTime) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    app::Progress p("stdin", true, f, std::chrono::milliseconds(1500));
    p.start(app::kUnknownTotal);
    p.update(5u << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    const std::string mid = contents(f);
    EXPECT_NE(mid.find("5120KB"), std::string::npos) << mid;
    EXPECT_NE(mid.find("00:01    "), std::string::npos) << mid;  // elapsed, not an ETA
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    EXPECT_NE(contents(f).find("- stalled -"), std::string::npos) << contents(f);
    p.finish(6u << 20, 3.1);
  }
  const std::string all = contents(f);
  EXPECT_EQ(all.find('%'), std::string::npos) << all;
  EXPECT_EQ(all.find("ETA"), std::string::npos) << all;
  const std::string last = all.substr(all.rfind('\r') + 1);
  EXPECT_EQ(last.rfind("stdin ", 0), 0u) << last;
  EXPECT_NE(last.find("6144KB"), std::string::npos) << last;
  EXPECT_NE(last.find("MB/s   00:03    \n"), std::string::npos) << last;

  std::FILE* j = std::tmpfile();
  ASSERT_NE(j, nullptr);
  app::JsonProgress jp("-", true, j);
  jp.start(app::kUnknownTotal);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  jp.update(100);
  jp.finish(250);
  const std::string lines = contents(j);
  EXPECT_NE(lines.find("\"bytes\":100,\"total_bytes\":null"), std::string::npos) << lines;
  EXPECT_NE(lines.find("\"bytes\":250,\"total_bytes\":250"), std::string::npos) << lines;
  std::fclose(j);
  std::fclose(f);
}

// The ETA is rounded up: 40 % still to go reads 00:01, never 00:00. A meter whose
// line the summary takes (replaced) leaves no 100% line of its own.
TEST(Progress, EtaReadsZeroOnlyAtTheEndAndTheSummaryTakesTheLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    app::Progress p("half.bin", true, f);
    p.start(1000);
    p.update(600);
    std::this_thread::sleep_for(std::chrono::milliseconds(1300));  // the ticker draws once a second
    p.finish(1000, 1.3, true);
  }
  const std::string all = contents(f);
  ASSERT_NE(all.find(" 60% "), std::string::npos) << all;
  EXPECT_EQ(all.find("00:00 ETA"), std::string::npos) << all;
  EXPECT_EQ(all.find("100%"), std::string::npos) << all;
  EXPECT_EQ(all.substr(all.size() - 4), "\r\033[K") << all;
  std::fclose(f);
}

TEST(Progress, ScpUnits) {
  EXPECT_EQ(app::human_bytes(99999), "99999B");
  EXPECT_EQ(app::human_bytes(100000), "98KB");
  EXPECT_EQ(app::human_bytes(uint64_t(1) << 30), "1024MB");
}

// A twenty-fourth re-attack's note: the name was cut by bytes (half a UTF-8 character on the
// terminal) and padded by bytes, and a terminal narrower than the figures got a line that wrapped,
// which "\r" then never drew over.
TEST(Progress, NamesAreCutAtACharacterAndFitTheirColumns) {
  EXPECT_EQ(app::fit_columns("abc", 5), "abc  ");
  EXPECT_EQ(app::fit_columns("h\xc3\xa9llo", 2), "h\xc3\xa9");  // "hé": 2 columns, 3 bytes
  // Wide characters take two columns: 5 columns hold two of them and a space, never half a third.
  EXPECT_EQ(app::fit_columns("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 5), "\xe6\x97\xa5\xe6\x9c\xac ");
  // A byte that starts no character (printable() leaves none, but the cut must not trip on one).
  EXPECT_EQ(app::fit_columns("\xff\xc3", 3), "\xff\xc3 ");
  EXPECT_EQ(app::fit_columns("abc", 0), "");
  // A forty-fifth re-attack (B-F5): the emoji outside U+1F300..U+1F64F (a rocket, U+1F680) and the
  // wide symbols (U+26A1 high voltage) were counted as one column, and a server's name of them made
  // the line wrap. Unicode's East Asian Width tables: two columns each; a combining mark none.
  EXPECT_EQ(app::fit_columns("\xf0\x9f\x9a\x80\xf0\x9f\x9a\x80", 3), "\xf0\x9f\x9a\x80 ");
  EXPECT_EQ(app::fit_columns("\xe2\x9a\xa1\xe2\x9a\xa1x", 5), "\xe2\x9a\xa1\xe2\x9a\xa1x");
  EXPECT_EQ(app::fit_columns("\xe2\x9a\xa1\xe2\x9a\xa1x", 4), "\xe2\x9a\xa1\xe2\x9a\xa1");
  // A forty-sixth (B-F7): a code point Unicode 14 has not assigned (U+1FAE8, an emoji of 15; the
  // plane-3 CJK U+31350), and a regional indicator: two columns, a safe over-count.
  EXPECT_EQ(app::fit_columns("\xf0\x9f\xab\xa8\xf0\x9f\xab\xa8", 3), "\xf0\x9f\xab\xa8 ");
  EXPECT_EQ(app::fit_columns("\xf0\xb1\x8d\x90\xf0\xb1\x8d\x90", 3), "\xf0\xb1\x8d\x90 ");
  EXPECT_EQ(app::fit_columns("\xf0\x9f\x87\xa9\xf0\x9f\x87\xaa", 3), "\xf0\x9f\x87\xa9 ");
  // A forty-eighth (B48-4): the Yijing hexagrams and U+3248..U+324F, which glibc's wcwidth draws
  // in two columns though EastAsianWidth.txt says neutral.
  EXPECT_EQ(app::fit_columns("\xe4\xb7\x80\xe4\xb7\x80", 3), "\xe4\xb7\x80 ");
  EXPECT_EQ(app::fit_columns("\xe3\x89\x88\xe3\x89\x88", 3), "\xe3\x89\x88 ");
  EXPECT_EQ(app::fit_columns("e\xcc\x81"
                             "e",
                             2),
            "e\xcc\x81"
            "e");  // e, a combining acute, e
  // A fifty-eighth (H58-3): printable()'s escapes are cut whole, never after "\x" or "\xf".
  for (int cols = 0; cols < 12; ++cols) {
    const std::string f = app::fit_columns("\\xff\\xfe\\\\a", cols);
    const std::string kept = f.substr(0, f.find(' '));
    EXPECT_TRUE(kept == "" || kept == "\\xff" || kept == "\\xff\\xfe" || kept == "\\xff\\xfe\\\\" ||
                kept == "\\xff\\xfe\\\\a")
        << cols << ": " << f;
    EXPECT_EQ(f.size(), size_t(cols)) << f;
  }
}

TEST(Progress, ALineNeverOutgrowsANarrowTerminal) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  for (const unsigned short cols : {30, 60}) {
    SCOPED_TRACE(cols);
    winsize ws{};
    ws.ws_col = cols;
    ws.ws_row = 24;
    ASSERT_EQ(::ioctl(slave, TIOCSWINSZ, &ws), 0);
    // The meter asks the size of the stream it writes to: the pty's.
    std::FILE* tty = ::fdopen(::dup(slave), "w");
    ASSERT_NE(tty, nullptr);
    std::string name;
    for (int i = 0; i < 40; ++i) name += "\xc3\xa9";  // 40 columns of "é", 80 bytes
    {
      app::Progress p(name, true, tty);
      p.start(1000);
      p.update(500);
      p.finish(1000, 1.0);
    }
    std::fclose(tty);
    std::string got;
    char buf[4096];
    pollfd pf{master, POLLIN, 0};
    while (::poll(&pf, 1, 200) > 0) {
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, size_t(n));
    }
    ASSERT_NE(got.find("100%"), std::string::npos) << got;
    // Each drawing, between "\r"s: at most cols - 1 columns, and no character cut in two.
    size_t start = 0;
    while ((start = got.find('\r', start)) != std::string::npos) {
      size_t end = got.find_first_of("\r\n", start + 1);
      if (end == std::string::npos) end = got.size();
      const std::string line = got.substr(start + 1, end - start - 1);
      start = end;
      if (line.empty()) continue;
      int columns = 0;
      for (size_t i = 0; i < line.size(); ++i)
        columns += (static_cast<unsigned char>(line[i]) & 0xc0) != 0x80;
      EXPECT_LE(columns, cols - 1) << line;
      EXPECT_EQ(std::count(line.begin(), line.end(), '\xc3'), std::count(line.begin(), line.end(), '\xa9'))
          << "a character cut in two: " << line;
    }
  }
  ::close(slave);
  ::close(master);
}

}  // namespace
}  // namespace aesxfer::test
