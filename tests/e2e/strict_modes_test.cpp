// Issue 24, items A2 and A3: what the server trusts in authorized_keys, and what `aesxfer
// authorize` writes there.
//
//   StrictModes.WritableOrForeignAuthorizedKeysIsRefused   a group/other-writable file, a writable
//                                                          directory above it, a file owned by
//                                                          another user: no key of it lets anyone
//                                                          in; the log says why at start and at
//                                                          each refused login
//   StrictModes.ALinkInAWritableDirectoryIsRefused         a symbolic link's own directory counts
//   StrictModes.ALinkInTheMiddleOfTheChainCounts           every link of the chain, and its directory
//   StrictModes.OwnIdentityAndHostKeyAreCheckedToo         the server's id_ed25519 and host key
//   StrictModes.UnreadableFileIsReportedAsUnreadable       a file the server cannot open is logged
//                                                          as unreadable, never as "0 keys"
//   Authorize.EveryControlByteIsRefused                    CR, ESC, TAB, DEL, C1, bidi controls:
//                                                          refused, nothing written
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "files/keystore.h"
#include "tests/hand_session.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

// A client identity of its own (not the server's), and its authorized_keys line.
struct OtherClient {
  TempDir dir{"aesxfer-other"};
  fs::path identity = dir / "id_ed25519";
  std::string line;
  OtherClient() {
    const proto::Identity id = files::load_or_create_identity(identity);
    line = files::encode_public_key(id.pk) + " other@test";
  }
  bool logs_in(uint16_t port) {
    HandSession s(port, identity);
    if (s.welcome_ok) s.bye();
    return s.welcome_ok;
  }
};

// A forty-eighth re-attack (A48-1): a stranger's connection had the server read and parse the
// whole authorized_keys twice (the handshake's check, then the login's again): 19.5 ms of CPU a
// connection with 10,000 keys. Once now: the login takes the handshake's verdict.
TEST(StrictModes, AStrangersConnectionReadsAuthorizedKeysOnce) {
  Workspace ws;
  write_text_file(ws.home / "authorized_keys", "");  // no key of its own: the server's home's own one logs in
  fs::permissions(ws.home / "authorized_keys", fs::perms(0600));
  ServerProcess server(ws.home, ws.root);
  const int in = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  ASSERT_GE(in, 0);
  ASSERT_GE(::inotify_add_watch(in, (ws.home / "authorized_keys").c_str(), IN_OPEN | IN_CLOSE_NOWRITE), 0);
  // Opens and closes alternate, so that inotify folds no open into an unread one just like it.
  auto opened = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the refusal's end
    int n_open = 0;
    alignas(inotify_event) char buf[4096];
    for (ssize_t n; (n = ::read(in, buf, sizeof buf)) > 0;)
      for (char* p = buf; p < buf + n; p += sizeof(inotify_event) + reinterpret_cast<inotify_event*>(p)->len)
        n_open += (reinterpret_cast<inotify_event*>(p)->mask & IN_OPEN) != 0;
    return n_open;
  };
  constexpr int kStrangers = 3;
  int opens = 0;
  for (int i = 0; i < kStrangers; ++i) {
    {
      HandSession s(server.port(), ws.local / ("stranger" + std::to_string(i)));
      EXPECT_FALSE(s.welcome_ok);
    }
    opens += opened();
  }
  ::close(in);
  EXPECT_EQ(opens, kStrangers);
  EXPECT_EQ(server.stop(), 0);
}

