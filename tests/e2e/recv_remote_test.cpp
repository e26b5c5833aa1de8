// Issue 7, "Across machines", the recv side: recv -r (the list op, then one get per file on the
// same connection; scp -r semantics; -p; symlinks on the server skipped; confined to the root;
// the listing bounded) and recv --resume (the partial file kept beside DEST after a cut, only the
// rest fetched again, a mismatched or corrupted partial never ending up under the destination).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "files/resume.h"
#include "net/conn.h"
#include "proto/handshake.h"
#include "proto/listing.h"
#include "proto/record.h"
#include "tests/fake_server.h"
#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/proc_status.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

mode_t test_umask() {
  mode_t um = ::umask(022);  // the children inherit it; read it back
  ::umask(um);
  return um;
}

struct stat stat_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}

void set_mtime(const fs::path& p, time_t t) {
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << p;
}

class RecvRemote : public ServerTest {
 protected:
  TempDir outside{"aesxfer-outside"};
  // root/tree/{a.bin (300001), empty.txt (0), rec.bin (256 KiB + 1), sub/b.txt, sub/deep/c.bin,
  // empty/, out -> outside dir, secret -> outside file, alink -> a.bin}
  fs::path make_tree() {
    fs::path t = ws.root / "tree";
    fs::create_directories(t / "sub" / "deep");
    fs::create_directories(t / "empty");
    write_random_file(t / "a.bin", 300001, 1);
    write_text_file(t / "empty.txt", "");
    write_random_file(t / "rec.bin", proto::kDefaultPayload + 1, 2);
    write_text_file(t / "sub" / "b.txt", "hello\n");
    write_random_file(t / "sub" / "deep" / "c.bin", 70000, 3);
    write_text_file(outside.path() / "secret.txt", "outside the root");
    fs::create_directories(outside.path() / "dir");
    write_text_file(outside.path() / "dir" / "x.txt", "outside too");
    fs::create_directory_symlink(outside.path() / "dir", t / "out");
    fs::create_symlink(outside.path() / "secret.txt", t / "secret");
    fs::create_symlink("a.bin", t / "alink");
    return t;
  }
  static constexpr const char* kFiles[] = {"a.bin", "empty.txt", "rec.bin", "sub/b.txt", "sub/deep/c.bin"};
  void expect_same_tree(const fs::path& src, const fs::path& dst) {
    for (const char* f : kFiles) {
      ASSERT_TRUE(fs::is_regular_file(dst / f)) << dst / f;
      EXPECT_EQ(sha256_file(dst / f), sha256_file(src / f)) << f;
    }
    EXPECT_EQ(fs::file_size(dst / "empty.txt"), 0u);
    EXPECT_TRUE(fs::is_directory(dst / "empty"));
    EXPECT_TRUE(fs::is_empty(dst / "empty"));
    for (const char* link : {"out", "secret", "alink"}) {
      std::error_code ec;
      EXPECT_FALSE(fs::exists(fs::symlink_status(dst / link, ec))) << link << " must not be fetched";
    }
    for (const char* d : {"", "sub", "sub/deep", "empty"}) EXPECT_TRUE(temp_debris(dst / d).empty()) << d;
  }
};

constexpr const char* RecvRemote::kFiles[];

using RecvTree = RecvRemote;
using RecvResume = RecvRemote;

TEST_F(RecvTree, NewDestinationBecomesTheCopy) {
  fs::path src = make_tree();
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "copy").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.local / "copy");
  EXPECT_EQ(nonempty_lines(r.out).size(), 5u) << "one JSON line per file\n" << r.out;
  for (const auto& l : nonempty_lines(r.out)) EXPECT_TRUE(parse_flat_json(l)) << l;
  // Every skipped entry is named on stderr; nothing from outside the root arrived.
  for (const char* link : {"tree/out", "tree/secret", "tree/alink"})
    EXPECT_NE(r.err.find(std::string("skipping ") + link + " (symbolic link"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.local / "copy" / "out" / "x.txt"));
  EXPECT_TRUE(server->wait_for_log("op=list dir=\"tree\" entries=11 result=ok")) << server->log();
}

