// The server's confinement to its root (server/root.h, docs/SECURITY.md "Confinement"): every
// file reached from one directory fd by the kernel (openat2 RESOLVE_BENEATH|NO_SYMLINKS, or the
// O_NOFOLLOW walk where openat2 is missing; both are tested), never a path checked then opened.
//
//   RootResolver/*      the Root alone, each resolver: one answer for every path that would
//                       leave the root, FIFOs refused without blocking, NAME_MAX-safe names
//   ConfinementRace/*   a local user swaps a directory inside the root for a symlink to one
//                       outside (renameat2 RENAME_EXCHANGE, in a tight loop, and a regular file
//                       for a FIFO) while gets, puts, mkdirs, listings and resumed puts run
//                       against it: nothing outside is read, written or created, no session hangs
//   Confinement.*       the same answers seen by the real client
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "files/atomic_file.h"
#include "server/root.h"
#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using proto::Message;
using proto::Op;
using proto::Status;
using Clock = std::chrono::steady_clock;

// Every entry under dir (recursive, symlinks not followed), with each regular file's contents.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> m;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    std::string rel = it->path().lexically_relative(dir).string();
    auto st = it->symlink_status();
    m[rel] = fs::is_regular_file(st) ? read_text_file(it->path())
             : fs::is_directory(st)  ? "<dir>"
                                     : "<other>";
  }
  return m;
}

std::string param_name(const testing::TestParamInfo<bool>& i) { return i.param ? "walk" : "openat2"; }

// ---- the Root alone ----------------------------------------------------------------------------

class RootResolver : public testing::TestWithParam<bool> {
 protected:
  TempDir root{"aesxfer-root"}, outside{"aesxfer-outside"};
  server::Root::Resolver resolver() const {
    return GetParam() ? server::Root::Resolver::walk : server::Root::Resolver::automatic;
  }
  void SetUp() override {
    fs::create_directories(root / "in");
    write_text_file(root / "in" / "a.txt", "inside");
    write_text_file(outside / "secret.txt", "outside the root");
    fs::create_directories(outside / "dir");
    fs::create_directory_symlink(outside.path(), root / "esc");
    fs::create_directory_symlink(root / "in", root / "inlink");  // stays inside: refused all the same
    fs::create_symlink(outside / "secret.txt", root / "filelink");
    fs::create_symlink(outside / "nothing", root / "danglink");
  }
};

TEST_P(RootResolver, UsesTheResolverAskedFor) {
  server::Root r(root.path(), {}, resolver());
  if (GetParam()) {
    EXPECT_FALSE(r.uses_openat2());
  } else {
    long probe = ::syscall(SYS_openat2, -1, "", nullptr, 0);
    if (probe < 0 && errno == ENOSYS) GTEST_SKIP() << "this kernel has no openat2 (Linux < 5.6)";
    EXPECT_TRUE(r.uses_openat2());
  }
}

TEST_P(RootResolver, OneAnswerForEveryPathLeavingTheRoot) {
  server::Root r(root.path(), {}, resolver());
  server::Refusal why;
  const std::string answer = std::string(": ") + server::kLeavesRoot;
  // Existing and missing targets beyond a symlink, directories and files, symlinks that stay
  // inside: the same status and text (but for the path), so nothing is learned about outside.
  for (std::string p : {"esc/secret.txt", "esc/nothing", "esc/dir", "esc/dir/x", "esc", "filelink",
                        "danglink", "inlink/a.txt", "esc/nothing/deeper"}) {
    SCOPED_TRACE(p);
    EXPECT_FALSE(r.open_source(p, why));
    EXPECT_EQ(why.status, Status::bad_path);
    EXPECT_EQ(why.text, p + answer);
    EXPECT_FALSE(r.put_target(p, "x.bin", why));
    EXPECT_EQ(why.text, p + answer);
    bool exists = false;
    EXPECT_FALSE(r.mkdir_target(p, "", &exists, why));
    EXPECT_EQ(why.text, p + answer);
    EXPECT_FALSE(r.open_directory(p, why));
    EXPECT_EQ(why.status, Status::bad_path);
  }
  for (std::string p : {"esc", "esc/dir", "esc/nothing", "inlink", "danglink"}) {
    EXPECT_FALSE(r.open_directory(p, why));
    EXPECT_EQ(why.text, p + answer);
  }
  // The lexical refusals, and the controls.
  EXPECT_FALSE(r.open_source("../x", why));
  EXPECT_FALSE(r.open_source("/etc/passwd", why));
  auto ok = r.open_source("in/a.txt", why);
  ASSERT_TRUE(ok) << why.text;
  EXPECT_EQ(ok->st.st_size, 6);
  EXPECT_TRUE(r.put_target("in", "new.bin", why)) << why.text;
  EXPECT_TRUE(r.open_directory(".", why)) << why.text;
}

