// A hostile client cannot plant set-user-ID or set-group-ID bits on the server: not on a file it
// puts with -p, not on a directory it creates or re-creates with -p (issue 14, item 3, the server's
// direction).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cstdlib>

#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

class ServerModes : public ServerTest {
 protected:
  fs::path id = ws.home / "id_ed25519";
};

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

TEST_F(ServerModes, SetIdBitsFromAClientAreNeverApplied) {
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  // A directory: created, then given its mode with the preserve flag (what send -r -p does).
  proto::Message mk = make_request(proto::Op::mkdir, "d");
  mk.mode = 06777;
  ASSERT_EQ(s.ask(mk).status, proto::Status::ok);
  mk.flags = proto::kFlagPreserve;
  ASSERT_EQ(s.ask(mk).status, proto::Status::ok);
  EXPECT_TRUE(fs::is_directory(ws.root / "d"));
  EXPECT_EQ(mode_of(ws.root / "d") & 06000, 0u) << std::oct << mode_of(ws.root / "d");
  // A file with -p.
  proto::Message put = make_request(proto::Op::put, "d/f", "f");
  put.mode = 06755;
  put.flags = proto::kFlagPreserve;
  ASSERT_EQ(s.put(put, "data").status, proto::Status::ok);
  EXPECT_EQ(mode_of(ws.root / "d/f"), 0755u) << std::oct << mode_of(ws.root / "d/f");
  // The sticky bit is not a privilege and stays with -p.
  proto::Message st = make_request(proto::Op::mkdir, "t");
  st.mode = 01777;
  ASSERT_EQ(s.ask(st).status, proto::Status::ok);
  st.flags = proto::kFlagPreserve;
  ASSERT_EQ(s.ask(st).status, proto::Status::ok);
  EXPECT_EQ(mode_of(ws.root / "t"), 01777u) << std::oct << mode_of(ws.root / "t");
  s.bye();
}

// chattr +a on `dir` (or -a); false when this file system or process cannot (then the test says so).
bool set_append_only(const fs::path& dir, bool on) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  int flags = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  flags = on ? flags | FS_APPEND_FL : flags & ~FS_APPEND_FL;
  ok = ok && ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  ::close(fd);
  return ok;
}

// A fifty-sixth re-attack (A56-5): in an append-only directory (chattr +a) the rename into place
// fails and so does the removal of the temporary file: a full-size copy stayed, 0644 (which the
// sweep, taking only 0600 files, never removes), and both ends said only "cannot rename into
// place". The line says the temporary file stays, and it is made private again. Both ways.
TEST_F(ServerModes, ATemporaryFileThatCannotBeRemovedIsNamedAndPrivate) {
  fs::create_directories(ws.root / "appdir");
  write_text_file(ws.root / "appdir" / "f", "old\n");
  fs::create_directories(ws.local / "capp");
  write_text_file(ws.local / "capp" / "g", "old\n");
  if (!set_append_only(ws.root / "appdir", true) || !set_append_only(ws.local / "capp", true))
    GTEST_SKIP() << "chattr +a is not available here (file system or capability)";
  write_random_file(ws.local / "big", 1 << 20, 21);  // over a record: --streams 3 splits it
  write_random_file(ws.root / "g", 300000, 22);
  auto sent = run({"send", "-q", "--retries", "0", (ws.local / "big").string(), "127.0.0.1:appdir/f"});
  // A parallel put's commit and a resumed put's rename too (a fifty-seventh re-attack, E57-2:
  // "permission denied", no temporary file named; E57-3: the partial file left 0644, unnamed).
  auto parts = run(
      {"send", "-q", "--retries", "0", "--streams", "3", (ws.local / "big").string(), "127.0.0.1:appdir/f"});
  auto resumed =
      run({"send", "-q", "--retries", "0", "--resume", (ws.local / "big").string(), "127.0.0.1:appdir/r"});
  auto got = run({"recv", "-q", "--retries", "0", "127.0.0.1:g", (ws.local / "capp" / "g").string()});
  set_append_only(ws.root / "appdir", false);
  set_append_only(ws.local / "capp", false);
  EXPECT_EQ(sent.exit_code, 1) << sent.describe();
  EXPECT_EQ(parts.exit_code, 1) << parts.describe();
  EXPECT_NE(parts.err.find("stays beside it (it cannot be removed: operation not permitted)"),
            std::string::npos)
      << parts.err;
  EXPECT_EQ(parts.err.find("permission denied"), std::string::npos) << parts.err;
  EXPECT_EQ(resumed.exit_code, 1) << resumed.describe();
  EXPECT_NE(resumed.err.find("what arrived stays as its partial file .r.aesxfer-partial"), std::string::npos)
      << resumed.err;
  EXPECT_EQ(mode_of(ws.root / "appdir" / ".r.aesxfer-partial"), 0600u);
  EXPECT_EQ(got.exit_code, 1) << got.describe();
  for (const auto& [r, dir] : {std::pair{&sent, ws.root / "appdir"}, std::pair{&got, ws.local / "capp"}}) {
    EXPECT_NE(r->err.find("stays beside it (it cannot be removed: operation not permitted)"),
              std::string::npos)
        << r->err;
    for (const auto& left : temp_debris(dir)) EXPECT_EQ(mode_of(dir / left), 0600u) << left;
  }
}