TEST_F(RecvTree, ExistingDirectoryReceivesTheTreeUnderItsName) {
  fs::path src = make_tree();
  fs::create_directories(ws.local / "inbox");
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "inbox").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "") << "-q: no skip notes either";
  expect_same_tree(src, ws.local / "inbox" / "tree");
  // send -r -q the same (a twentieth re-attack, N7: it showed its skip notes); without -q, named.
  fs::create_directories(ws.local / "st");
  write_text_file(ws.local / "st" / "f", "f");
  ASSERT_EQ(::mkfifo((ws.local / "st" / "fifo").c_str(), 0600), 0);
  r = run({"send", "-r", (ws.local / "st").string(), "127.0.0.1:back", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "") << "-q: no skip notes either";
  r = run({"send", "-r", (ws.local / "st").string(), "127.0.0.1:back2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("skipping "), std::string::npos) << r.err;
  // Again: merges into the existing copy (files replaced whole).
  write_text_file(ws.local / "inbox" / "tree" / "a.bin", "stale");
  r = run({"recv", "-r", "127.0.0.1:tree/", (ws.local / "inbox").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.local / "inbox" / "tree");
  // A subdirectory by a longer path lands under its own name.
  r = run({"recv", "-r", "127.0.0.1:tree/sub", (ws.local / "inbox").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.local / "inbox" / "sub" / "deep" / "c.bin"),
            sha256_file(src / "sub" / "deep" / "c.bin"));
  // The root itself: its contents go into an existing DEST.
  fs::create_directories(ws.local / "all");
  r = run({"recv", "-r", "127.0.0.1:.", (ws.local / "all").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.local / "all" / "tree");
}

TEST_F(RecvTree, DestinationThatIsAFileIsRefused) {
  make_tree();
  write_text_file(ws.local / "f", "mine");
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "f").string(), "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("exists and is not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(read_text_file(ws.local / "f"), "mine");
  // A missing parent: refused, nothing created.
  r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "no" / "such").string(), "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_FALSE(fs::exists(ws.local / "no"));
  // A local directory where the tree has a file: stops there, the directory untouched.
  fs::create_directories(ws.local / "clash2" / "tree" / "a.bin");
  r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "clash2").string(), "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("a.bin: is a directory"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_directory(ws.local / "clash2" / "tree" / "a.bin"));
}

TEST_F(RecvTree, DirectoryWithoutDashRAndFileWithDashR) {
  make_tree();
  auto r = run({"recv", "127.0.0.1:tree", (ws.local / "x").string(), "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("is a directory (use -r)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.local / "x"));
  r = run({"recv", "-r", "127.0.0.1:tree/a.bin", (ws.local / "y").string(), "-q"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  // With the hint (an eighteenth re-attack, N2: the server answered a list of a file bad_path,
  // not not_directory as PROTOCOL.md 3.1 says, and the hint never showed).
  EXPECT_NE(r.err.find("tree/a.bin: not a directory (recv -r fetches directories; a file without -r)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(ws.local / "y"));
}

TEST_F(RecvTree, ConfinedToTheRoot) {
  make_tree();
  fs::create_directory_symlink(outside.path(), ws.root / "esc");
  // The first five the client refuses itself, before connecting (usage, exit 2); the server's
  // answer to them is RequestHandlers.AListOutsideTheRootOrOfAFileIsRefusedWithItsStatus. The
  // others only the server can tell (exit 1).
  int i = 0;
  for (const char* src :
       {"../", "..", "tree/../..", "/etc", "/", "esc", "esc/dir", "tree/out", "tree/secret"}) {
    SCOPED_TRACE(src);
    auto r = run({"recv", "-r", std::string("127.0.0.1:") + src, (ws.local / "got").string(), "-q"});
    EXPECT_EQ(r.exit_code, i++ < 5 ? 2 : 1) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_FALSE(fs::exists(ws.local / "got"));
  }
  auto r = run({"recv", "-r", "127.0.0.1:esc", (ws.local / "got").string(), "-q"});
  EXPECT_NE(r.err.find("outside the server's root"), std::string::npos) << r.err;
  // Said once, in the log as on the terminal (a twenty-second re-attack, N5: "refused: esc:
  // refused: leads outside ...").
  EXPECT_TRUE(server->wait_for_log(
      "result=\"refused: esc: leads outside the server's root or through a symbolic link\""))
      << server->log();
  EXPECT_EQ(r.err.find("refused: leads"), std::string::npos) << r.err;
  r = run({"recv", "-r", "127.0.0.1:../x", (ws.local / "got").string(), "-q"});
  EXPECT_NE(r.err.find("'..' is refused"), std::string::npos) << r.err;
  r = run({"recv", "-r", "127.0.0.1:/etc", (ws.local / "got").string(), "-q"});
  EXPECT_NE(r.err.find("absolute paths are refused"), std::string::npos) << r.err;
}

TEST_F(RecvTree, PreserveAppliesModesAndTimesToFilesAndDirectories) {
  fs::path src = make_tree();
  ::chmod((src / "sub").c_str(), 0750);
  ::chmod((src / "sub" / "deep").c_str(), 0711);
  ::chmod((src / "a.bin").c_str(), 0604);
  set_mtime(src / "a.bin", 1400000000);
  set_mtime(src / "sub" / "b.txt", 1400000001);
  set_mtime(src / "sub" / "deep", 1400000002);  // after its contents were written
  set_mtime(src / "sub", 1400000003);
  set_mtime(src / "empty", 1400000004);
  set_mtime(src, 1400000005);
  auto r = run({"recv", "-r", "-p", "127.0.0.1:tree", (ws.local / "p").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.local / "p");
  fs::path d = ws.local / "p";
  EXPECT_EQ(stat_of(d / "sub").st_mode & 07777, 0750u);
  EXPECT_EQ(stat_of(d / "sub" / "deep").st_mode & 07777, 0711u);
  EXPECT_EQ(stat_of(d / "a.bin").st_mode & 07777, 0604u);
  EXPECT_EQ(stat_of(d / "a.bin").st_mtim.tv_sec, 1400000000);
  EXPECT_EQ(stat_of(d / "sub" / "b.txt").st_mtim.tv_sec, 1400000001);
  EXPECT_EQ(stat_of(d / "sub" / "deep").st_mtim.tv_sec, 1400000002);
  EXPECT_EQ(stat_of(d / "sub").st_mtim.tv_sec, 1400000003);
  EXPECT_EQ(stat_of(d / "empty").st_mtim.tv_sec, 1400000004);
  EXPECT_EQ(stat_of(d).st_mtim.tv_sec, 1400000005);
  EXPECT_EQ(stat_of(d).st_mode & 07777, stat_of(src).st_mode & 07777);
}

TEST_F(RecvTree, WithoutDashPModesAreMaskedAndTimesAreNow) {
  fs::path src = make_tree();
  mode_t um = test_umask();
  ::chmod((src / "sub").c_str(), 0777);
  ::chmod((src / "a.bin").c_str(), 04777);
  set_mtime(src / "sub", 1000000000);
  set_mtime(src / "a.bin", 1000000000);
  auto before = std::time(nullptr);
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "n").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  fs::path d = ws.local / "n";
  EXPECT_EQ(stat_of(d / "sub").st_mode & 07777, 0777u & ~unsigned(um));
  EXPECT_EQ(stat_of(d / "a.bin").st_mode & 07777, 0777u & ~unsigned(um)) << "setuid dropped, umask applied";
  EXPECT_GE(stat_of(d / "sub").st_mtim.tv_sec, before - 2);
  EXPECT_GE(stat_of(d / "a.bin").st_mtim.tv_sec, before - 2);
  // An existing local directory keeps its own mode without -p.
  fs::create_directories(ws.local / "keep" / "tree" / "sub");
  ::chmod((ws.local / "keep" / "tree" / "sub").c_str(), 0700);
  r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "keep").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(stat_of(ws.local / "keep" / "tree" / "sub").st_mode & 07777, 0700u);
}

// The third re-attack (N10): listings hold their entries until their pages are sent, about 0.7 KB
// each; every listing of a server together is bounded (serve --max-list-memory). One that would
// pass the bound is refused as busy, its charge goes back, and smaller ones are served.
TEST_F(RecvTree, ListingsTogetherAreBoundedInMemory) {
  fs::create_directories(ws.root / "wide");
  for (int i = 0; i < 1000; ++i)
    write_text_file(ws.root / "wide" / (std::to_string(i) + std::string(100, 'n')), "x");
  make_tree();
  ServerProcess small(ws.home, ws.root, {"--max-list-memory", "64K"});
  for (int round = 0; round < 2; ++round) {
    auto r = run({"recv", "-r", "127.0.0.1:wide", (ws.local / "wide").string(), "-q"}, small.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("server busy"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--max-list-memory"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(ws.local / "wide"));
    // What the refused listing had charged is free again: a small tree is served.
    r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / ("t" + std::to_string(round))).string(), "-q"},
            small.port());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  EXPECT_EQ(small.stop(), 0);
  // The default bound (256 MiB) lets it through.
  auto r = run({"recv", "-r", "127.0.0.1:wide", (ws.local / "wide").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(std::distance(fs::directory_iterator(ws.local / "wide"), fs::directory_iterator()), 1000);
}

// A fifth re-attack (F1): the names read from a directory were held uncharged until the directory
// had been read, stat-ed and sorted whole, so a listing refused afterwards still cost the server
// about 0.45 KB per name and its CPU (16 at once: 700 MB). They are charged as readdir returns
// them: a directory whose names alone pass the bound is refused while it is read. Measured with
// 50,000 names of 245 bytes and --max-list-memory 64K: the server's peak grew by 21 MB for the
// refused listing before, 0.2 MB after.
TEST_F(RecvTree, NamesReadFromADirectoryAreChargedAsTheyAreRead) {
  fs::create_directories(ws.root / "wide");
  const std::string stem = (ws.root / "wide" / std::string(240, 'n')).string();
  for (int i = 0; i < 50000; ++i) {
    const int fd = ::open((stem + std::to_string(i)).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  make_tree();
  ServerProcess small(ws.home, ws.root, {"--max-list-memory", "64K"});
  // A first session puts the server's own per-session memory in place.
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "t").string(), "-q"}, small.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const long before = proc_status(small.pid(), "VmHWM");
  r = run({"recv", "-r", "127.0.0.1:wide", (ws.local / "w").string(), "-q"}, small.port());
  const long after = proc_status(small.pid(), "VmHWM");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("server busy"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.local / "w"));
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 8 * 1024) << "the server's peak grew by " << (after - before) << " kB";
  // What the directory's names had charged is given back: a small tree is served.
  r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "t2").string(), "-q"}, small.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(small.stop(), 0);
}

// A forty-third re-attack (A-F1): a listing over --max-list is refused only once its walk has read
// twice that many names, and a key that pipelined list requests for such a tree had the server walk
// it again for each (7 s of CPU for 20 requests of 44 bytes). The names a key's listings read come
// from one budget over all its sessions (server/name_budget.h): 4 x --max-list at once, then
// --max-list every 10 s; past it a listing is refused busy at once.
TEST_F(RecvTree, AKeysListingsReadAtMostItsBudgetOfNames) {
  fs::create_directories(ws.root / "wide");
  for (int i = 0; i < 12000; ++i) {
    const int fd =
        ::open((ws.root / "wide" / ("n" + std::to_string(i))).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  ServerProcess small(ws.home, ws.root, {"--max-list", "10000"});  // a walk reads 12,000 names
  int too_many = 0, busy = 0;
  {
    HandSession s(small.port(), ws.home / "id_ed25519");
    for (int i = 0; i < 10; ++i) {
      const proto::Message m = s.ask(make_request(proto::Op::list, "wide"));
      if (m.status == proto::Status::refused && m.text.find("more than 10000 entries") != std::string::npos)
        ++too_many;
      else if (m.status == proto::Status::busy && m.text.find("this key's listings") != std::string::npos)
        ++busy;
      else
        ADD_FAILURE() << int(m.status) << " " << m.text;
    }
  }
  std::printf("[list    ] 10 listings of 12,000 names under --max-list 10000: %d walked, %d refused busy\n",
              too_many, busy);
  // 40,000 names at once: three walks of 12,000 (and what 10 s refill meanwhile), then busy.
  EXPECT_GE(too_many, 3);
  EXPECT_LE(too_many, 4);
  EXPECT_EQ(too_many + busy, 10);
  // A new session of the same key shares the budget.
  HandSession again(small.port(), ws.home / "id_ed25519");
  EXPECT_EQ(again.ask(make_request(proto::Op::list, "wide")).status, proto::Status::busy);
  EXPECT_EQ(small.stop(), 0);
}

// A forty-eighth re-attack (A48-2): a directory opened and read costs the server about five times
// a file's name, and listings of empty directories bought five times the CPU of the budget: 20
// pipelined listings of 199,990 of them cost 19.5 s. Each directory is charged as 8 names.
TEST_F(RecvTree, AListingsDirectoriesCostTheKeyMoreThanTheirNames) {
  fs::create_directories(ws.root / "dirs");
  for (int i = 0; i < 2000; ++i) fs::create_directory(ws.root / "dirs" / ("d" + std::to_string(i)));
  ServerProcess small(ws.home, ws.root, {"--max-list", "10000"});  // 40,000 names at once
  int listed = 0, busy = 0;
  {
    HandSession s(small.port(), ws.home / "id_ed25519");
    for (int i = 0; i < 8; ++i) {
      std::vector<proto::ListEntry> entries;
      const proto::Message m = s.list(make_request(proto::Op::list, "dirs"), &entries);
      if (m.status == proto::Status::ok) {
        ++listed;
      } else if (m.status == proto::Status::busy) {
        ++busy;
      } else {
        ADD_FAILURE() << int(m.status) << " " << m.text;
      }
    }
  }
  // 2,000 names and 2,001 directories are 16,000 names: two walks and a third, then busy (as names
  // alone, every one of the 8).
  EXPECT_LE(listed, 3);
  EXPECT_EQ(listed + busy, 8);
  EXPECT_EQ(small.stop(), 0);
}

// A fifty-third re-attack (A53-2): one listing may overdraw the key's name budget (one walk of a
// tree at --max-list), and the walks of the key's puts, probes and mkdirs drew on the same budget:
// another user's 9,000 empty directories, planted in a shared directory and listed once, left the
// key's puts busy for 32 s, "this key's requests ...". Those walks have a budget of their own.
TEST_F(RecvTree, AListingThatOverdrawsItsNamesLeavesTheKeysMkdirsAlone) {
  fs::create_directories(ws.root / "pub");
  for (int i = 0; i < 9000; ++i) fs::create_directory(ws.root / "pub" / ("d" + std::to_string(i)));
  ServerProcess small(ws.home, ws.root, {"--max-list", "10000"});  // 40,000 names at once
  {
    HandSession s(small.port(), ws.home / "id_ed25519");
    std::vector<proto::ListEntry> entries;
    ASSERT_EQ(s.list(make_request(proto::Op::list, "pub"), &entries).status, proto::Status::ok);
    EXPECT_EQ(entries.size(), 9000u);
    // 9,000 names and 9,001 directories are 81,000 names: the listings' budget is overdrawn ...
    EXPECT_EQ(s.list(make_request(proto::Op::list, "pub"), &entries).status, proto::Status::busy);
    // ... and a mkdir of the key's is not refused for it.
    const proto::Message m = s.ask(make_request(proto::Op::mkdir, "mine"));
    EXPECT_EQ(m.status, proto::Status::ok) << m.text;
  }
  EXPECT_TRUE(fs::is_directory(ws.root / "mine"));
  EXPECT_EQ(small.stop(), 0);
}

TEST_F(RecvTree, ListingLimitIsAClearError) {
  make_tree();  // 11 entries under tree/, 3 under tree/sub
  ServerProcess small(ws.home, ws.root, {"--max-list", "5"});
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "big").string(), "-q"}, small.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("more than 5 entries"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.local / "big"));
  r = run({"recv", "-r", "127.0.0.1:tree/sub", (ws.local / "small").string(), "-q"}, small.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::is_regular_file(ws.local / "small" / "deep" / "c.bin"));
  // The names a listing leaves out count too (a forty-first re-attack, A-F3: 300,000 partial files
  // cost every one-entry listing a walk of them all).
  fs::create_directories(ws.root / "kept");
  write_text_file(ws.root / "kept" / "one", "1");
  for (int i = 0; i < 12; ++i) {
    const fs::path p = ws.root / "kept" / (".f" + std::to_string(i) + ".aesxfer-partial");
    write_text_file(p, "");
    fs::permissions(p, fs::perms(0600));
  }
  r = run({"recv", "-r", "127.0.0.1:kept", (ws.local / "kept").string(), "-q"}, small.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("more than 10 names to read (twice the server's limit, serve --max-list)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(small.stop(), 0);
  // Many entries, in several pages (16 KiB each): 3000 files with 40-byte names.
  fs::path many = ws.root / "many";
  fs::create_directories(many);
  for (int i = 0; i < 3000; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "file-%04d-padding-padding-padding-pad.txt", i);
    write_text_file(many / name, std::to_string(i));
  }
  r = run({"recv", "-r", "127.0.0.1:many", (ws.local / "many").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(ws.local / "many")) n += e.is_regular_file();
  EXPECT_EQ(n, 3000u);
  EXPECT_EQ(read_text_file(ws.local / "many" / "file-2999-padding-padding-padding-pad.txt"), "2999");
}

// A fake server (tests/fake_server.h) that answers a list request with a listing of its own
// making (a hostile server): the client must refuse it before it creates anything, with one
// line, and never ask for a file.
struct FakeListServer {
  FakeListServer(uint64_t n, std::vector<std::vector<uint8_t>> pages)
      : fake([n, pages](net::Conn& c, const proto::Message& m) {
          if (m.op == proto::Op::list)
            FakeServer::send_raw_listing(c, m.path, n, pages);
          else
            c.send_message(response(proto::Status::refused, "no"));
        }) {}
  uint16_t port() const { return fake.port(); }
  std::string error() {
    for (const auto& s : fake.seen())
      if (s.rfind("get ", 0) == 0) return "the client fetched " + s.substr(4);
    return "";
  }
  FakeServer fake;
};

TEST_F(RecvTree, HostileListingsAreRefusedBeforeAnythingIsWritten) {
  using proto::EntryType;
  fs::create_directories(ws.local / "dest");
  fs::create_directory_symlink(outside.path(), ws.local / "dest" / "link");  // the user's own
  struct Case {
    const char* name;
    uint64_t n;
    std::vector<std::vector<uint8_t>> pages;
  };
  std::vector<Case> cases = {
      {"dot-dot", 1, {page_of({{EntryType::file, "../evil", 5, 0644, 0}})}},
      {"absolute", 1, {page_of({{EntryType::file, "/tmp/evil", 5, 0644, 0}})}},
      {"inner dot-dot",
       2,
       {page_of({{EntryType::dir, "a", 0, 0755, 0}, {EntryType::file, "a/../../evil", 5, 0644, 0}})}},
      {"parent not listed", 1, {page_of({{EntryType::file, "link/evil", 5, 0644, 0}})}},
      {"parent is a file",
       2,
       {page_of({{EntryType::file, "f", 1, 0644, 0}, {EntryType::file, "f/evil", 5, 0644, 0}})}},
      {"twice", 2, {page_of({{EntryType::dir, "d", 0, 0755, 0}, {EntryType::file, "d", 5, 0644, 0}})}},
      {"more than announced",
       1,
       {page_of({{EntryType::file, "x", 5, 0644, 0}, {EntryType::file, "y", 5, 0644, 0}})}},
      {"fewer than announced", 3, {page_of({{EntryType::file, "x", 5, 0644, 0}})}},
      {"too many announced", proto::kMaxListEntries + 1, {page_of({})}},
      {"garbage page", 1, {{6, 1, 0xff, 0xff, 0, 0, 0}}},
      // An empty page that is not the last held the client past its --timeout (a thirty-seventh
      // re-attack, B2).
      {"empty page not last", 1, {{6, 0, 0, 0}, page_of({{EntryType::file, "x", 5, 0644, 0}})}},
      {"directory with a size", 1, {{6, 1, 0, 1, 2, 0,    1, 'd', 0, 0, 0, 0, 0, 0,
                                     0, 9, 0, 0, 1, 0xed, 0, 0,   0, 0, 0, 0, 0, 0}}},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    FakeListServer fake(tc.n, tc.pages);
    auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "dest").string(), "-q"}, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("protocol error"), std::string::npos) << r.err;
    EXPECT_EQ(fake.error(), "");
    std::printf("[ hostile ] %-22s %s", tc.name, r.err.c_str());
  }
  EXPECT_TRUE(fs::is_empty(outside.path())) << "something was written through the symlink";
  EXPECT_FALSE(fs::exists(ws.local / "evil"));
  EXPECT_FALSE(fs::exists(ws.local / "dest" / "tree")) << "nothing created before the listing was checked";
}

