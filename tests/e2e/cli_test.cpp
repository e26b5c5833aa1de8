// What a newcomer types and reads: a mistyped command, no arguments, sizes and rates with
// suffixes, out-of-range values as one readable line, placeholders in --help.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST(Cli, UnknownCommandSuggestsTheNearestOne) {
  TempDir home;
  auto r = run_aesxfer({"sned", "a", "h:b"}, home.path(), 10);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("unknown command 'sned' (did you mean send?)"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  auto f = run_aesxfer({"frobnicate"}, home.path(), 10);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_NE(f.err.find("unknown command 'frobnicate'; commands:"), std::string::npos) << f.err;
  auto esc = run_aesxfer({"se\x1b[2Jnd"}, home.path(), 10);
  EXPECT_EQ(esc.err.find('\x1b'), std::string::npos) << "a terminal escape reached stderr";
}

TEST(Cli, NoArgumentsPrintsUsageOnStderrAndExits2) {
  TempDir home;
  auto r = run_aesxfer({}, home.path(), 10);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("Usage:"), std::string::npos) << r.err;
}

TEST(Cli, OutOfRangeValuesAreOneShortLine) {
  TempDir home;
  for (std::vector<std::string> a : {std::vector<std::string>{"send", "f", "h:x", "-l", "-5"},
                                     {"send", "f", "h:x", "--timeout", "0"},
                                     {"send", "f", "h:x", "--timeout", "-1"},
                                     {"send", "f", "h:x", "--record-size", "2M"},
                                     {"send", "f", "h:x", "--streams", "99"},
                                     {"bench", "--size", "lots"},
                                     {"recv", "h:/dev/zero", "x", "--size", "1Q"}}) {
    auto r = run_aesxfer(a, home.path(), 10);
    EXPECT_EQ(r.exit_code, 2) << a[3] << " " << r.describe();
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_LT(r.err.size(), 200u) << "an unreadable bound? " << r.err;
  }
}

TEST(Cli, HelpShowsPlaceholders) {
  TempDir home;
  auto r = run_aesxfer({"send", "--help"}, home.path(), 10);
  ASSERT_EQ(r.exit_code, 0);
  for (const char* p : {"FILE... HOST:DEST", "-c,--cipher CIPHER", "-P,--port PORT", "--timeout SECONDS",
                        "-l,--limit RATE", "--record-size SIZE", "--checksum ALG", "--keylog FILE"})
    EXPECT_NE(r.out.find(p), std::string::npos) << p << "\n" << r.out;
  for (const char* bad : {" TEXT", " FLOAT", "179769313"})
    EXPECT_EQ(r.out.find(bad), std::string::npos) << bad;
}

TEST(Cli, CipherMacAndChecksumNamesIgnoreCase) {
  TempDir home;
  auto r = run_aesxfer({"speed", "-c", "AES128-GCM,HMAC-SHA256,XXH128", "--seconds", "0.01", "--json"},
                       home.path(), 60);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("\"aes128-gcm\""), std::string::npos);
  EXPECT_NE(r.out.find("\"hmac-sha256\""), std::string::npos);
  EXPECT_NE(r.out.find("\"xxh128\""), std::string::npos);
}