TEST(StrictModes, WritableOrForeignAuthorizedKeysIsRefused) {
  Workspace ws;
  OtherClient other;
  const fs::path ak = ws.home / "authorized_keys";
  write_text_file(ak, other.line + "\n");
  ASSERT_EQ(::chmod(ak.c_str(), 0664), 0);
  ServerProcess server(ws.home, ws.root);
  EXPECT_TRUE(server.wait_for_log("writable by group or others (mode 0664)")) << server.log();
  EXPECT_TRUE(server.wait_for_log("level=warning msg=\"no key of authorized_keys is trusted: " + ak.string()))
      << server.log();
  EXPECT_FALSE(other.logs_in(server.port()));
  EXPECT_TRUE(server.wait_for_log("refused unauthorized client key SHA256:")) << server.log();
  EXPECT_TRUE(server.wait_for_log("; no key of authorized_keys is trusted: " + ak.string() +
                                  " is writable by group or others (mode 0664)"))
      << server.log();

  // Fixed: read again at the next login, no restart needed.
  ASSERT_EQ(::chmod(ak.c_str(), 0600), 0);
  EXPECT_TRUE(other.logs_in(server.port()));

  // A directory above it that others may write to (they could rename the file away and plant
  // their own): refused the same way.
  ASSERT_EQ(::chmod(ws.home.c_str(), 0777), 0);
  EXPECT_FALSE(other.logs_in(server.port()));
  EXPECT_TRUE(
      server.wait_for_log("directory " + ws.home.string() + " is writable by group or others (mode 0777)"))
      << server.log();
  ASSERT_EQ(::chmod(ws.home.c_str(), 0755), 0);
  EXPECT_TRUE(other.logs_in(server.port()));

  // Owned by another user (only root can give a file away to show it).
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(ak.c_str(), 65534, 65534), 0);
    EXPECT_FALSE(other.logs_in(server.port()));
    EXPECT_TRUE(server.wait_for_log(ak.string() + " is owned by uid 65534, neither this user"))
        << server.log();
    ASSERT_EQ(::chown(ak.c_str(), 0, 0), 0);
    EXPECT_TRUE(other.logs_in(server.port()));
  }
  // The server's own identity is trusted throughout (its file is checked as ssh checks a key).
  HandSession own(server.port(), ws.home / "id_ed25519");
  EXPECT_TRUE(own.welcome_ok);
  own.bye();
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(sanitizer_findings(server.log()), "");
}

// authorized_keys as a symbolic link to a safe file: the directory that holds the link counts
// too, since another user who may write there could point the link at a file holding their key.
TEST(StrictModes, ALinkInAWritableDirectoryIsRefused) {
  Workspace ws;
  OtherClient other;
  TempDir safe("aesxfer-safe");
  const fs::path target = safe / "keys";
  write_text_file(target, other.line + "\n");
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  const fs::path ak = ws.home / "authorized_keys";
  fs::create_symlink(target, ak);
  ServerProcess server(ws.home, ws.root);
  EXPECT_TRUE(other.logs_in(server.port())) << server.log();
  ASSERT_EQ(::chmod(ws.home.c_str(), 0777), 0);
  EXPECT_FALSE(other.logs_in(server.port()));
  EXPECT_TRUE(
      server.wait_for_log("directory " + ws.home.string() + " is writable by group or others (mode 0777)"))
      << server.log();
  ASSERT_EQ(::chmod(ws.home.c_str(), 0700), 0);
  EXPECT_TRUE(other.logs_in(server.port())) << server.log();
  // A link another user owns (as in a sticky /tmp, where only its owner may re-point it): refused
  // whatever the directories' modes (only root can give a link away to show it).
  if (::geteuid() == 0) {
    ASSERT_EQ(::lchown(ak.c_str(), 65534, 65534), 0);
    EXPECT_FALSE(other.logs_in(server.port()));
    EXPECT_TRUE(server.wait_for_log("symbolic link " + ak.string() + " is owned by uid 65534"))
        << server.log();
    ASSERT_EQ(::lchown(ak.c_str(), 0, 0), 0);
    EXPECT_TRUE(other.logs_in(server.port())) << server.log();
  }
  EXPECT_EQ(server.stop(), 0);
}