// A fifty-eighth re-attack (G58-1): every request is resolved from the root again, so a
// directory this session made, renamed away and replaced by another (another user's, in a team
// directory they may write to), took the rest of a send -r into it: the client said ok, exit 0.
// A put or mkdir at a path this session's mkdir answered for reaches that directory or is refused,
// naming it; a directory found, not made, is held the same way, and the answer's identity is the
// directory's own, not its path's again.
TEST_F(ServerModes, ADirectoryMovedAwayAndReplacedMidSessionTakesNothingMore) {
  fs::create_directories(ws.root / "team");
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  ASSERT_EQ(s.ask(make_request(proto::Op::mkdir, "team/t7")).status, proto::Status::ok);
  ASSERT_EQ(s.put(make_request(proto::Op::put, "team/t7", "a.txt"), "first").status, proto::Status::ok);
  fs::rename(ws.root / "team/t7", ws.root / "team/.t7.old");
  fs::create_directory(ws.root / "team/t7");
  const std::string moved =
      "team/t7: no longer the directory this session made or found there (it was moved "
      "or replaced meanwhile); nothing is written into it";
  for (const proto::Message& m : {make_request(proto::Op::put, "team/t7", "b.txt"),
                                  make_request(proto::Op::put, "team/t7/c.txt", "c.txt")}) {
    const proto::Message r = s.put(m, "secret");
    EXPECT_EQ(r.status, proto::Status::permission) << m.path;
    EXPECT_EQ(r.text, moved) << m.path;
  }
  const proto::Message sub = s.ask(make_request(proto::Op::mkdir, "team/t7/sub"));
  EXPECT_EQ(sub.status, proto::Status::permission);
  EXPECT_EQ(sub.text, moved);
  const proto::Message again = s.ask(make_request(proto::Op::mkdir, "team/t7"));
  EXPECT_EQ(again.status, proto::Status::permission);
  EXPECT_EQ(again.text, moved);
  EXPECT_TRUE(fs::is_empty(ws.root / "team/t7"));
  EXPECT_EQ(read_text_file(ws.root / "team/.t7.old/a.txt"), "first");
  // Moved back, it takes files again.
  fs::remove(ws.root / "team/t7");
  fs::rename(ws.root / "team/.t7.old", ws.root / "team/t7");
  EXPECT_EQ(s.put(make_request(proto::Op::put, "team/t7", "b.txt"), "second").status, proto::Status::ok);
  EXPECT_EQ(read_text_file(ws.root / "team/t7/b.txt"), "second");
  // A directory found, not made, is held as well.
  fs::create_directories(ws.root / "team/found");
  ASSERT_EQ(s.ask(make_request(proto::Op::mkdir, "team/found")).status, proto::Status::ok);
  fs::rename(ws.root / "team/found", ws.root / "team/.found.old");
  fs::create_directory(ws.root / "team/found");
  const proto::Message f = s.put(make_request(proto::Op::put, "team/found", "x"), "x");
  EXPECT_EQ(f.status, proto::Status::permission) << f.text;
  EXPECT_TRUE(fs::is_empty(ws.root / "team/found"));
  // A fifty-ninth re-attack (K59-1): removed and made again at once by another user, the directory
  // most often gets its inode number back, which a pin of device and inode took for the same.
  ASSERT_EQ(s.ask(make_request(proto::Op::mkdir, "team/again")).status, proto::Status::ok);
  const auto ino = [&] { return fs::exists(ws.root / "team/again") ? inode_of(ws.root / "team/again") : 0; };
  const ino_t before = ino();
  fs::remove(ws.root / "team/again");
  fs::create_directory(ws.root / "team/again");
  ASSERT_EQ(::chown((ws.root / "team/again").c_str(), kNobody, kNobody), 0);
  std::printf("[ inode   ] made again on %s inode\n", ino() == before ? "the same" : "another");
  const proto::Message a = s.put(make_request(proto::Op::put, "team/again", "x"), "x");
  EXPECT_EQ(a.status, proto::Status::permission) << a.text;
  EXPECT_TRUE(fs::is_empty(ws.root / "team/again"));
  s.bye();
}

