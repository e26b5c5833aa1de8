// Issue 24, section E: ordinary commands that must not lose data or change what they overwrite.
// E8: a destination written with a trailing slash names a directory that must exist. E9: recv
// host:f - writes to the descriptor the process got. E11: an
// overwritten file keeps its mode without -p, a new one gets the source's mode less the umask,
// -p gives the source's mode; on both ends, for every way a file is written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using DestRules = ServerTest;

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

unsigned process_umask() {
  const mode_t um = ::umask(0);
  ::umask(um);
  return unsigned(um);
}

// ---- E8 ------------------------------------------------------------------------------------------

// send FILE host:iso/ with no directory iso: "not a directory", exit 1, nothing named iso; the
// same when iso/ names an existing file (which stays as it was), with several sources, with
// --resume (the probe), and a file too large to be pipelined. An existing iso/ takes the file.
TEST_F(DestRules, SendToATrailingSlashNeedsADirectory) {
  write_text_file(ws.local / "a.txt", "a\n");
  write_text_file(ws.local / "b.txt", "b\n");
  write_random_file(ws.local / "big.bin", 3 << 20, 1);
  write_text_file(ws.root / "renamed.txt", "keep me\n");
  const std::vector<std::vector<std::string>> cases = {
      {"send", (ws.local / "a.txt").string(), "127.0.0.1:iso/"},
      {"send", (ws.local / "a.txt").string(), "127.0.0.1:iso/."},
      {"send", (ws.local / "big.bin").string(), "127.0.0.1:iso/"},
      {"send", "--resume", (ws.local / "big.bin").string(), "127.0.0.1:iso/"},
      {"send", (ws.local / "a.txt").string(), (ws.local / "b.txt").string(), "127.0.0.1:iso/"},
      {"send", (ws.local / "b.txt").string(), "127.0.0.1:renamed.txt/"},
      {"send", "--resume", (ws.local / "b.txt").string(), "127.0.0.1:renamed.txt/"},
  };
  for (const auto& args : cases) {
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find(": not a directory"), std::string::npos) << r.describe();
    EXPECT_FALSE(fs::exists(ws.root / "iso")) << args.back();
    EXPECT_EQ(read_text_file(ws.root / "renamed.txt"), "keep me\n") << args.back();
    EXPECT_TRUE(temp_debris(ws.root).empty());
  }
  fs::create_directories(ws.root / "iso");
  auto r = run({"send", (ws.local / "a.txt").string(), "127.0.0.1:iso/", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "iso" / "a.txt"), "a\n");
  r = run({"send", (ws.local / "big.bin").string(), "127.0.0.1:iso/.", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "iso" / "big.bin"), sha256_file(ws.local / "big.bin"));
}

// recv host:f dir/ with no local dir (or dir/ an existing file): "not a directory", exit 1,
// nothing written; -r keeps cp's rule (the top directory is created).
TEST_F(DestRules, RecvToATrailingSlashNeedsADirectory) {
  write_text_file(ws.root / "a.txt", "a\n");
  write_text_file(ws.local / "file.txt", "keep me\n");
  for (const std::string& dest :
       {(ws.local / "iso/").string(), (ws.local / "iso/.").string(), (ws.local / "file.txt/").string()}) {
    for (bool two : {false, true}) {
      std::vector<std::string> args = {"recv", "127.0.0.1:a.txt"};
      if (two) args.push_back("127.0.0.1:a.txt");
      args.push_back(dest);
      auto r = run(args);
      EXPECT_EQ(r.exit_code, 1) << r.describe();
      EXPECT_NE(r.err.find(": not a directory"), std::string::npos) << r.describe();
      EXPECT_FALSE(fs::exists(ws.local / "iso"));
      EXPECT_EQ(read_text_file(ws.local / "file.txt"), "keep me\n");
      EXPECT_TRUE(temp_debris(ws.local).empty());
    }
  }
  fs::create_directories(ws.root / "tree");
  write_text_file(ws.root / "tree" / "t.txt", "t\n");
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "copy/").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.local / "copy" / "t.txt"), "t\n");
}

// ---- E9 ------------------------------------------------------------------------------------------