// A third re-attack (N4): only the links of the name as given were checked. A link in the middle
// of the chain (authorized_keys -> /tmp/x -> keys), owned by another user in a sticky directory,
// let that user re-point the server at another file of keys. Every link of the chain counts now.
TEST(StrictModes, ALinkInTheMiddleOfTheChainCounts) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root can give a link away to another user";
  Workspace ws;
  OtherClient other;
  TempDir safe("aesxfer-safe");
  TempDir sticky("aesxfer-sticky");  // as /tmp: root's, mode 1777
  ASSERT_EQ(::chmod(sticky.path().c_str(), 01777), 0);
  const fs::path target = safe / "keys";
  write_text_file(target, other.line + "\n");
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  const fs::path middle = sticky / "middle";
  fs::create_symlink(target, middle);
  fs::create_symlink(middle, ws.home / "authorized_keys");
  ServerProcess server(ws.home, ws.root);
  EXPECT_TRUE(other.logs_in(server.port())) << server.log();  // every link root's: trusted
  ASSERT_EQ(::lchown(middle.c_str(), 65534, 65534), 0);
  EXPECT_FALSE(other.logs_in(server.port()));
  EXPECT_TRUE(server.wait_for_log("symbolic link " + middle.string() + " is owned by uid 65534"))
      << server.log();
  // A root-owned middle link in a directory others may write to (not sticky): refused too.
  ASSERT_EQ(::lchown(middle.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(sticky.path().c_str(), 0777), 0);
  EXPECT_FALSE(other.logs_in(server.port()));
  EXPECT_TRUE(server.wait_for_log("(it holds the symbolic link " + middle.string())) << server.log();
  ASSERT_EQ(::chmod(sticky.path().c_str(), 0755), 0);
  EXPECT_TRUE(other.logs_in(server.port())) << server.log();
  // A fourth re-attack: a writable directory above the one that holds the middle link (others
  // could rename the whole branch and plant their own link).
  const fs::path above = sticky / "x";
  fs::create_directories(above / "y");
  fs::rename(middle, above / "y" / "middle");
  fs::remove(ws.home / "authorized_keys");
  fs::create_symlink(above / "y" / "middle", ws.home / "authorized_keys");
  EXPECT_TRUE(other.logs_in(server.port())) << server.log();
  ASSERT_EQ(::chmod(above.c_str(), 0777), 0);
  EXPECT_FALSE(other.logs_in(server.port()));
  EXPECT_TRUE(server.wait_for_log("directory " + above.string() +
                                  " is writable by group or others (mode 0777) (it holds the symbolic link " +
                                  (above / "y" / "middle").string()))
      << server.log();
  EXPECT_EQ(server.stop(), 0);
}

// A third re-attack (N3): the server's own identity (a login credential) and its host key were
// trusted whatever their owner and directories. Another user's identity planted in a writable
// home is not trusted for logins; a host key such a user could have planted stops the start.
TEST(StrictModes, OwnIdentityAndHostKeyAreCheckedToo) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root can give a file away to another user";
  Workspace ws;
  {
    ServerProcess server(ws.home, ws.root);  // makes the keys
    EXPECT_EQ(server.stop(), 0);
  }
  ASSERT_EQ(::chown((ws.home / "id_ed25519").c_str(), 65534, 65534), 0);
  ServerProcess server(ws.home, ws.root);
  EXPECT_TRUE(server.wait_for_log("this user's own identity is not trusted for logins: " +
                                  (ws.home / "id_ed25519").string() + " is owned by uid 65534"))
      << server.log();
  // Its key, in a copy of this user's (the client refuses to read another user's key file).
  TempDir copy_dir{"aesxfer-own-copy"};
  const fs::path copy = copy_dir / "id_ed25519";
  fs::copy_file(ws.home / "id_ed25519", copy);
  ASSERT_EQ(::chown(copy.c_str(), 0, 0), 0);
  HandSession own(server.port(), copy);
  EXPECT_FALSE(own.welcome_ok) << "another user's planted identity logged in";
  EXPECT_EQ(server.stop(), 0);
  ASSERT_EQ(::chown((ws.home / "id_ed25519").c_str(), 0, 0), 0);

  ASSERT_EQ(::chown((ws.home / "host_ed25519").c_str(), 65534, 65534), 0);
  auto r =
      run_aesxfer({"serve", "--root", ws.root.string(), "--listen", "127.0.0.1", "--port", "0"}, ws.home, 20);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("host key: " + (ws.home / "host_ed25519").string() + " is owned by uid 65534"),
            std::string::npos)
      << r.err;
}