// A sixtieth re-attack (M60-1): the directories a key made were remembered by device and inode
// alone, so one it made and another member of a shared directory's group renamed to another name
// was "made" wherever it went: a later `send -r -p` of a 0775 tree of that name opened the private
// 0700 copy to the group. Made means made at that path: it keeps its mode.
TEST_F(ServerModes, ADirectoryTheKeyMadeAndThatWasRenamedKeepsItsModeUnderPreserve) {
  fs::create_directories(ws.root / "team");
  {
    HandSession s(server->port(), id);
    ASSERT_TRUE(s.welcome_ok);
    proto::Message mk = make_request(proto::Op::mkdir, "team/vault");
    mk.mode = 0700;
    ASSERT_EQ(s.ask(mk).status, proto::Status::ok);
    ASSERT_EQ(s.put(make_request(proto::Op::put, "team/vault/secret", "secret"), "TOPSECRET").status,
              proto::Status::ok);
    s.bye();
  }
  ASSERT_EQ(mode_of(ws.root / "team/vault"), 0700u);
  fs::rename(ws.root / "team/vault", ws.root / "team/shared");  // the other user, between sessions
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  proto::Message mk = make_request(proto::Op::mkdir, "team/shared");
  mk.mode = 0775;
  mk.flags = proto::kFlagPreserve;
  EXPECT_EQ(s.ask(mk).status, proto::Status::ok);
  EXPECT_EQ(mode_of(ws.root / "team/shared"), 0700u) << std::oct << mode_of(ws.root / "team/shared");
  // Made again at its own path in this session, it takes the mode.
  ASSERT_EQ(s.ask(make_request(proto::Op::mkdir, "team/new")).status, proto::Status::ok);
  proto::Message again = make_request(proto::Op::mkdir, "team/new");
  again.mode = 0750;
  again.flags = proto::kFlagPreserve;
  EXPECT_EQ(s.ask(again).status, proto::Status::ok);
  EXPECT_EQ(mode_of(ws.root / "team/new"), 0750u) << std::oct << mode_of(ws.root / "team/new");
  s.bye();
}