TEST_P(RootResolver, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((root / "in" / "fifo").c_str(), 0600), 0);
  server::Root r(root.path(), {}, resolver());
  server::Refusal why;
  auto t0 = Clock::now();
  EXPECT_FALSE(r.open_source("in/fifo", why));  // opened O_NONBLOCK, then fstat: not S_ISREG
  EXPECT_EQ(why.text, "in/fifo: not a regular file");
  EXPECT_FALSE(r.put_target("in/fifo", "x", why));
  EXPECT_EQ(why.text, "in/fifo: not a regular file");
  // A FIFO where the partial file of a resumed put goes is refused too, without blocking.
  ASSERT_EQ(::mkfifo((root / "in" / files::partial_name("p.bin")).c_str(), 0600), 0);
  auto place = r.put_target("in/p.bin", "", why);
  ASSERT_TRUE(place) << why.text;
  std::string distrust;
  EXPECT_FALSE(server::open_kept_partial(*place, distrust));
  EXPECT_THROW(server::KeptPartial kp(*place), proto::Failure);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
}

TEST_P(RootResolver, NamesBesideALongNameStayWithinNameMax) {
  server::Root r(root.path(), {}, resolver());
  server::Refusal why;
  const std::string longest(NAME_MAX, 'n');
  auto place = r.put_target("in/" + longest, "", why);
  ASSERT_TRUE(place) << why.text;
  {
    server::TempFile t(*place);  // ".NAME.aesxfer-tmp-XXXXXXXXXX" unshortened would be ENAMETOOLONG
    ASSERT_EQ(::pwrite(t.fd(), "data", 4, 0), 4);
    t.commit(0644, -1);
  }
  EXPECT_EQ(read_text_file(root / "in" / longest), "data");
  const std::string pn = files::partial_name(longest);
  EXPECT_LE(pn.size(), size_t(NAME_MAX));
  EXPECT_NE(files::partial_name(std::string(NAME_MAX - 1, 'n') + "m"), pn);  // another name: another file
  // PROTOCOL.md 3.6's rule, the client's too (it was a SHA-256 tag of the server's own).
  EXPECT_EQ(pn, files::hidden_name(longest, ".aesxfer-partial"));
  {
    server::KeptPartial kp(*place);
    EXPECT_EQ(kp.length(), 0u);
    EXPECT_EQ(::pwrite(kp.fd(), "part", 4, 0), 4);
  }
  server::KeptPartial again(*place);  // the same name finds the same partial file
  EXPECT_EQ(again.length(), 4u);
  EXPECT_TRUE(fs::exists(root / "in" / pn));
}

INSTANTIATE_TEST_SUITE_P(Both, RootResolver, testing::Bool(), param_name);

// ---- the swap race, against the server -------------------------------------------------------

class ConfinementRace : public testing::TestWithParam<bool> {
 protected:
  Workspace ws;
  TempDir outside{"aesxfer-outside"};
  std::unique_ptr<ServerProcess> server;
  void SetUp() override {
    if (GetParam()) ::setenv("AESXFER_NO_OPENAT2", "1", 1);
    server = std::make_unique<ServerProcess>(ws.home, ws.root, std::vector<std::string>{"--timeout", "5"});
    ::unsetenv("AESXFER_NO_OPENAT2");
    ASSERT_TRUE(server->wait_for_log(GetParam() ? "resolver=walk" : "resolver=openat2")) << server->log();
  }
  void TearDown() override {
    EXPECT_EQ(server->stop(), 0);
    EXPECT_EQ(sanitizer_findings(server->log()), "");
    if (HasFailure()) std::cerr << "--- server log (start) ---\n" << server->log().substr(0, 20000);
  }
};

