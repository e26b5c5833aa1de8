// The line the client prints when a signal stops it (files::install_cleanup_on_signals). A fiftieth
// re-attack (B50-3): a hostile server agreed to and withdrew 32 resumed gets of names of ~1,000
// bytes, and ^C printed one line of 29,972 bytes naming all 32, whose "aesxfer:" head scrolled off
// the terminal and left the server's text on it. The line names files while it stays short, and
// counts the rest; every file is still kept or removed as before.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <string>

#include "files/atomic_file.h"
#include "files/resume.h"
#include "proto/failure.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

// Runs `body` in a forked child whose standard error goes to `err` and which has the client's
// signal clean-up installed (the child exits 4 if body returns); gives the child's wait status.
int in_child(const fs::path& err, const std::function<void()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int efd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(efd, 2);
    files::install_cleanup_on_signals();
    body();
    ::_exit(4);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// Forks a child that registers `n` kept partial files of long shown names in `dir`, then raises
// `sig`; returns its exit status and stderr.
std::pair<int, std::string> stopped_child(const fs::path& dir, int n, int sig) {
  const fs::path err = dir / "err.txt";
  const int status = in_child(err, [&] {
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < n; ++i) {
      const std::string name = ".f" + std::to_string(i) + ".aesxfer-partial";
      const int fd = ::openat(dfd, name.c_str(), O_WRONLY | O_CREAT, 0600);
      if (fd < 0 || ::write(fd, "data", 4) != 4) ::_exit(3);
      ::close(fd);
      files::register_kept(dfd, name,
                           proto::quoted(std::string(900, ' ') + "x.bin: 3 bytes in 0.00 s" + name));
    }
    ::raise(sig);
  });
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), read_text_file(err)};
}

TEST(SignalLine, ThirtyTwoKeptFilesMakeAShortLineThatCountsTheRest) {
  TempDir tmp;
  auto [code, err] = stopped_child(tmp.path(), 32, SIGINT);
  EXPECT_EQ(code, 128 + SIGINT);
  const auto lines = nonempty_lines(err);
  ASSERT_EQ(lines.size(), 1u) << err;
  const std::string& line = lines[0];
  EXPECT_EQ(line.rfind("aesxfer: interrupted: kept \"", 0), 0u) << line.substr(0, 200);
  EXPECT_LE(line.size(), 2000u);
  size_t named = 0;
  for (size_t at = 0; (at = line.find(" for --resume", at)) != std::string::npos; at += 13) ++named;
  // The named ones, and the count of the others.
  const std::string more = "; and " + std::to_string(32 - (named - 1)) + " more files (" +
                           std::to_string(32 - (named - 1)) + " kept for --resume)";
  EXPECT_GE(named, 2u);
  EXPECT_EQ(line.size() >= more.size() ? line.substr(line.size() - more.size()) : line, more);
  for (int i = 0; i < 32; ++i)
    EXPECT_TRUE(fs::exists(tmp.path() / (".f" + std::to_string(i) + ".aesxfer-partial"))) << i;
}

// A fifty-second re-attack (B52-1's note): the bound counted 40 bytes of text around each name,
// and the longest clause ("the server may keep ... (its end was sent; ...)") writes 90: short
// names made a line of about 1.8 times the bound. The line stays within it, with its head and the
// count of the rest.
TEST(SignalLine, ShortNamesWithTheLongestClauseStayWithinTheBound) {
  TempDir tmp;
  const fs::path err = tmp.path() / "err.txt";
  const int status = in_child(err, [&] {
    for (int i = 0; i < 32; ++i)
      files::mark_sent_whole(files::register_server_kept(proto::quoted("host:dir/file" + std::to_string(i))));
    ::raise(SIGINT);
  });
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 128 + SIGINT);
  const std::string line = read_text_file(err);
  EXPECT_LE(line.size(), 1536u + 100u) << line;
  EXPECT_NE(line.find(" more files ("), std::string::npos) << line;
}

// A file sent whole and not yet answered is counted while held (files::AwaitingAnswer), moved or
// not, and no longer once released: the line never says "no partial or temporary file was left behind" of it.
TEST(SignalLine, FilesSentWholeAndNotAnsweredAreCounted) {
  TempDir tmp;
  const fs::path err = tmp.path() / "err.txt";
  const auto line = [&](const std::function<void()>& body) {
    const int status = in_child(err, body);
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 128 + SIGINT);
    return read_text_file(err);
  };
  EXPECT_EQ(line([] {
              files::AwaitingAnswer a(true);
              files::AwaitingAnswer moved(std::move(a));
              files::AwaitingAnswer none;
              ::raise(SIGINT);
            }),
            "aesxfer: interrupted: 1 file was written whole to the connection and not yet answered: whether "
            "the server put it in "
            "place is not known\n");
  EXPECT_EQ(
      line([] {
        files::AwaitingAnswer a(true), b(true), c(true);
        c.release();
        files::mark_sent_whole(files::register_server_kept("\"k\""));
        ::raise(SIGINT);
      }),
      "aesxfer: interrupted: the server may keep \"k\" for --resume (written whole to the connection and "
      "not yet answered: whether the server put it in place is not known); 2 files were written whole to "
      "the connection and not yet answered: whether the server put them in place is not known\n");
  EXPECT_EQ(line([] {
              { files::AwaitingAnswer a(true); }
              ::raise(SIGINT);
            }),
            "aesxfer: interrupted: no partial or temporary file was left behind\n");
}