// A sixtieth re-attack (M60-2): a directory exchanged for the new one between the mkdir and its
// open was taken as made when the server's user owned it: another member of a shared directory's
// group swapped in the server user's private 0700 directory, which `send -r -p` filled and opened
// to 0775. Made means empty and, where the file system keeps birth times, born at the mkdir; the
// exchange is made here by a probe right after the mkdir (tests/rename_probe.cpp).
TEST(ServerModesRace, ADirectoryExchangedForTheNewOneAsItWasMadeIsNotTakenForIt) {
  Workspace ws;
  fs::create_directories(ws.root / "team" / "vault");
  write_text_file(ws.root / "team" / "vault" / "secret", "TOPSECRET");
  fs::permissions(ws.root / "team" / "vault", fs::perms::owner_all);
  ServerProcess server(ws.home, ws.root, {}, 0,
                       preload_env(AESXFER_RENAME_PROBE, {{"AESXFER_EXCHANGE_MADE", "shared:vault"}}));
  HandSession s(server.port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  proto::Message mk = make_request(proto::Op::mkdir, "team/shared");
  mk.mode = 0775;
  const proto::Message r = s.ask(mk);
  EXPECT_EQ(r.status, proto::Status::permission) << r.text;
  EXPECT_EQ(r.text,
            "team/shared: not the empty directory its mkdir made (another was put in its place, or written "
            "into, as it was made); nothing is written into it");
  ASSERT_EQ(read_text_file(ws.root / "team/shared/secret"), "TOPSECRET") << "the probe did not act";
  // A sixty-first re-attack (Q61-3): nothing below it either, for the rest of the session; it was
  // not pinned, and the rest of a tree went into the directory found there.
  const proto::Message sub = s.ask(make_request(proto::Op::mkdir, "team/shared/sub"));
  EXPECT_NE(sub.status, proto::Status::ok) << sub.text;
  for (const char* path : {"team/shared", "team/shared/sub"}) {
    const proto::Message put = s.put(make_request(proto::Op::put, path, "f"), "data");
    EXPECT_NE(put.status, proto::Status::ok) << path << ": " << put.text;
  }
  EXPECT_FALSE(fs::exists(ws.root / "team/shared/f"));
  EXPECT_FALSE(fs::exists(ws.root / "team/shared/sub"));
  mk.flags = proto::kFlagPreserve;
  s.ask(mk);  // refused too: it keeps its mode
  EXPECT_EQ(mode_of(ws.root / "team/shared"), 0700u) << std::oct << mode_of(ws.root / "team/shared");
  s.bye();
  EXPECT_EQ(server.stop(), 0);
}

// A sixtieth re-attack (M60-4): a part of a `--streams` put whose directory was replaced after
// the transfer's first part was refused as "part 1 does not match its transfer", which named no
// reason. It names the directory moved or replaced.
TEST_F(ServerModes, APartWhoseDirectoryWasReplacedAfterTheFirstPartSaysSo) {
  fs::create_directories(ws.root / "team/big");
  proto::Message part = make_request(proto::Op::put, "team/big/f", "f", 8192);
  part.flags = proto::kFlagRange;
  part.xfer_id.fill(9);
  part.nparts = 2;
  part.length = 4096;
  HandSession first(server->port(), id), second(server->port(), id);
  ASSERT_TRUE(first.welcome_ok && second.welcome_ok);
  ASSERT_EQ(first.put_part(part).status, proto::Status::ok);
  fs::rename(ws.root / "team/big", ws.root / "team/.big.old");
  fs::create_directory(ws.root / "team/big");
  part.part = 1;
  part.offset = 4096;
  const proto::Message r = second.put_part(part);
  EXPECT_EQ(r.status, proto::Status::permission) << r.text;
  EXPECT_EQ(r.text,
            "team/big/f: the directory it goes into is not the one the transfer's first part reached (it was "
            "moved or replaced meanwhile); nothing is written into it");
  EXPECT_TRUE(fs::is_empty(ws.root / "team/big"));
  first.bye();
  second.bye();
}

// A fifty-eighth re-attack (H58-2): a mkdir's name was judged before the server knew whether it
// would be used, and the refusal named neither it nor the rule: `send -r` of a directory whose
// name held a line feed was "HOST:cpB: invalid directory name" also into a missing cpB, where the
// tree is cpB itself. It is judged only where it is used, and named.
TEST_F(ServerModes, ADirectorysNameIsJudgedOnlyWhereItIsUsedAndNamed) {
  fs::create_directories(ws.root / "cpA");
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  const proto::Message unused = s.ask(make_request(proto::Op::mkdir, "cpB", "tl\nx"));
  EXPECT_EQ(unused.status, proto::Status::ok) << unused.text;
  EXPECT_TRUE(fs::is_directory(ws.root / "cpB"));
  const proto::Message used = s.ask(make_request(proto::Op::mkdir, "cpA", "tl\nx"));
  EXPECT_EQ(used.status, proto::Status::bad_path);
  EXPECT_EQ(used.text.rfind("tl\nx: invalid directory name (no CR, LF, NUL or /", 0), 0u) << used.text;
  s.bye();
}

// An ext4 file system without birth times (128-byte inodes) in an image file, loop-mounted on
// `at` for one test and unmounted when it ends; `ok` false (the test says why) where this machine
// cannot (no mkfs.ext4, no loop device, not root).
// A file system image made by `mkfs` (a shell command taking the image's path last) and
// loop-mounted at `at` (root and a loop device); unmounted on the way out.
struct LoopFs {
  fs::path at, image;
  bool ok = false;
  LoopFs(const fs::path& dir, const std::string& size, const std::string& mkfs)
      : at(dir), image(dir.string() + ".img") {
    fs::create_directories(at);
    const std::string make = "truncate -s " + size + " '" + image.string() + "' && " + mkfs + " '" +
                             image.string() + "' >/dev/null 2>&1 && mount -o loop '" + image.string() +
                             "' '" + at.string() + "' 2>/dev/null";
    ok = std::system(make.c_str()) == 0;
  }
  ~LoopFs() {
    if (ok && ::umount2(at.c_str(), MNT_DETACH) != 0) std::perror("umount");
    std::error_code ec;
    fs::remove(image, ec);
  }
};

// ext4 with 128-byte inodes: no birth times.
struct NoBirthTimeFs : LoopFs {
  explicit NoBirthTimeFs(const fs::path& dir) : LoopFs(dir, "8M", "mkfs.ext4 -q -F -I 128") {}
};

// A fifty-eighth re-attack (I58-2): where the file system keeps no birth time, the mkdir and stat
// answers carried no identity, so D57-2's check was skipped: a retry wrote into a directory the
// server's user had removed and made again, over their file, exit 0. The inode's generation
// number stands in: a directory made again under the same path (most often on the same inode) is
// another identity, and the same directory asked again is the same.
TEST_F(ServerModes, ADirectoryMadeAgainIsAnotherIdentityWithoutBirthTimes) {
  NoBirthTimeFs nob(ws.root / "nob");
  if (!nob.ok) GTEST_SKIP() << "cannot loop-mount an ext4 image here (needs mkfs.ext4, a loop device, root)";
  struct statx sx {};
  ASSERT_EQ(::statx(AT_FDCWD, nob.at.c_str(), 0, STATX_BTIME, &sx), 0);
  ASSERT_FALSE(sx.stx_mask & STATX_BTIME) << "this ext4 keeps birth times: not the case under test";
  const auto made = [&] {
    HandSession s(server->port(), id);
    EXPECT_TRUE(s.welcome_ok);
    const proto::Message a = s.ask(make_request(proto::Op::mkdir, "nob/copy"));
    EXPECT_EQ(a.status, proto::Status::ok) << a.text;
    proto::Message st = s.ask(make_request(proto::Op::stat, "nob/copy"));
    EXPECT_EQ(st.status, proto::Status::is_directory) << st.text;
    EXPECT_EQ(st.digest, a.digest);  // the same directory asked again
    s.bye();
    return a.digest;
  };
  const std::string first = made();
  EXPECT_EQ(first.size(), 32u);
  fs::remove_all(nob.at / "copy");
  const std::string again = made();
  EXPECT_EQ(again.size(), 32u);
  EXPECT_NE(again, first);
}

// A sixty-second re-attack (U62-1, U62-2): in the group-writable directory a session had just
// made, another member made the name of the tree's private subdirectory first, and the session
// took it "(it was there)"; or renamed the session's own directory to that name, and it took that.
// A directory found in one this client made, that it did not make there, is another's; one this
// session has at another path was moved.
TEST_F(ServerModes, ADirectoryAnotherPutInOneThisClientMadeIsNotTaken) {
  fs::create_directories(ws.root / "team");
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  ASSERT_EQ(s.ask(make_request(proto::Op::mkdir, "team/t1")).status, proto::Status::ok);
  fs::create_directory(ws.root / "team/t1/zpriv");  // the other member, first
  const proto::Message planted = s.ask(make_request(proto::Op::mkdir, "team/t1/zpriv"));
  EXPECT_EQ(planted.status, proto::Status::permission) << planted.text;
  EXPECT_EQ(
      planted.text,
      "team/t1/zpriv: made by another in the directory this client made (it was not there when that was "
      "made); nothing is written into it");
  // The session's own directory renamed to the private one's name.
  ASSERT_EQ(s.ask(make_request(proto::Op::mkdir, "team/t1/pub")).status, proto::Status::ok);
  fs::rename(ws.root / "team/t1/pub", ws.root / "team/t1/zpriv2");
  const proto::Message moved = s.ask(make_request(proto::Op::mkdir, "team/t1/zpriv2"));
  EXPECT_EQ(moved.status, proto::Status::permission) << moved.text;
  EXPECT_EQ(
      moved.text,
      "team/t1/zpriv2: the directory this session has at another path (moved here meanwhile); nothing is "
      "written into it");
  for (const char* path : {"team/t1/zpriv", "team/t1/zpriv2"})
    EXPECT_NE(s.put(make_request(proto::Op::put, path, "secret"), "TOPSECRET").status, proto::Status::ok)
        << path;
  EXPECT_TRUE(fs::is_empty(ws.root / "team/t1/zpriv"));
  EXPECT_TRUE(fs::is_empty(ws.root / "team/t1/zpriv2"));
  // One this client made there in an earlier session is its own: a retry's mkdir takes it.
  ASSERT_EQ(s.ask(make_request(proto::Op::mkdir, "team/t1/sub")).status, proto::Status::ok);
  s.bye();
  HandSession again(server->port(), id);
  ASSERT_TRUE(again.welcome_ok);
  EXPECT_EQ(again.ask(make_request(proto::Op::mkdir, "team/t1")).status, proto::Status::ok);
  EXPECT_EQ(again.ask(make_request(proto::Op::mkdir, "team/t1/sub")).status, proto::Status::ok);
  again.bye();
}

// btrfs: a directory has one link.
struct BtrfsFs : LoopFs {
  explicit BtrfsFs(const fs::path& dir) : LoopFs(dir, "32M", "mkfs.btrfs -q -f -M") {}
};

// A sixty-second re-attack (U62-2): the session's own empty directory, exchanged for the new one
// between its mkdir and open, passed as made (empty, the server user's, born a moment before).
// It is this session's at another path: refused.
TEST(ServerModesRace, TheSessionsOwnDirectoryExchangedInAsItWasMadeIsNotTakenForIt) {
  Workspace ws;
  fs::create_directories(ws.root / "team");
  ServerProcess server(ws.home, ws.root, {}, 0,
                       preload_env(AESXFER_RENAME_PROBE, {{"AESXFER_EXCHANGE_MADE", "zpriv:pub"}}));
  HandSession s(server.port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  ASSERT_EQ(s.ask(make_request(proto::Op::mkdir, "team/pub")).status, proto::Status::ok);
  const proto::Message r = s.ask(make_request(proto::Op::mkdir, "team/zpriv"));
  EXPECT_EQ(r.status, proto::Status::permission) << r.text;
  EXPECT_EQ(r.text,
            "team/zpriv: the directory this session has at another path (moved here meanwhile); nothing is "
            "written into it");
  EXPECT_NE(s.put(make_request(proto::Op::put, "team/zpriv", "secret"), "TOPSECRET").status,
            proto::Status::ok);
  EXPECT_TRUE(fs::is_empty(ws.root / "team/zpriv"));
  s.bye();
  EXPECT_EQ(server.stop(), 0);
}

// A sixty-first re-attack (Q61-1): a directory the mkdir had made was taken as made only with two
// links, and btrfs gives every directory one: each was refused as "replaced by another directory
// as it was made", and -p never applied. Emptiness is read from the directory itself.
TEST_F(ServerModes, ADirectoryMadeOnBtrfsIsTakenAsMade) {
  BtrfsFs bt(ws.root / "bt");
  if (!bt.ok) GTEST_SKIP() << "cannot loop-mount a btrfs image here (needs mkfs.btrfs, a loop device, root)";
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  proto::Message mk = make_request(proto::Op::mkdir, "bt/q");
  mk.mode = 0750;
  const proto::Message a = s.ask(mk);
  EXPECT_EQ(a.status, proto::Status::ok) << a.text;
  struct stat st {};
  ASSERT_EQ(::stat((bt.at / "q").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 1u) << "btrfs directories of one link: not the case under test";
  mk.flags = proto::kFlagPreserve;
  mk.mode = 0705;
  EXPECT_EQ(s.ask(mk).status, proto::Status::ok);
  EXPECT_EQ(mode_of(bt.at / "q"), 0705u) << std::oct << mode_of(bt.at / "q");
  EXPECT_EQ(s.put(make_request(proto::Op::put, "bt/q", "f"), "data").status, proto::Status::ok);
  EXPECT_EQ(read_text_file(bt.at / "q/f"), "data");
  s.bye();
}

// A fifty-ninth re-attack (K59-3): where the file system keeps no metadata checksums, a
// directory's owner may set its inode's generation (FS_IOC_SETVERSION): another user emptied the
// copy, made their own directory on its inode, gave it the copy's generation, and send -r --resume
// continued into it. The owner is part of the identity, and only root can set it: here the same
// directory (inode and generation), given to another user, is another identity.
TEST_F(ServerModes, AnotherUsersDirectoryWithTheCopysGenerationIsAnotherIdentity) {
  NoBirthTimeFs nob(ws.root / "nob");
  if (!nob.ok) GTEST_SKIP() << "cannot loop-mount an ext4 image here (needs mkfs.ext4, a loop device, root)";
  const auto ask = [&] {
    HandSession s(server->port(), id);
    EXPECT_TRUE(s.welcome_ok);
    const proto::Message a = s.ask(make_request(proto::Op::mkdir, "nob/copy"));
    EXPECT_EQ(a.status, proto::Status::ok) << a.text;
    s.bye();
    return a.digest;
  };
  const std::string first = ask();
  ASSERT_EQ(first.size(), 32u);
  EXPECT_EQ(ask(), first);  // the same directory, the same owner
  ASSERT_EQ(::chown((nob.at / "copy").c_str(), kNobody, kNobody), 0);
  const std::string theirs = ask();
  EXPECT_EQ(theirs.size(), 32u);
  EXPECT_NE(theirs, first);
}

}  // namespace
}  // namespace aesxfer::test
