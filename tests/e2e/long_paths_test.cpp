// Issue 14 item 7 (protocol 4): long paths round-trip exactly. A Response text holds 8192 bytes
// (PROTOCOL.md 3.2; 1024 in protocol 3), so every path a server answers with fits whole: trees
// and single files under a remote directory of about 4000 bytes (16 components of 250 bytes) go
// both ways with the real binary against a loopback server, every byte compared; the client
// still refuses an answer it cannot prove whole, and nothing ever cuts a path.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "proto/messages.h"
#include "tests/fake_server.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

// The components of rel ("a/b/c").
std::vector<std::string> components(const std::string& rel) {
  std::vector<std::string> out;
  for (size_t i = 0; i <= rel.size();) {
    size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    if (j > i) out.push_back(rel.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// The directory rel under base, walked (and created when asked) one component at a time with
// openat/mkdirat, so that the whole path may be longer than PATH_MAX; -1 on failure.
int open_dir_under(const fs::path& base, const std::string& rel, bool create) {
  int fd = ::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (const auto& c : components(rel)) {
    if (fd < 0) return -1;
    if (create) ::mkdirat(fd, c.c_str(), 0755);
    const int next = ::openat(fd, c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(fd);
    fd = next;
  }
  return fd;
}

// The contents of the file rel under base ("<missing>" when it cannot be opened).
std::string read_under(const fs::path& base, const std::string& rel) {
  const size_t slash = rel.rfind('/');
  const int dir = open_dir_under(base, slash == std::string::npos ? "" : rel.substr(0, slash), false);
  if (dir < 0) return "<missing>";
  const int fd = ::openat(dir, rel.substr(slash + 1).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  ::close(dir);
  if (fd < 0) return "<missing>";
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  ::close(fd);
  return out;
}

// 16 components of 250 bytes: a 4015-byte relative path.
std::string deep_path() {
  std::string deep;
  for (int i = 0; i < 16; ++i) deep += (deep.empty() ? "" : "/") + std::string(250, char('a' + i));
  return deep;
}

using LongPaths = ServerTest;

TEST_F(LongPaths, TreesAndFilesUnderA4000BytePathGoBothWays) {
  const std::string deep = deep_path();
  ASSERT_EQ(deep.size(), 4015u);
  const int d = open_dir_under(ws.root, deep, true);
  ASSERT_GE(d, 0);
  ::close(d);
  // A small tree: files of several sizes, a subdirectory, an empty file.
  fs::create_directories(ws.local / "src" / "sub");
  write_random_file(ws.local / "src" / "big.bin", 700001, 41);
  write_random_file(ws.local / "src" / "sub" / "small.bin", 4097, 42);
  write_text_file(ws.local / "src" / "sub" / "empty", "");
  const std::vector<std::string> files = {"big.bin", "sub/small.bin", "sub/empty"};

  // send -r into the long directory: the mkdir answers name 4019- and 4023-byte paths.
  auto r = run({"send", "-r", (ws.local / "src").string(), "127.0.0.1:" + deep, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const auto& f : files)
    EXPECT_EQ(read_under(ws.root, deep + "/src/" + f), read_text_file(ws.local / "src" / f)) << f;

  // recv -r of the long directory itself: the listing reply names all 4015 bytes.
  fs::create_directories(ws.local / "back");
  r = run({"recv", "-r", "127.0.0.1:" + deep, (ws.local / "back").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string top = std::string(250, 'p');  // the last component names the local top
  for (const auto& f : files)
    EXPECT_EQ(read_text_file(ws.local / "back" / top / "src" / f), read_text_file(ws.local / "src" / f)) << f;

  // One file each way, to and from the long directory.
  write_random_file(ws.local / "one.bin", 300000, 43);
  r = run({"send", (ws.local / "one.bin").string(), "127.0.0.1:" + deep + "/one.bin", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_under(ws.root, deep + "/one.bin"), read_text_file(ws.local / "one.bin"));
  r = run({"recv", "127.0.0.1:" + deep + "/src/big.bin", (ws.local / "big.back").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.local / "big.back"), read_text_file(ws.local / "src" / "big.bin"));
  // Into a directory: the server joins the request path and the name.
  r = run({"send", (ws.local / "one.bin").string(), "127.0.0.1:" + deep + "/src/sub", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_under(ws.root, deep + "/src/sub/one.bin"), read_text_file(ws.local / "one.bin"));
}

// A path longer than the protocol carries is refused in one line, never cut to name another file.
TEST_F(LongPaths, APathOverTheBoundIsRefusedNotCut) {
  std::string over = deep_path() + "/" + std::string(100, 'q');  // 4116 bytes
  write_text_file(ws.local / "f", "x");
  auto r = run({"send", (ws.local / "f").string(), "127.0.0.1:" + over, "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("path too long"), std::string::npos) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_EQ(read_under(ws.root, over.substr(0, proto::kMaxPath)), "<missing>");
}

// The client never builds a path from an answer it cannot prove whole: a mkdir answer of
// kMaxMessage bytes may have been cut by a server; a listing reply longer than any path is refused.
TEST(LongPathsFake, AnAnswerAtTheTextBoundIsRefused) {
  Workspace ws;
  fs::create_directories(ws.local / "src");
  write_text_file(ws.local / "src" / "g", "sent");
  const std::string full(proto::kMaxMessage, 'x');
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::mkdir)
      c.send_message(response(proto::Status::ok, full));
    else if (m.op == proto::Op::list)
      FakeServer::send_listing(c, full, {{proto::EntryType::file, "f", 2, 0644, 0}});
    else
      c.send_message(response(proto::Status::refused, "no"));
  });
  auto args = [&](std::vector<std::string> a) {
    a.insert(a.end(), {"-P", std::to_string(fake.port()), "--timeout", "10", "-q"});
    return a;
  };
  auto r = run_aesxfer(args({"send", "-r", (ws.local / "src").string(), "127.0.0.1:d"}), ws.home, 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("path too long"), std::string::npos) << r.err;
  fs::create_directories(ws.local / "dest");
  // A listing reply that long is no path a server can list (over kMaxPath): refused as such.
  r = run_aesxfer(args({"recv", "-r", "127.0.0.1:d", (ws.local / "dest").string()}), ws.home, 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("bad listing (directory name)"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(ws.local / "dest"));
  for (const auto& s : fake.seen()) EXPECT_EQ(s.find("put"), std::string::npos) << fake.seen_text();
  for (const auto& s : fake.seen()) EXPECT_EQ(s.find("get"), std::string::npos) << fake.seen_text();
}

}  // namespace
}  // namespace aesxfer::test