// A port that speaks something else (here a fake ssh banner on loopback) is named as such.
TEST(Cli, APortThatIsNotAnAesxferServerIsNamed) {
  TempDir home;
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(l, 1), 0);
  ASSERT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::thread fake([&] {
    int c = ::accept(l, nullptr, nullptr);
    if (c < 0) return;
    const char banner[] = "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n";
    (void)!::write(c, banner, sizeof banner - 1);
    char sink[512];
    while (::read(c, sink, sizeof sink) > 0) {
    }
    ::close(c);
  });
  write_text_file(home / "f", "x");
  auto r =
      run_aesxfer({"send", (home / "f").string(), "127.0.0.1:x", "-P", std::to_string(ntohs(a.sin_port))},
                  home.path(), 20);
  ::shutdown(l, SHUT_RDWR);
  ::close(l);
  fake.join();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("is not an aesxfer server (it sent \"SSH-2.0-OpenSSH_9.2p1 Debian-2\")"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// serve says once at start what a client needs: its host key, its root, the authorized_keys
// file it reads, and each line of that file it cannot use (file:line).
TEST(ServeStart, NamesHostKeyRootAuthorizedKeysAndBadLines) {
  Workspace ws;
  write_text_file(ws.home / "authorized_keys", "garbage line\n# a comment\n\naesxfer-ed25519 AAAA short\n");
  ServerProcess server(ws.home, ws.root);
  EXPECT_TRUE(
      server.wait_for_log("authorized_keys=\"" + (ws.home / "authorized_keys").string() + "\" keys=0"))
      << server.log();
  const std::string log = server.log();
  EXPECT_NE(log.find("host_key=SHA256:"), std::string::npos) << log;
  EXPECT_NE(log.find("root="), std::string::npos) << log;
  EXPECT_NE(log.find("authorized_keys:1: not a key line"), std::string::npos) << log;
  EXPECT_NE(log.find("authorized_keys:4: not a key line"), std::string::npos) << log;
  EXPECT_EQ(log.find("authorized_keys:2:"), std::string::npos) << "a comment is not a problem";
  EXPECT_EQ(log.find("authorized_keys:3:"), std::string::npos) << "a blank line is not a problem";
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// Where the keys live when the environment says little (a nineteenth re-attack's question): an
// empty AESXFER_HOME counts as unset, as the XDG Base Directory rules treat an empty
// XDG_CONFIG_HOME, so the keys go to ~/.config/aesxfer; without HOME, ~ is the user's home in the
// password database (as ssh finds ~/.ssh), never a ".config" made in whatever directory the command
// started in (it was, before). Run as nobody, whose home is /nonexistent, in a directory it may write.
TEST(HomeDirectory, EmptyMeansTheDefaultAndNoHomeMeansThePasswordDatabase) {
  TempDir d("aesxfer-home");
  fs::permissions(d.path(), fs::perms(0777));
  const fs::path cwd = d / "cwd", home = d / "home";
  fs::create_directories(cwd);
  fs::create_directories(home);
  chown_tree(d.path(), kNobody);
  const auto keygen = [&](const std::string& env) {
    return run_process(
        {"/bin/sh", "-c",
         "cd '" + cwd.string() + "' && exec env -u XDG_CONFIG_HOME " + env +
             " /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups " AESXFER_BINARY " keygen"},
        {}, 30);
  };
  auto r = keygen("AESXFER_HOME= HOME='" + home.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(home / ".config" / "aesxfer" / "id_ed25519")) << r.describe();
  r = keygen("-u AESXFER_HOME -u HOME");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("/nonexistent/.config/aesxfer"), std::string::npos) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_FALSE(fs::exists(cwd / ".config")) << "keys made in the directory the command started in";
}

// First contact in three commands: keygen on the client prints exactly the line the server's
// authorized_keys takes; with it there the client gets in, without it it is refused.
TEST(FirstContact, KeygenLineIsWhatAuthorizedKeysTakes) {
  Workspace ws;  // ws.home: the server's; the client gets a home of its own
  TempDir client_home("aesxfer-client");
  auto k = run_aesxfer({"keygen"}, client_home.path(), 30);
  ASSERT_EQ(k.exit_code, 0) << k.describe();
  EXPECT_EQ(std::count(k.out.begin(), k.out.end(), '\n'), 1) << k.out;
  EXPECT_EQ(k.out.rfind("aesxfer-ed25519 ", 0), 0u) << k.out;
  EXPECT_NE(k.out.find('@'), std::string::npos) << "a user@host comment: " << k.out;
  EXPECT_EQ(k.out, read_text_file(client_home / "id_ed25519.pub")) << "stdout is the .pub line";
  EXPECT_NE(k.err.find("authorized_keys"), std::string::npos) << k.err;
  ServerProcess server(ws.home, ws.root);
  write_text_file(ws.local / "f", "hello");
  std::vector<std::string> send = {"send", (ws.local / "f").string(), "127.0.0.1:f", "-P",
                                   std::to_string(server.port())};
  auto refused = run_aesxfer(send, client_home.path(), 30);
  EXPECT_EQ(refused.exit_code, 1) << refused.describe();
  // The refusal says what to do: the very line keygen printed, and where it goes.
  EXPECT_NE(refused.err.find("add this line to $AESXFER_HOME/authorized_keys on the server"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find(k.out.substr(0, k.out.size() - 1)), std::string::npos) << refused.err;
  // A fifty-sixth re-attack (A56-3): the key may be there, in a file the server does not trust
  // (writable by others): the advice covers that too, not only "add".
  EXPECT_NE(refused.err.find("if it is not there"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("if it is, only the file's owner may write it"), std::string::npos)
      << refused.err;
  // One line for the refusal (after the first-contact line about the host key).
  const std::string last = refused.err.substr(refused.err.rfind('\n', refused.err.size() - 2) + 1);
  EXPECT_NE(last.find("refused the login"), std::string::npos) << refused.err;
  EXPECT_NE(last.find("aesxfer-ed25519 "), std::string::npos) << refused.err;
  // The server's words come after this client's key line, quoted as its own: they may imitate
  // the hint with another key (a thirty-eighth re-attack, B-F5: the impostor's line came first).
  const size_t said = last.find(" (the server said: \"client key SHA256:");
  ASSERT_NE(said, std::string::npos) << refused.err;
  EXPECT_LT(last.find("aesxfer-ed25519 "), said) << refused.err;
  write_text_file(ws.home / "authorized_keys", k.out);
  auto ok = run_aesxfer(send, client_home.path(), 30);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe() << server.log();
  EXPECT_EQ(read_text_file(ws.root / "f"), "hello");
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// Addresses as scp users type them: user@host:path (the user part ignored, with a note),
// host: for the root, and host:~/x refused with the form that works.
TEST(Addresses, UserAtHostRootAndTilde) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  const std::string port = std::to_string(server.port());
  write_text_file(ws.local / "f", "hello");
  auto r = run_aesxfer({"send", (ws.local / "f").string(), "alice@127.0.0.1:g", "-P", port}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "g"), "hello");
  EXPECT_NE(r.err.find("note: 'alice@' is ignored"), std::string::npos) << r.err;
  auto v6 =
      run_aesxfer({"send", (ws.local / "f").string(), "bob@127.0.0.1:h", "-P", port, "-q"}, ws.home, 30);
  EXPECT_EQ(v6.exit_code, 0) << v6.describe();
  EXPECT_EQ(v6.err, "") << "-q: no note";
  // host: is the root.
  auto root = run_aesxfer({"send", (ws.local / "f").string(), "127.0.0.1:", "-P", port}, ws.home, 30);
  EXPECT_EQ(root.exit_code, 0) << root.describe();
  EXPECT_EQ(read_text_file(ws.root / "f"), "hello");
  auto back =
      run_aesxfer({"recv", "127.0.0.1:", (ws.local / "tree").string(), "-r", "-P", port, "-q"}, ws.home, 30);
  EXPECT_EQ(back.exit_code, 0) << back.describe();
  EXPECT_EQ(read_text_file(ws.local / "tree/g"), "hello");
  // ~ is refused before connecting, and nothing named "~" appears.
  auto tilde = run_aesxfer({"send", (ws.local / "f").string(), "127.0.0.1:~/x", "-P", port}, ws.home, 30);
  EXPECT_EQ(tilde.exit_code, 2) << tilde.describe();
  EXPECT_NE(tilde.err.find(
                "'~' has no meaning here: paths are relative to the server's --root (write 127.0.0.1:x)"),
            std::string::npos)
      << tilde.err;
  EXPECT_FALSE(fs::exists(ws.root / "~"));
  // Paths the protocol refuses are usage errors before anything moves, also as a later recv
  // source (an eighteenth re-attack, N3: the first source was fetched, then the server refused).
  write_text_file(ws.root / "first", "one");
  for (const std::string bad : {"127.0.0.1:../x", "127.0.0.1:/etc/passwd", "127.0.0.1:a/../../x"}) {
    auto later =
        run_aesxfer({"recv", "127.0.0.1:first", bad, (ws.local / "into").string(), "-P", port}, ws.home, 30);
    EXPECT_EQ(later.exit_code, 2) << later.describe();
    EXPECT_EQ(nonempty_lines(later.err).size(), 1u) << later.err;
    EXPECT_NE(later.err.find(bad + ": "), std::string::npos) << later.err;
    EXPECT_FALSE(fs::exists(ws.local / "into")) << bad;
  }
  auto abs = run_aesxfer({"send", (ws.local / "f").string(), "127.0.0.1:/tmp/x", "-P", port}, ws.home, 30);
  EXPECT_EQ(abs.exit_code, 2) << abs.describe();
  EXPECT_NE(
      abs.err.find("absolute paths are refused: paths are relative to the server's --root (/dev/null is "
                   "the one exception)"),
      std::string::npos)
      << abs.err;
  auto sink =
      run_aesxfer({"send", (ws.local / "f").string(), "127.0.0.1:/dev/null", "-P", port, "-q"}, ws.home, 30);
  EXPECT_EQ(sink.exit_code, 0) << sink.describe();
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// A remote error names the file once: "HOST:PORT:nope.bin: no such file...", not "...nope.bin:
// nope.bin: ...".
TEST(RemoteErrors, NameTheFileOnce) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  auto r = run_aesxfer(
      {"recv", "127.0.0.1:nope.bin", (ws.local / "x").string(), "-P", std::to_string(server.port())}, ws.home,
      30);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const std::string last = r.err.substr(r.err.rfind("aesxfer: "));
  size_t n = 0;
  for (size_t at = last.find("nope.bin"); at != std::string::npos; at = last.find("nope.bin", at + 1)) ++n;
  EXPECT_EQ(n, 1u) << last;
  EXPECT_NE(last.find(":nope.bin: no such file"), std::string::npos) << last;
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// One port option, -P, in every command; -p is --preserve, and `serve -p` says so.
TEST(Cli, PortIsCapitalPEverywhere) {
  TempDir home;
  auto r = run_aesxfer({"serve", "-p", "0"}, home.path(), 10);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("the port option is -P (or --port)"), std::string::npos) << r.err;
  for (const char* sub : {"send", "recv", "serve", "bench"}) {
    auto h = run_aesxfer({sub, "--help"}, home.path(), 10);
    EXPECT_NE(h.out.find("-P,--port"), std::string::npos) << sub << "\n" << h.out;
  }
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// recv takes several sources like scp: into an existing directory, a missing one reported while
// the others still come, exit 1 at the end; several sources into a non-directory are refused.
TEST(RecvSeveral, IntoADirectoryAndTheOthersStillCome) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  const std::string port = std::to_string(server.port());
  write_text_file(ws.root / "a", "A");
  write_text_file(ws.root / "b", "B");
  fs::create_directories(ws.local / "in");
  auto r = run_aesxfer(
      {"recv", "127.0.0.1:a", "127.0.0.1:nope", "127.0.0.1:b", (ws.local / "in").string(), "-P", port},
      ws.home, 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(read_text_file(ws.local / "in/a"), "A");
  EXPECT_EQ(read_text_file(ws.local / "in/b"), "B");
  EXPECT_NE(r.err.find("nope"), std::string::npos) << r.err;
  auto bad = run_aesxfer({"recv", "127.0.0.1:a", "127.0.0.1:b", (ws.local / "file").string(), "-P", port},
                         ws.home, 30);
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("not a directory"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(ws.local / "file"));
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// `aesxfer authorize` on the server: the keygen line (or its .pub file) into authorized_keys,
// 0600, once; anything else refused with one line; and the client then gets in.
TEST(Authorize, KeygenLineOrPubFileLetsTheClientIn) {
  Workspace ws;
  TempDir client_home("aesxfer-client");
  auto k = run_aesxfer({"keygen"}, client_home.path(), 30);
  ASSERT_EQ(k.exit_code, 0) << k.describe();
  std::string line = k.out.substr(0, k.out.find('\n'));
  auto a = run_aesxfer({"authorize", line}, ws.home, 30);
  EXPECT_EQ(a.exit_code, 0) << a.describe();
  EXPECT_EQ(a.out.rfind("added SHA256:", 0), 0u) << a.out;
  struct stat st {};
  ASSERT_EQ(::stat((ws.home / "authorized_keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = run_aesxfer({"authorize", (client_home / "id_ed25519.pub").string()}, ws.home, 30);
  EXPECT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(again.out.rfind("already there:", 0), 0u) << again.out;
  EXPECT_EQ(read_text_file(ws.home / "authorized_keys"), line + "\n") << "added once";
  auto bad = run_aesxfer({"authorize", "ssh-ed25519 AAAAC3Nza..."}, ws.home, 30);
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("not a key line"), std::string::npos) << bad.err;
  // A file that is missing or a directory is named as such, not taken for a key line (an
  // eighteenth re-attack, N7).
  const std::string missing = (ws.local / "nonexist.pub").string();
  auto gone = run_aesxfer({"authorize", missing}, ws.home, 30);
  EXPECT_EQ(gone.exit_code, 1) << gone.describe();
  EXPECT_NE(gone.err.find(missing + ": no such file or directory"), std::string::npos) << gone.err;
  auto dir = run_aesxfer({"authorize", ws.local.string()}, ws.home, 30);
  EXPECT_EQ(dir.exit_code, 1) << dir.describe();
  EXPECT_NE(dir.err.find(ws.local.string() + ": not a regular file"), std::string::npos) << dir.err;
  EXPECT_EQ(read_text_file(ws.home / "authorized_keys"), line + "\n") << "nothing added";
  // A .pub file another user owns or may write to, or their link in a sticky directory, adds
  // nothing (a thirty-seventh re-attack, A6: their key was added without a word).
  TempDir other_home("aesxfer-other");
  ASSERT_EQ(run_aesxfer({"keygen"}, other_home.path(), 30).exit_code, 0);
  const fs::path theirs = ws.local / "theirs.pub", writable = ws.local / "writable.pub";
  fs::copy_file(other_home / "id_ed25519.pub", theirs);
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  fs::copy_file(other_home / "id_ed25519.pub", writable);
  ASSERT_EQ(::chmod(writable.c_str(), 0666), 0);
  const fs::path share = ws.local / "share";
  fs::create_directories(share);
  ASSERT_EQ(::chmod(share.c_str(), 01777), 0);
  fs::copy_file(other_home / "id_ed25519.pub", ws.local / "mine.pub");
  fs::create_symlink(ws.local / "mine.pub", share / "k.pub");
  ASSERT_EQ(::lchown((share / "k.pub").c_str(), kNobody, kNobody), 0);
  // ...nor their link in a directory of their own to this user's file (the rule of every path the
  // user types, files::foreign_reach), nor a file too large to be a .pub.
  const fs::path their_dir = ws.local / "their-dir";
  fs::create_directories(their_dir);
  fs::create_symlink(ws.local / "mine.pub", their_dir / "k.pub");
  ASSERT_EQ(::lchown((their_dir / "k.pub").c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chown(their_dir.c_str(), kNobody, kNobody), 0);
  write_text_file(ws.local / "huge.pub", read_text_file(ws.local / "mine.pub") + std::string(70000, '#'));
  for (const auto& [f, why] : std::vector<std::pair<fs::path, std::string>>{
           {theirs, ": it belongs to uid 65534; a key file must be yours (or root's)"},
           {writable, ": writable by group or others: its key is not added"},
           {share / "k.pub", ": "},
           {their_dir / "k.pub", ": reached through a symbolic link of uid 65534 to what uid 0 owns"},
           {ws.local / "huge.pub", ": larger than 64 KiB: not a .pub file"}}) {
    auto r = run_aesxfer({"authorize", f.string()}, ws.home, 30);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find(f.string() + why), std::string::npos) << r.err;
  }
  EXPECT_EQ(read_text_file(ws.home / "authorized_keys"), line + "\n") << "nothing added";
  ServerProcess server(ws.home, ws.root);
  write_text_file(ws.local / "f", "x");
  auto s =
      run_aesxfer({"send", (ws.local / "f").string(), "127.0.0.1:f", "-P", std::to_string(server.port())},
                  client_home.path(), 30);
  EXPECT_EQ(s.exit_code, 0) << s.describe();
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace aesxfer::test