// ---- recv --resume -----------------------------------------------------------------------------

// A get cut after ~3 MiB keeps .big.bin.aesxfer-partial beside the destination; the second run
// fetches only the rest (bytes counted through a Relay) and the whole-file SHA-256 still verifies.
TEST_F(RecvResume, CutThenResumeFetchesOnlyTheRest) {
  const uint64_t n = (uint64_t(8) << 20) + 1234;
  write_random_file(ws.root / "big.bin", n, 7);
  std::string want = sha256_file(ws.root / "big.bin");
  fs::path dest = ws.local / "big.bin";
  fs::path partial = ws.local / ".big.bin.aesxfer-partial";
  {
    FaultSpec cut;
    cut.cut_s2c_after = uint64_t(3) << 20;
    Relay relay(server->port(), cut);
    auto r =
        run({"recv", "--resume", "127.0.0.1:big.bin", dest.string(), "-q", "--retries", "0"}, relay.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_TRUE(relay.fault_applied());
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("partial file kept"), std::string::npos) << r.err;
  }
  ASSERT_TRUE(fs::exists(partial));
  uint64_t kept = fs::file_size(partial);
  EXPECT_GE(kept, uint64_t(1) << 20);
  EXPECT_LT(kept, n);
  EXPECT_FALSE(fs::exists(dest));
  {
    // The kept bytes are the source's.
    std::string head(kept, '\0'), mine(kept, '\0');
    std::ifstream(ws.root / "big.bin", std::ios::binary).read(head.data(), std::streamsize(kept));
    std::ifstream(partial, std::ios::binary).read(mine.data(), std::streamsize(kept));
    EXPECT_TRUE(head == mine);
  }

  FaultSpec none;
  Relay count(server->port(), none);
  auto r = run({"recv", "--resume", "127.0.0.1:big.bin", dest.string(), "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["resumed_from"], std::to_string(kept));
  EXPECT_EQ((*o)["bytes"], std::to_string(n));
  EXPECT_EQ((*o)["verified"], "true");
  count.wait_done(10);
  // Server to client: handshake, welcome, response, the data from `kept` on, end, in records of
  // 256 KiB with 24 bytes of header and tag each.
  uint64_t rest = n - kept;
  EXPECT_GE(count.s2c_bytes(), rest);
  EXPECT_LT(count.s2c_bytes(), rest + 8192) << "more than the rest of the file came again";
  std::printf("[ resume  ] kept %llu of %llu bytes; second run %llu bytes from the server\n",
              (unsigned long long)kept, (unsigned long long)n, (unsigned long long)count.s2c_bytes());
  EXPECT_TRUE(server->wait_for_log("resumed_from=" + std::to_string(kept))) << server->log();
  ASSERT_TRUE(fs::exists(dest));
  EXPECT_EQ(sha256_file(dest), want);
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_TRUE(temp_debris(ws.local).empty());
}

// A thirty-fifth re-attack (B-N6): among several sources, the ones after a get whose connection was
// lost for good said "not fetched: ... (partial file kept for --resume)", the note of the file in
// flight, though nothing of theirs was kept. Only that file's line has it.
TEST_F(RecvResume, OnlyTheFileInFlightSaysItsPartialFileWasKept) {
  write_random_file(ws.root / "big.bin", uint64_t(8) << 20, 7);
  write_text_file(ws.root / "a.txt", "a\n");
  FaultSpec cut;
  cut.cut_s2c_after = uint64_t(3) << 20;
  Relay relay(server->port(), cut);
  auto r = run({"recv", "--resume", "--json", "--retries", "0", "127.0.0.1:big.bin", "127.0.0.1:a.txt",
                ws.local.string()},
               relay.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  std::map<std::string, std::string> errors;
  for (const auto& l : nonempty_lines(r.out))
    if (auto o = parse_flat_json(l)) errors[(*o)["file"]] = (*o)["error"];
  EXPECT_NE(errors["big.bin"].find("(partial file kept for --resume)"), std::string::npos) << r.out;
  EXPECT_NE(errors["a.txt"].find("not fetched"), std::string::npos) << r.out;
  EXPECT_EQ(errors["a.txt"].find("partial file kept"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(ws.local / ".big.bin.aesxfer-partial"));
  EXPECT_FALSE(fs::exists(ws.local / ".a.txt.aesxfer-partial"));
}

TEST_F(RecvResume, MismatchedPartialIsFetchedAgainWhole) {
  const uint64_t n = (uint64_t(2) << 20) + 99;
  write_random_file(ws.root / "m.bin", n, 8);
  // A partial file that is not a prefix of the server's (another version of the file).
  write_random_file(ws.local / ".m.bin.aesxfer-partial", 1 << 20, 9);
  FaultSpec none;
  Relay count(server->port(), none);
  auto r =
      run({"recv", "--resume", "127.0.0.1:m.bin", (ws.local / "m.bin").string(), "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["resumed_from"], "0");
  count.wait_done(10);
  EXPECT_GE(count.s2c_bytes(), n);
  EXPECT_EQ(sha256_file(ws.local / "m.bin"), sha256_file(ws.root / "m.bin"));
  EXPECT_TRUE(temp_debris(ws.local).empty());
  // Longer than the server's file: from 0 too.
  write_random_file(ws.local / ".s.bin.aesxfer-partial", 5000, 10);
  write_random_file(ws.root / "s.bin", 1000, 10);
  r = run({"recv", "--resume", "127.0.0.1:s.bin", ws.local.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ((*parse_flat_json(nonempty_lines(r.out).back()))["resumed_from"], "0");
  EXPECT_EQ(sha256_file(ws.local / "s.bin"), sha256_file(ws.root / "s.bin"));
  EXPECT_FALSE(fs::exists(ws.local / ".s.bin.aesxfer-partial"));
  // No partial file at all: --resume is a plain recv; and the whole file already kept: only the end.
  r = run({"recv", "--resume", "127.0.0.1:s.bin", (ws.local / "s2.bin").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.local / "s2.bin"), sha256_file(ws.root / "s.bin"));
  fs::copy_file(ws.root / "m.bin", ws.local / ".m3.bin.aesxfer-partial");
  r = run({"recv", "--resume", "127.0.0.1:m.bin", (ws.local / "m3.bin").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ((*parse_flat_json(nonempty_lines(r.out).back()))["resumed_from"], std::to_string(n));
  EXPECT_EQ(sha256_file(ws.local / "m3.bin"), sha256_file(ws.root / "m.bin"));
}

// Data corrupted in flight past the resume point (cipher and MAC none: only the whole-file
// SHA-256 can tell): the transfer fails, nothing appears at the destination name and the partial
// file is discarded as known bad, so the next --resume starts from 0 and ends correct.
TEST_F(RecvResume, CorruptedRestLeavesNoFileAndDiscardsThePartial) {
  const uint64_t n = (uint64_t(3) << 20) + 5;
  write_random_file(ws.root / "t.bin", n, 11);
  fs::path dest = ws.local / "t.bin";
  fs::path partial = ws.local / ".t.bin.aesxfer-partial";
  {
    std::string head(1 << 20, '\0');
    std::ifstream(ws.root / "t.bin", std::ios::binary).read(head.data(), std::streamsize(head.size()));
    std::ofstream(partial, std::ios::binary).write(head.data(), std::streamsize(head.size()));
  }
  FaultSpec flip;
  flip.flip_s2c_at = 600000;  // inside the data that follows the kept megabyte
  flip.tag_len = 0;
  Relay relay(server->port(), flip);
  auto r = run({"recv", "--resume", "-c", "none", "-m", "none", "127.0.0.1:t.bin", dest.string(), "-q"},
               relay.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(relay.fault_applied());
  EXPECT_NE(r.err.find("xxh128 mismatch"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dest));
  EXPECT_FALSE(fs::exists(partial)) << "a partial file known to be bad must not be resumed";
  EXPECT_TRUE(temp_debris(ws.local).empty());
  r = run({"recv", "--resume", "127.0.0.1:t.bin", dest.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ((*parse_flat_json(nonempty_lines(r.out).back()))["resumed_from"], "0");
  EXPECT_EQ(sha256_file(dest), sha256_file(ws.root / "t.bin"));
}

TEST_F(RecvResume, WorksWithDashR) {
  fs::path src = make_tree();
  // An earlier recv -r --resume into copy/ broke inside a.bin: its first 100000 bytes are kept.
  fs::create_directories(ws.local / "copy" / "tree");
  {
    std::string head(100000, '\0');
    std::ifstream(src / "a.bin", std::ios::binary).read(head.data(), std::streamsize(head.size()));
    std::ofstream(ws.local / "copy" / "tree" / ".a.bin.aesxfer-partial", std::ios::binary)
        .write(head.data(), std::streamsize(head.size()));
  }
  auto r = run({"recv", "-r", "--resume", "127.0.0.1:tree", (ws.local / "copy").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.local / "copy" / "tree");
  auto lines = nonempty_lines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  auto first = parse_flat_json(lines[0]);
  ASSERT_TRUE(first) << lines[0];
  EXPECT_EQ((*first)["file"], "tree/a.bin");
  EXPECT_EQ((*first)["resumed_from"], "100000");
  for (size_t i = 1; i < lines.size(); ++i)
    EXPECT_EQ((*parse_flat_json(lines[i]))["resumed_from"], "0") << lines[i];
}

// An existing destination and no partial file: --resume offers a copy of the destination as the
// prefix. A complete one costs only the end record; one that is a prefix of the server's file gets
// only the rest; one that differs is fetched whole, and stays untouched while that goes on.
TEST_F(RecvResume, CompleteDestinationCostsOnlyTheEnd) {
  const uint64_t n = (uint64_t(4) << 20) + 77;
  write_random_file(ws.root / "c.bin", n, 21);
  fs::path dest = ws.local / "c.bin";
  fs::copy_file(ws.root / "c.bin", dest);
  const ino_t ino = stat_of(dest).st_ino;
  FaultSpec none;
  Relay count(server->port(), none);
  auto r = run({"recv", "--resume", "127.0.0.1:c.bin", dest.string(), "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["resumed_from"], std::to_string(n));
  EXPECT_EQ((*o)["verified"], "true");
  count.wait_done(10);
  EXPECT_LT(count.s2c_bytes(), uint64_t(8192)) << "the file came again";
  EXPECT_EQ(sha256_file(dest), sha256_file(ws.root / "c.bin"));
  EXPECT_EQ(stat_of(dest).st_ino, ino) << "a complete destination is left as it is, not replaced";
  EXPECT_TRUE(server->wait_for_log("resumed_from=" + std::to_string(n) + " hashed=" + std::to_string(n) +
                                   " MB/s=0.0 result=ok"))
      << server->log();
  EXPECT_FALSE(fs::exists(files::PartialFile::partial_path(dest)));
  EXPECT_TRUE(temp_debris(ws.local).empty());
}

TEST_F(RecvResume, ShorterDestinationGetsOnlyTheRest) {
  const uint64_t n = (uint64_t(3) << 20) + 5;
  write_random_file(ws.root / "g.bin", n, 22);
  fs::path dest = ws.local / "g.bin";
  const uint64_t kept = uint64_t(2) << 20;  // a file that has grown on the server since
  {
    std::string head(kept, '\0');
    std::ifstream(ws.root / "g.bin", std::ios::binary).read(head.data(), std::streamsize(kept));
    std::ofstream(dest, std::ios::binary).write(head.data(), std::streamsize(kept));
  }
  FaultSpec none;
  Relay count(server->port(), none);
  auto r = run({"recv", "--resume", "127.0.0.1:g.bin", dest.string(), "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ((*parse_flat_json(nonempty_lines(r.out).back()))["resumed_from"], std::to_string(kept));
  count.wait_done(10);
  EXPECT_GE(count.s2c_bytes(), n - kept);
  EXPECT_LT(count.s2c_bytes(), n - kept + 8192);
  EXPECT_EQ(sha256_file(dest), sha256_file(ws.root / "g.bin"));
  EXPECT_TRUE(temp_debris(ws.local).empty());
}

TEST_F(RecvResume, DifferentDestinationIsFetchedWholeAndUntouchedUntilItArrives) {
  const uint64_t n = (uint64_t(6) << 20) + 3;
  write_random_file(ws.root / "d.bin", n, 23);
  fs::path dest = ws.local / "d.bin";
  write_random_file(dest, n, 24);  // same size, other bytes
  const std::string old = sha256_file(dest);
  {
    // Cut part way: the old destination must still be there, whole.
    FaultSpec cut;
    cut.cut_s2c_after = uint64_t(2) << 20;
    Relay relay(server->port(), cut);
    auto r =
        run({"recv", "--resume", "127.0.0.1:d.bin", dest.string(), "-q", "--retries", "0"}, relay.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_TRUE(relay.fault_applied());
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_EQ(sha256_file(dest), old) << "the destination changed before the transfer completed";
  }
  FaultSpec none;
  Relay count(server->port(), none);
  auto r = run({"recv", "--resume", "127.0.0.1:d.bin", dest.string(), "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // What the cut run kept is a prefix of the server's file: the second run resumes from it.
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["verified"], "true");
  EXPECT_EQ(sha256_file(dest), sha256_file(ws.root / "d.bin"));
  EXPECT_FALSE(fs::exists(files::PartialFile::partial_path(dest)));
  EXPECT_TRUE(temp_debris(ws.local).empty());
}

TEST_F(RecvResume, DashRAgainSkipsWhatIsComplete) {
  fs::path src = make_tree();
  fs::create_directories(ws.local / "copy");  // both runs then receive into copy/tree
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "copy").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  FaultSpec none;
  Relay count(server->port(), none);
  r = run({"recv", "-r", "--resume", "127.0.0.1:tree", (ws.local / "copy").string(), "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_same_tree(src, ws.local / "copy" / "tree");
  auto lines = nonempty_lines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  for (const auto& l : lines) {
    auto o = parse_flat_json(l);
    ASSERT_TRUE(o) << l;
    EXPECT_EQ((*o)["resumed_from"], (*o)["bytes"]) << l;
  }
  count.wait_done(10);
  EXPECT_LT(count.s2c_bytes(), uint64_t(64) << 10) << "complete files came again";
}

// Issue 16 item 4 (protocol 4): recv -r --resume when half the tree is here already. The small
// files go as pipelined gets, each offering an existing destination of the listed size with its
// keyed digest: an identical one costs only its end record and is left as it is; the missing ones
// and the one that differs at the same size come whole. Counted in the server's get lines (bytes
// that moved) and in records from the client (through a Relay).
TEST_F(RecvResume, DashRPipelinedMovesOnlyTheMissingBytes) {
  fs::path src = ws.root / "tree";
  for (int d = 0; d < 2; ++d)
    for (int i = 0; i < 6; ++i) {
      fs::create_directories(src / ("d" + std::to_string(d)));
      write_random_file(src / ("d" + std::to_string(d)) / ("f" + std::to_string(i)), 4096,
                        uint64_t(d * 10 + i));
    }
  write_random_file(src / "big", uint64_t(2) << 20, 77);
  fs::create_directories(ws.local / "copy");
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "copy").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  fs::path here = ws.local / "copy" / "tree";
  const std::vector<std::string> missing{"d0/f1", "d0/f3", "d0/f5", "d1/f0", "d1/f2", "d1/f4"};
  for (const auto& m : missing) fs::remove(here / m);
  write_random_file(here / "d1" / "f1", 4096, 4242);  // same size, other contents
  // The first copy's 13 gets are logged once the server is done with them, which may be after
  // the client exits (the count below took some of them for the second run's, once in 8 runs).
  ASSERT_TRUE(server->wait_for_log(" op=get file=", 10, 13)) << server->log();
  const std::string before = server->log();

  FaultSpec none;
  Relay count(server->port(), none);
  r = run({"recv", "-r", "--resume", "127.0.0.1:tree", (ws.local / "copy").string(), "--json"}, count.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const auto& e : fs::recursive_directory_iterator(src))
    if (e.is_regular_file()) {
      EXPECT_EQ(sha256_file(here / e.path().lexically_relative(src)), sha256_file(e.path())) << e.path();
    }
  size_t whole = 0, kept = 0;
  for (const auto& l : nonempty_lines(r.out)) {
    auto o = parse_flat_json(l);
    ASSERT_TRUE(o) << l;
    if ((*o)["resumed_from"] == "0")
      ++whole;
    else if ((*o)["resumed_from"] == (*o)["bytes"])
      ++kept;
    else
      ADD_FAILURE() << l;
  }
  EXPECT_EQ(whole, missing.size() + 1);
  EXPECT_EQ(kept, 13u - whole);
  // The bytes that moved, as the server logged them: the 7 files that were missing or differed
  // (13 gets again, logged by now).
  ASSERT_TRUE(server->wait_for_log(" op=get file=", 10, 26)) << server->log();
  const std::string log = server->log().substr(before.size());
  uint64_t moved = 0;
  for (size_t at = 0; (at = log.find(" op=get file=", at)) != std::string::npos; ++at)
    moved += std::stoull(log.substr(log.find(" bytes=", at) + 7));
  EXPECT_EQ(moved, 7u * 4096u) << log;
  count.wait_done(10);
  // From the client: list, 12 pipelined gets and their Results, the large file's own exchange of
  // 3.8 (stat, get, Result), bye.
  EXPECT_EQ(count.records_seen(), 1u + 12u * 2u + 3u + 1u);
  EXPECT_TRUE(temp_debris(here / "d0").empty());
  EXPECT_TRUE(temp_debris(here / "d1").empty());
}

// A server that drops a session after 1.2 idle seconds, and a destination that takes the client
// longer than that to hash (768 MiB, sparse; --no-aesni on the client makes its SHA-256 the
// portable one, about 370 MB/s here): the client's keep-alives (a stat every half second while it
// hashes) hold the session, and the complete file is not fetched again.
// "Large" keeps it out of the sanitizer stage, where it would only be slower.
class ResumeIdle : public RecvRemote {
 protected:
  static constexpr uint64_t kSize = uint64_t(768) << 20;
  std::vector<std::string> server_args() const override { return {"--timeout", "1.2"}; }
  static void sparse(const fs::path& p) {
    std::ofstream f(p, std::ios::binary);
    f.seekp(std::streamoff(kSize - 1));
    f.put('x');
  }
  // The test means something only if hashing the file takes the client longer than the server's
  // idle timeout: measure the portable SHA-256 the client will use.
  void expect_slow_client_hash() {
    auto sp =
        run_aesxfer({"speed", "-c", "sha256", "--no-aesni", "--seconds", "0.05", "--json"}, ws.home, 60);
    ASSERT_EQ(sp.exit_code, 0) << sp.describe();
    const std::string key = "\"block_size\":1048576,\"mb_per_s\":";
    const size_t at = sp.out.rfind(key);
    ASSERT_NE(at, std::string::npos) << sp.out;
    const double hash_s = double(kSize) / (std::stod(sp.out.substr(at + key.size())) * 1e6);
    std::printf(
        "[ idle    ] the client hashes 768 MiB in about %.1f s; the server drops idle sessions after 1.2 s\n",
        hash_s);
    ASSERT_GT(hash_s, 1.2) << "this machine hashes too fast for the test to mean anything";
  }
};

TEST_F(ResumeIdle, LargeRecvHashKeepsTheSessionAlive) {
  const uint64_t n = kSize;
  sparse(ws.root / "huge.bin");
  fs::path dest = ws.local / "huge.bin";
  sparse(dest);
  expect_slow_client_hash();
  if (HasFatalFailure()) return;
  // --timeout 60: the server hashes its own 768 MiB before it answers and sends nothing meanwhile;
  // beside other work that took longer than the client's default 20 s (the client's keep-alives,
  // not its patience, are what this test is about).
  auto r = run(
      {"recv", "--resume", "--no-aesni", "--timeout", "60", "127.0.0.1:huge.bin", dest.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["resumed_from"], std::to_string(n));
  EXPECT_FALSE(fs::exists(files::PartialFile::partial_path(dest)));
  EXPECT_TRUE(temp_debris(ws.local).empty());
  // The server saw the session through to the client's Result (no timeout on its side either).
  EXPECT_TRUE(server->wait_for_log("resumed_from=" + std::to_string(n) + " hashed=" + std::to_string(n) +
                                   " MB/s=0.0 result=ok"))
      << server->log();
}

// The same for send --resume: the server kept the whole file as a partial file; the client hashes
// its own copy to compare (keep-alives meanwhile), and only the end record follows.
TEST_F(ResumeIdle, LargeSendHashKeepsTheSessionAlive) {
  fs::path src = ws.local / "huge.bin";
  sparse(src);
  sparse(ws.root / ".huge.bin.aesxfer-partial");
  expect_slow_client_hash();
  if (HasFatalFailure()) return;
  auto r = run(
      {"send", "--resume", "--no-aesni", "--timeout", "60", src.string(), "127.0.0.1:huge.bin", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto o = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(o) << r.out;
  EXPECT_EQ((*o)["resumed_from"], std::to_string(kSize));
  EXPECT_EQ(fs::file_size(ws.root / "huge.bin"), kSize);
  EXPECT_FALSE(fs::exists(ws.root / ".huge.bin.aesxfer-partial"));
  EXPECT_TRUE(server->wait_for_log("resumed_from=" + std::to_string(kSize))) << server->log();
  EXPECT_TRUE(server->wait_for_log("result=ok")) << server->log();
}

}  // namespace
}  // namespace aesxfer::test