// A fifty-fourth re-attack (B54-2): a signal while recv -r or send -r wrote
// $AESXFER_HOME/tree_copies named that file as if it were the transfer's ("the file written as
// .../tree_copies had arrived complete and was in place", or "removed the temporary file of ..."),
// before any file of the tree had moved. The tool's own file is never named; its temporary file is
// removed.
TEST(SignalLine, TheToolsOwnFileIsNeverNamed) {
  for (const bool renamed : {false, true}) {
    SCOPED_TRACE(renamed);
    TempDir tmp;
    const fs::path err = tmp.path() / "err.txt";
    const int status = in_child(err, [&] {
      files::AtomicFile out(tmp.path() / "tree_copies", files::AtomicFile::Bookkeeping::yes);
      if (renamed) {  // the rename, done as the signal comes
        const int dfd = ::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY);
        for (const auto& e : fs::directory_iterator(tmp.path()))
          if (files::is_temp_name(e.path().filename().string()))
            ::renameat(dfd, e.path().filename().c_str(), dfd, "tree_copies");
      }
      ::raise(SIGINT);
    });
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 128 + SIGINT);
    EXPECT_EQ(read_text_file(err), "aesxfer: interrupted: no partial or temporary file was left behind\n");
    for (const auto& e : fs::directory_iterator(tmp.path()))
      EXPECT_FALSE(files::is_temp_name(e.path().filename().string())) << e.path();
    EXPECT_EQ(fs::exists(tmp.path() / "tree_copies"), renamed);
  }
}

TEST(SignalLine, OneFileIsNamedWhole) {
  TempDir tmp;
  auto [code, err] = stopped_child(tmp.path(), 1, SIGTERM);
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_EQ(err,
            "aesxfer: interrupted: kept " +
                proto::quoted(std::string(900, ' ') + "x.bin: 3 bytes in 0.00 s" + ".f0.aesxfer-partial") +
                " for --resume\n");
}

// A fifty-first re-attack (B51-1): a signal during the final rename (which can take a second over
// a large file) found the slot still registered, and the line said the temporary file was removed,
// or the partial file kept, when the file had arrived complete and the old one was gone. The line
// says what the file system shows.
TEST(SignalLine, AFileRenamedIntoPlaceIsSaidToHaveArrived) {
  TempDir tmp;
  const fs::path err = tmp.path() / "err.txt";
  const int status = in_child(err, [&] {
    files::AtomicFile out(tmp.path() / "dest.bin");
    const int dfd = ::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY);
    for (const auto& e : fs::directory_iterator(tmp.path()))  // the rename, done as the signal comes
      if (files::is_temp_name(e.path().filename().string()))
        ::renameat(dfd, e.path().filename().c_str(), dfd, "dest.bin");
    ::close(::openat(dfd, ".k.aesxfer-partial", O_WRONLY | O_CREAT, 0600));
    files::register_kept(dfd, ".k.aesxfer-partial", "\"k\"");
    ::unlinkat(dfd, ".k.aesxfer-partial", 0);  // renamed over k as the signal came
    ::raise(SIGINT);
  });
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 128 + SIGINT);
  EXPECT_EQ(read_text_file(err),
            "aesxfer: interrupted: the file written as \"" + (tmp.path() / "dest.bin").string() +
                "\" had arrived complete and was in place; the file kept in \"k\" had arrived "
                "complete and was in place\n");
  EXPECT_TRUE(fs::exists(tmp.path() / "dest.bin"));
}

// A fifty-second re-attack (B52-1): a failed transfer's discard unlinks its file first and frees
// its slot after, and the unlink of a large file takes a while: a signal in between found the file
// gone and said it "had arrived complete and was in place", with the destination unchanged or
// absent. The signal comes here right after each discard's unlink (files::g_discard_hook).
TEST(SignalLine, AFileBeingDiscardedIsSaidToBeRemoved) {
  for (const bool partial : {false, true}) {
    SCOPED_TRACE(partial);
    TempDir tmp;
    const fs::path err = tmp.path() / "err.txt";
    const fs::path dest = tmp.path() / "dest.bin";
    const int status = in_child(err, [&] {
      files::g_discard_hook = []() noexcept { ::raise(SIGINT); };
      if (partial) {
        files::PartialFile p(dest);
        (void)!::write(p.fd(), "half", 4);
        p.discard();
      } else {
        files::AtomicFile out(dest);
        (void)!::write(out.fd(), "half", 4);
        out.discard();
      }
    });
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 128 + SIGINT);
    const std::string line = read_text_file(err);
    EXPECT_EQ(line.find("arrived"), std::string::npos) << line;
    EXPECT_EQ(line, partial
                        ? "aesxfer: interrupted: removed \"" +
                              files::PartialFile::partial_path(dest).string() + "\"\n"
                        : "aesxfer: interrupted: removed the temporary file of \"" + dest.string() + "\"\n");
    EXPECT_FALSE(fs::exists(dest));
    EXPECT_FALSE(fs::exists(files::PartialFile::partial_path(dest)));
  }
}

}  // namespace
}  // namespace aesxfer::test