// Runs the aesxfer binary with `out_fd` as its standard output (stderr to `err`); returns its exit
// status.
int run_with_stdout(const std::vector<std::string>& args, const fs::path& home, int out_fd,
                    const fs::path& err) {
  std::vector<std::string> argv{AESXFER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> av;
  for (auto& a : argv) av.push_back(a.data());
  av.push_back(nullptr);
  std::string henv = "AESXFER_HOME=" + home.string();
  std::vector<char*> ev{henv.data(), nullptr};
  const int efd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, 1);
    ::dup2(efd, 2);
    ::execve(av[0], av.data(), ev.data());
    ::_exit(127);
  }
  ::close(efd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// recv host:f - writes to descriptor 1 as the process got it: `>> log` appends (nothing of the
// log is lost), and standard output on a socket works.
TEST_F(DestRules, RecvToDashWritesToTheDescriptorItGot) {
  write_random_file(ws.root / "f.bin", 300000, 9);
  const std::string want = read_text_file(ws.root / "f.bin");
  const std::vector<std::string> args = {
      "recv", "127.0.0.1:f.bin", "-", "-q", "-P", std::to_string(server->port())};
  const fs::path log = ws.local / "log";
  write_text_file(log, "earlier lines\n");
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(run_with_stdout(args, ws.home, fd, ws.local / "err.txt"), 0)
      << read_text_file(ws.local / "err.txt");
  ::close(fd);
  EXPECT_TRUE(read_text_file(log) == "earlier lines\n" + want) << "the log was not appended to";

  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    for (ssize_t n; (n = ::read(sv[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
  });
  const int rc = run_with_stdout(args, ws.home, sv[1], ws.local / "err.txt");
  ::close(sv[1]);
  reader.join();
  ::close(sv[0]);
  EXPECT_EQ(rc, 0) << read_text_file(ws.local / "err.txt");
  EXPECT_TRUE(got == want) << "standard output on a socket: " << got.size() << " bytes of " << want.size();
}

// ---- E11 -----------------------------------------------------------------------------------------

// send: an existing file on the server keeps its mode when overwritten without -p (pipelined,
// a single large put, a resumed put), a new one gets the source's mode less the server's umask,
// -p gives the source's mode.
TEST_F(DestRules, SendKeepsTheModeOfWhatItOverwrites) {
  const unsigned um = process_umask();  // the server's too: it inherits the test's
  write_text_file(ws.local / "small.txt", "new contents\n");
  write_random_file(ws.local / "big.bin", 3 << 20, 2);
  fs::permissions(ws.local / "small.txt", fs::perms(0664));
  fs::permissions(ws.local / "big.bin", fs::perms(0664));
  for (const std::string name : {"small.txt", "big.bin"}) {
    for (bool resume : {false, true}) {
      SCOPED_TRACE(name + (resume ? " --resume" : ""));
      const fs::path there = ws.root / name;
      write_text_file(there, "old\n");
      fs::permissions(there, fs::perms(0600));
      std::vector<std::string> args = {"send", "-q", (ws.local / name).string(), "127.0.0.1:" + name};
      if (resume) args.push_back("--resume");
      auto r = run(args);
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      EXPECT_EQ(sha256_file(there), sha256_file(ws.local / name));
      EXPECT_EQ(mode_of(there), 0600u) << "the overwritten file's mode changed";
      fs::remove(there);
      r = run(args);
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      EXPECT_EQ(mode_of(there), 0664u & ~um) << "a new file: the source's mode less the umask";
      write_text_file(there, "old\n");  // else --resume finds it whole and moves nothing
      fs::permissions(there, fs::perms(0600));
      args.push_back("-p");
      r = run(args);
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      EXPECT_EQ(mode_of(there), 0664u) << "-p: the source's mode";
      fs::remove(there);
    }
  }
}

// recv: the same on the client (a single get, a large one, a resumed one, recv -r into a tree).
TEST_F(DestRules, RecvKeepsTheModeOfWhatItOverwrites) {
  const unsigned um = process_umask();
  write_text_file(ws.root / "small.txt", "new contents\n");
  write_random_file(ws.root / "big.bin", 3 << 20, 3);
  fs::permissions(ws.root / "small.txt", fs::perms(0664));
  fs::permissions(ws.root / "big.bin", fs::perms(0664));
  for (const std::string name : {"small.txt", "big.bin"}) {
    for (bool resume : {false, true}) {
      SCOPED_TRACE(name + (resume ? " --resume" : ""));
      const fs::path here = ws.local / name;
      write_text_file(here, "old\n");
      fs::permissions(here, fs::perms(0600));
      std::vector<std::string> args = {"recv", "-q", "127.0.0.1:" + name, here.string()};
      if (resume) args.push_back("--resume");
      auto r = run(args);
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      EXPECT_EQ(sha256_file(here), sha256_file(ws.root / name));
      EXPECT_EQ(mode_of(here), 0600u) << "the overwritten file's mode changed";
      fs::remove(here);
      r = run(args);
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      EXPECT_EQ(mode_of(here), 0664u & ~um) << "a new file: the source's mode less the umask";
      write_text_file(here, "old\n");
      fs::permissions(here, fs::perms(0600));
      args.push_back("-p");
      r = run(args);
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      EXPECT_EQ(mode_of(here), 0664u) << "-p: the source's mode";
      fs::remove(here);
    }
  }
  fs::create_directories(ws.root / "tree");
  write_text_file(ws.root / "tree" / "t.txt", "t\n");
  fs::permissions(ws.root / "tree" / "t.txt", fs::perms(0664));
  fs::create_directories(ws.local / "tree");
  write_text_file(ws.local / "tree" / "t.txt", "old\n");
  fs::permissions(ws.local / "tree" / "t.txt", fs::perms(0600));
  auto r = run({"recv", "-r", "-q", "127.0.0.1:tree", ws.local.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.local / "tree" / "t.txt"), "t\n");
  EXPECT_EQ(mode_of(ws.local / "tree" / "t.txt"), 0600u);
}

}  // namespace
}  // namespace aesxfer::test