TEST_P(ConfinementRace, DirectorySwappedForASymlinkNeverLeadsOut) {
  // root/d is a real directory, root/link a symlink to `outside`; the swapper exchanges the two
  // names as fast as it can, and inside d it exchanges a regular file with a FIFO.
  fs::create_directories(ws.root / "d" / "sub");
  write_text_file(ws.root / "d" / "f", "inside");
  write_text_file(ws.root / "d" / "ff", "inside ff");
  ASSERT_EQ(::mkfifo((ws.root / "d" / "fifo").c_str(), 0600), 0);
  fs::create_directories(outside / "sub");
  write_text_file(outside / "f", "OUTSIDE");
  write_text_file(outside / "ff", "OUTSIDE ff");
  write_text_file(outside / "only-outside", "OUTSIDE");
  ASSERT_EQ(::mkfifo((outside / "fifo").c_str(), 0600), 0);
  fs::create_directory_symlink(outside.path(), ws.root / "link");
  const auto before = snapshot(outside.path());

  int rootfd = ::open(ws.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int dfd = ::open((ws.root / "d").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(rootfd, 0);
  ASSERT_GE(dfd, 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> swaps{0};
  std::thread swapper([&] {
    while (!stop) {
      ::renameat2(rootfd, "d", rootfd, "link", RENAME_EXCHANGE);
      ::renameat2(dfd, "ff", dfd, "fifo", RENAME_EXCHANGE);
      ++swaps;
    }
  });

  const auto until = Clock::now() + std::chrono::seconds(4);
  std::atomic<int> hangs{0}, leaks{0};
  std::map<std::string, std::atomic<int>> oks;
  for (const char* k : {"get", "getff", "put", "mkdir", "list", "resume"}) oks[k] = 0;
  std::mutex mu;
  std::vector<std::string> problems;
  auto problem = [&](const std::string& p) {
    std::lock_guard<std::mutex> g(mu);
    if (problems.size() < 20) problems.push_back(p);
  };
  auto client = [&](int who) {
    int n = 0;
    while (Clock::now() < until) {
      try {
        HandSession s(server->port(), ws.home / "id_ed25519", "aes128-gcm", "none",
                      std::chrono::milliseconds(6000));
        if (!s.welcome_ok) continue;
        for (int i = 0; i < 20 && Clock::now() < until; ++i, ++n) {
          std::string got;
          const std::string tag = std::to_string(who) + "-" + std::to_string(n);
          Message r;
          switch (n % 6) {
            case 0:
              r = s.get(make_request(Op::get, "d/f"), &got);
              if (r.status == Status::ok && got != "inside") ++leaks, problem("get d/f read " + got);
              if (r.status == Status::ok) ++oks.at("get");
              break;
            case 1:
              r = s.get(make_request(Op::get, "d/ff"), &got);
              if (r.status == Status::ok && got != "inside ff") ++leaks, problem("get d/ff read " + got);
              if (r.status == Status::ok) ++oks.at("getff");
              break;
            case 2:
              r = s.put(make_request(Op::put, "d/new-" + tag, "x"), "new data");
              if (r.type == proto::MsgType::result && r.status == Status::ok) ++oks.at("put");
              break;
            case 3:
              r = s.ask(make_request(Op::mkdir, "d/sub/m-" + tag));
              if (r.status == Status::ok) ++oks.at("mkdir");
              break;
            case 4: {
              std::vector<proto::ListEntry> entries;
              r = s.list(make_request(Op::list, "d"), &entries);
              for (const auto& e : entries)
                if (e.path.find("only-outside") != std::string::npos)
                  ++leaks, problem("list d showed " + e.path);
              if (r.status == Status::ok) ++oks.at("list");
              break;
            }
            case 5: {
              Message p = make_request(Op::put, "d/r-" + tag, "x");
              p.flags = proto::kFlagResume;
              r = s.put(p, "resumed data");
              if (r.type == proto::MsgType::result && r.status == Status::ok) ++oks.at("resume");
              break;
            }
          }
        }
        s.bye();
      } catch (const proto::Failure& f) {
        std::string w = f.what();
        if (w.find("timed out") != std::string::npos || w.find("timeout") != std::string::npos)
          ++hangs, problem(std::string("hang: ") + w);
      }
    }
  };
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) clients.emplace_back(client, i);
  for (auto& t : clients) t.join();
  stop = true;
  swapper.join();
  ::close(dfd);
  ::close(rootfd);

  std::string shown;
  for (const auto& p : problems) shown += p + "\n";
  EXPECT_EQ(hangs.load(), 0) << shown;
  EXPECT_EQ(leaks.load(), 0) << shown;
  EXPECT_EQ(snapshot(outside.path()), before) << "something outside the root was written or created";
  EXPECT_GT(swaps.load(), 1000u);
  for (const auto& [k, v] : oks) EXPECT_GT(v.load(), 0) << k << " never succeeded: the race tested nothing";
  // The server still serves.
  if (!fs::is_directory(fs::symlink_status(ws.root / "d"))) {
    fs::rename(ws.root / "d", ws.root / "tmp");
    fs::rename(ws.root / "link", ws.root / "d");
    fs::rename(ws.root / "tmp", ws.root / "link");
  }
  HandSession s(server->port(), ws.home / "id_ed25519");
  std::string got;
  EXPECT_EQ(s.get(make_request(Op::get, "d/f"), &got).status, Status::ok);
  EXPECT_EQ(got, "inside");
  s.bye();
}

INSTANTIATE_TEST_SUITE_P(Both, ConfinementRace, testing::Bool(), param_name);

// ---- what the client sees ----------------------------------------------------------------------

class Confinement : public ServerTest {};

TEST_F(Confinement, OneAnswerWhetherOrNotTheTargetExists) {
  TempDir outside{"aesxfer-outside"};
  write_text_file(outside / "secret.txt", "outside the root");
  fs::create_directory_symlink(outside.path(), ws.root / "esc");
  auto a = run({"recv", "127.0.0.1:esc/secret.txt", (ws.local / "a").string(), "-q"});
  auto b = run({"recv", "127.0.0.1:esc/nothing.txt", (ws.local / "a").string(), "-q"});
  EXPECT_NE(a.exit_code, 0);
  EXPECT_NE(b.exit_code, 0);
  auto strip = [](std::string s, const std::string& p) {
    for (size_t at; (at = s.find(p)) != std::string::npos;) s.erase(at, p.size());
    return s;
  };
  EXPECT_EQ(strip(a.err, "esc/secret.txt"), strip(b.err, "esc/nothing.txt")) << a.err << b.err;
  EXPECT_NE(a.err.find("outside the server's root"), std::string::npos) << a.err;
  EXPECT_FALSE(fs::exists(ws.local / "a"));
}

}  // namespace
}  // namespace aesxfer::test