// What load_trusted_keys says about `file` in a process that runs as uid/gid 65534 (a service
// user that cannot open a root-owned 0600 file), or as this user when the tests do not run as
// root (the file is then made unreadable by its mode).
std::string refused_for_another_user(const fs::path& file) {
  if (::geteuid() != 0) {
    ::chmod(file.c_str(), 0);
    std::string why;
    files::load_trusted_keys(file, why);
    return why;
  }
  int p[2];
  if (::pipe(p) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string why = "setuid failed";
    if (::setgid(65534) == 0 && ::setuid(65534) == 0) files::load_trusted_keys(file, why);
    (void)!::write(p[1], why.data(), why.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char b[512];
  for (ssize_t n; (n = ::read(p[0], b, sizeof b)) > 0;) out.append(b, size_t(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return out;
}

TEST(StrictModes, UnreadableFileIsReportedAsUnreadable) {
  Workspace ws;
  OtherClient other;
  const fs::path ak = ws.home / "authorized_keys";
  write_text_file(ak, other.line + "\n");
  ASSERT_EQ(::chmod(ak.c_str(), 0600), 0);
  EXPECT_EQ(refused_for_another_user(ak), "cannot read " + ak.string() + ": permission denied");
  ASSERT_EQ(::chmod(ak.c_str(), 0600), 0);

  // The server's own view: an authorized_keys it cannot read as a file (here a directory) is
  // named as unreadable at start and at the refused login, not counted as 0 keys.
  const fs::path dir = ws.tmp / "ak-dir";
  fs::create_directories(dir);
  ServerProcess server(ws.home, ws.root, {"--authorized-keys", dir.string()});
  EXPECT_TRUE(server.wait_for_log("no key of authorized_keys is trusted: cannot read " + dir.string() +
                                  ": not a regular file"))
      << server.log();
  EXPECT_EQ(server.log().find("the file does not exist"), std::string::npos) << server.log();
  EXPECT_FALSE(other.logs_in(server.port()));
  EXPECT_TRUE(server.wait_for_log("is trusted: cannot read " + dir.string())) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

TEST(Authorize, EveryControlByteIsRefused) {
  Workspace ws;
  OtherClient other;
  const fs::path ak = ws.home / "authorized_keys";
  for (const std::string& tail :
       {std::string("\rssh-ed25519 AAAA forged"), std::string("\x1b[2K\x1b[1Ghidden"), std::string("a\tb"),
        std::string("del\x7f"), std::string("nul\x01"),
        std::string("c1 \xc2\x9b"
                    "31m"),
        std::string("bidi \xe2\x80\xae"
                    "fdp.exe"),
        std::string("zw \xe2\x80\x8b"), std::string("bad \xff")}) {
    ProcResult r = run_aesxfer({"authorize", other.line + " " + tail}, ws.home, 30);
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.describe();
    for (char c : {'\r', '\x1b', '\x7f'}) EXPECT_EQ(r.err.find(c), std::string::npos) << r.describe();
    EXPECT_FALSE(fs::exists(ak)) << "written for: " << proto::printable(tail);
  }
  // The plain line (a trailing CR LF, as a line copied from a Windows file, is not part of it).
  ProcResult r = run_aesxfer({"authorize", other.line + "\r\n"}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ak), other.line + "\n");
}

// A sixtieth re-attack (P60-3, P60-4): a comment of 2,330 spaces and then alice's key line showed
// as two key lines in `cat authorized_keys`, and only mallory's key was let in; a look-alike slash
// was refused as "C1 controls, bidi or invisible format characters", and the line was shown twice.
// A run of spaces and a key type in the comment are refused; a character is named by what it is.
TEST(Authorize, NoCommentShowsAsAnotherKeyAndEachRefusalNamesItsCharacter) {
  Workspace ws;
  OtherClient other, alice;
  const fs::path ak = ws.home / "authorized_keys";
  for (const auto& [tail, why] : std::vector<std::pair<std::string, std::string>>{
           {"mallory@evil" + std::string(2330, ' ') + alice.line,
            "the key line holds a run of spaces (at byte 74), which a terminal can show as another line"},
           {"mallory@evil " + alice.line, "the key line's comment holds \"aesxfer-ed25519\" (at byte 75)"},
           {"\xe2\x88\x95"
            "etc",
            "the key line holds U+2215 at byte 62, which a terminal does not show as it is"},
           {"nb\xc2\xa0sp", "the key line holds U+00A0 at byte 64"},
           {"bad \xff", "the key line holds the byte 0xff at byte 66, not UTF-8"},
           // A sixty-first (R61-5): the key type in a look-alike spelling, or in capitals.
           {"mallory@build-host \xd0\xb0" + alice.line.substr(1) + " alice@laptop",
            "the key line's comment holds a key (at byte 98)"},
           {"m AESXFER-ED25519 " + alice.line.substr(16), "the key line's comment holds a key (at byte 80)"},
           // A sixty-second (U62-3): a look-alike type and a key of 43 characters (its '=' left out).
           {"mallory@workstatio AESXFER-ED25519 " + alice.line.substr(16, 43) + " alice@vm",
            "the key line's comment is 87 bytes, more than 59 (a longer one can show as another key "
            "line)"}}) {
    ProcResult r =
        run_aesxfer({"authorize", other.line.substr(0, other.line.find(' ', 16)) + " " + tail}, ws.home, 30);
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.describe();
    EXPECT_NE(r.err.find(why), std::string::npos) << r.describe();
    EXPECT_EQ(r.err.find("C1 controls"), std::string::npos) << r.describe();
    EXPECT_FALSE(fs::exists(ak)) << "written for: " << proto::printable(tail);
  }
  ProcResult ok = run_aesxfer({"authorize", other.line + " a laptop"}, ws.home, 30);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
}

// A fifth re-attack (F3): a last line without its newline took the next key into it, so `authorize`
// said "added" and `cat` showed the key while the server let neither in. The file is ended first.
TEST(Authorize, ALastLineWithoutItsNewlineIsEndedFirst) {
  Workspace ws;
  OtherClient first, second;
  const fs::path ak = ws.home / "authorized_keys";
  write_text_file(ak, first.line);  // no final newline, as an editor may leave it
  ASSERT_EQ(::chmod(ak.c_str(), 0600), 0);
  ProcResult r = run_aesxfer({"authorize", second.line}, ws.home, 30);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ak), first.line + "\n" + second.line + "\n");
  ServerProcess server(ws.home, ws.root);
  EXPECT_TRUE(first.logs_in(server.port())) << server.log();
  EXPECT_TRUE(second.logs_in(server.port())) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

// A sixth re-attack (F2): `authorize` said "added" (or "already there") for a file the server
// trusts no key of (StrictModes), and the refused client was told to add the very line. It refuses
// with the server's reason and leaves the file as it was.
TEST(Authorize, AFileTheServerWouldNotTrustIsRefused) {
  Workspace ws;
  OtherClient first, second;
  const fs::path ak = ws.home / "authorized_keys";
  write_text_file(ak, first.line + "\n");
  ASSERT_EQ(::chmod(ak.c_str(), 0664), 0);
  for (const OtherClient* c : {&second, &first}) {  // a new key, and one already there
    ProcResult r = run_aesxfer({"authorize", c->line}, ws.home, 30);
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.describe();
    EXPECT_NE(r.err.find("writable by group or others (mode 0664)"), std::string::npos) << r.describe();
    EXPECT_EQ(r.out.find("added"), std::string::npos) << r.describe();
    EXPECT_EQ(read_text_file(ak), first.line + "\n");
  }
  ASSERT_EQ(::chmod(ak.c_str(), 0600), 0);
  ProcResult r = run_aesxfer({"authorize", second.line}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("added"), std::string::npos) << r.describe();
  ServerProcess server(ws.home, ws.root);
  EXPECT_TRUE(second.logs_in(server.port())) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// A thirty-seventh re-attack (B3): serve -q wrote its start-up warnings to the terminal as they
// were, so a home path with ESC and bidi controls reached it raw; the log escaped them.
TEST(StrictModes, WarningsWithoutALogAreEscapedAsTheLogsAre) {
  Workspace ws;
  const fs::path home = ws.tmp / "h\x1b[31m\xe2\x80\xaex";
  fs::create_directories(home);
  ASSERT_EQ(::chmod(home.c_str(), 0700), 0);
  OtherClient other;
  write_text_file(home / "authorized_keys", other.line + "\n");
  ASSERT_EQ(::chmod((home / "authorized_keys").c_str(), 0664), 0);
  auto r = run_aesxfer({"serve", "-q", "--listen", "127.0.0.1", "--port", "0", "--root", ws.root.string()},
                       home, 3);
  EXPECT_NE(r.err.find("no key of authorized_keys is trusted: "), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("h\\x1b[31m\\xe2\\x80\\xaex/authorized_keys"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << proto::printable(r.err);
}

}  // namespace
}  // namespace aesxfer::test
