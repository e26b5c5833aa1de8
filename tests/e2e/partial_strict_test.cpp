// Issue 24 item B4: --resume adopts a kept partial file (".NAME.aesxfer-partial") only when it is
// owned by the effective user, has one link and is not writable by group or others, on both ends
// (docs/SECURITY.md, "Partial files"). A file planted by another local user, a hard link to a file
// elsewhere, or a group-writable one is passed over with a line naming the file and the reason,
// nothing is written through it, and the file moves from the start. The tests run as root, so
// "another user" is uid 65534 (nobody).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "files/unique_fd.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

class PartialStrictModes : public ServerTest {
 protected:
  // The first `n` bytes of `from`, written to `to` (a prefix that would otherwise be resumed).
  static void write_prefix(const fs::path& from, const fs::path& to, size_t n) {
    std::string head(n, '\0');
    std::ifstream(from, std::ios::binary).read(head.data(), std::streamsize(n));
    std::ofstream(to, std::ios::binary).write(head.data(), std::streamsize(n));
  }
  enum class Plant { other_owner, hard_link, group_writable };
  // Plants a partial file at `partial` holding the first half of `src`, made untrustworthy as
  // `how` says; returns the string the refusal must contain. `elsewhere` is where a hard link's
  // other name goes.
  static std::string plant(Plant how, const fs::path& src, const fs::path& partial,
                           const fs::path& elsewhere) {
    const size_t half = size_t(fs::file_size(src) / 2);
    switch (how) {
      case Plant::other_owner:
        write_prefix(src, partial, half);
        EXPECT_EQ(::chown(partial.c_str(), 65534, 65534), 0);
        return "owned by uid 65534";
      case Plant::hard_link:
        write_prefix(src, elsewhere, half);
        fs::create_hard_link(elsewhere, partial);
        return "has 2 links";
      case Plant::group_writable:
        write_prefix(src, partial, half);
        fs::permissions(partial, fs::perms(0664));
        return "writable by group or others (mode 0664)";
    }
    return "";
  }
  // The lines of stderr that are notes (the first contact's "Permanently added" aside).
  static size_t notes(const std::string& err) {
    size_t n = 0;
    for (const auto& l : nonempty_lines(err)) n += l.find("Permanently added") == std::string::npos;
    return n;
  }
  // A destination that another user planted: theirs (uid 65534) and writable by everyone.
  static void plant_as_another_user(const fs::path& dest) {
    ASSERT_EQ(::chown(dest.c_str(), 65534, 65534), 0);
    fs::permissions(dest, fs::perms(0666));
  }
  // After a recv --resume that `r` reports: the planted destination was not taken for "up to
  // date" but replaced whole, by a file of this user's that others cannot write.
  static void expect_replaced_as_this_users(const ProcResult& r, const fs::path& dest) {
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.out.find("up to date"), std::string::npos) << r.out;
    struct stat st {};
    ASSERT_EQ(::stat(dest.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, ::geteuid()) << "the destination is still the other user's file";
    EXPECT_EQ(st.st_mode & 022, 0u) << std::oct << st.st_mode;
  }
};

// send --resume: the server passes over the planted partial file (writes nothing through it and
// leaves it as it is), and the file goes from the start, into a temporary file, with one line that
// names the file and the reason. Refusing the put instead (as before the fourteenth re-attack, H6)
// let another local user block every --resume and every retry of that name for good: the client
// cannot remove the server's file, and in a sticky directory the server's user cannot either.
TEST_F(PartialStrictModes, ServerPassesOverAPartialFileItCannotTrust) {
  fs::path f = ws.local / "p.bin";
  write_random_file(f, (1 << 20) + 77, 3);
  const fs::path partial = ws.root / ".p.bin.aesxfer-partial";
  const fs::path elsewhere = ws.root / "victim.bin";
  for (Plant how : {Plant::other_owner, Plant::hard_link, Plant::group_writable}) {
    std::string reason = plant(how, f, partial, elsewhere);
    const std::string before = sha256_file(partial);
    auto r = run({"send", "--resume", f.string(), "127.0.0.1:p.bin"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(notes(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("not resuming from the partial file .p.bin.aesxfer-partial: " + reason),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("left as it is and the file moved from the start"), std::string::npos) << r.err;
    EXPECT_EQ(sha256_file(partial), before) << "written through a distrusted partial file";
    EXPECT_EQ(sha256_file(ws.root / "p.bin"), sha256_file(f));
    struct stat st {};
    ASSERT_EQ(::stat((ws.root / "p.bin").c_str(), &st), 0);
    EXPECT_EQ(st.st_nlink, 1u) << "the destination is the planted file's second name";
    EXPECT_TRUE(server->wait_for_log("received from the start instead")) << server->log();
    fs::remove(partial);
    fs::remove(elsewhere);
    fs::remove(ws.root / "p.bin");
  }
}

// send -r --resume probes every file: a distrusted partial file is not adopted (the file goes
// whole, the planted file keeps what it had) and one line says so.
TEST_F(PartialStrictModes, TreeResumeNeverAdoptsAForeignPartialFile) {
  fs::create_directories(ws.local / "t");
  fs::create_directories(ws.root / "t");
  fs::path f = ws.local / "t" / "p.bin";
  write_random_file(f, 300000, 4);
  const fs::path partial = ws.root / "t" / ".p.bin.aesxfer-partial";
  plant(Plant::other_owner, f, partial, {});
  const std::string before = sha256_file(partial);
  auto r = run({"send", "-r", "--resume", (ws.local / "t").string(), "127.0.0.1:.", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  // Not silent: one line names the file, the reason and what was done instead.
  ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find(".p.bin.aesxfer-partial"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("owned by uid 65534"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sending it whole"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::exists(partial)) << "the planted file was adopted (renamed into place)";
  EXPECT_EQ(sha256_file(partial), before) << "written through a distrusted partial file";
  struct stat st {};
  ASSERT_EQ(::stat((ws.root / "t" / "p.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid()) << "the destination is the other user's file";
  EXPECT_EQ(sha256_file(ws.root / "t" / "p.bin"), sha256_file(f));
}

// recv --resume: the client passes over its own planted partial file the same way.
TEST_F(PartialStrictModes, ClientPassesOverAPartialFileItCannotTrust) {
  write_random_file(ws.root / "p.bin", (1 << 20) + 77, 5);
  const fs::path partial = ws.local / ".p.bin.aesxfer-partial";
  const fs::path elsewhere = ws.local / "victim.bin";
  const fs::path dest = ws.local / "p.bin";
  for (Plant how : {Plant::other_owner, Plant::hard_link, Plant::group_writable}) {
    std::string reason = plant(how, ws.root / "p.bin", partial, elsewhere);
    const std::string before = sha256_file(partial);
    auto r = run({"recv", "--resume", "127.0.0.1:p.bin", dest.string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(notes(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(partial.string() + ": not resuming from this partial file: " + reason),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("the file moved from the start"), std::string::npos) << r.err;
    EXPECT_EQ(sha256_file(partial), before) << "written through a distrusted partial file";
    EXPECT_EQ(sha256_file(dest), sha256_file(ws.root / "p.bin"));
    EXPECT_EQ(fs::hard_link_count(dest), 1u);
    fs::remove(partial);
    fs::remove(elsewhere);
    fs::remove(dest);
  }
  // With -q too, as the man page promises (a thirty-third re-attack, B-N6: -q hid the note).
  const std::string reason = plant(Plant::other_owner, ws.root / "p.bin", partial, elsewhere);
  auto r = run({"recv", "-q", "--resume", "127.0.0.1:p.bin", dest.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find(partial.string() + ": not resuming from this partial file: " + reason),
            std::string::npos)
      << r.err;
}

// A third re-attack (N11): recv --resume took another user's planted destination (0666, same
// bytes) for "up to date" and left it, theirs and writable by them. Such a file is no resume
// base: the file comes whole and replaces it, owned by this user.
TEST_F(PartialStrictModes, AnotherUsersDestinationIsNotUpToDate) {
  write_random_file(ws.root / "d.bin", 300000, 6);
  const fs::path dest = ws.local / "d.bin";
  fs::copy_file(ws.root / "d.bin", dest);
  plant_as_another_user(dest);
  auto r = run({"recv", "--resume", "127.0.0.1:d.bin", dest.string()});
  expect_replaced_as_this_users(r, dest);
  EXPECT_EQ(sha256_file(dest), sha256_file(ws.root / "d.bin"));
}

// A seventh re-attack (N3): the pipelined gets of recv -r --resume offered any regular file of the
// right size as the resume base, so another user's planted copy (0666, same bytes) in the copy's
// tree was "up to date" and stayed theirs. Only a file of this user's with one link is offered.
TEST_F(PartialStrictModes, TreeResumeNeverTakesAnotherUsersSmallFileAsUpToDate) {
  fs::create_directories(ws.root / "tree");
  write_text_file(ws.root / "tree" / "run.sh", "echo hi\n");
  auto r = run({"recv", "-r", "-q", "127.0.0.1:tree", ws.local.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const fs::path dest = ws.local / "tree" / "run.sh";
  fs::remove(dest);
  write_text_file(dest, "echo hi\n");  // the server's bytes, planted by another user
  plant_as_another_user(dest);
  r = run({"recv", "-r", "--resume", "127.0.0.1:tree", ws.local.string()});
  expect_replaced_as_this_users(r, dest);
  EXPECT_EQ(read_text_file(dest), "echo hi\n");
}

// An eighth re-attack (F1): the server answered a probe with "complete" for any regular file of
// the probed size, so send --resume and send -r --resume left another user's planted copy (0666,
// the same bytes) or a second name of some file "up to date", theirs to rewrite later. The server
// now asks the client's rule: only its own file with one link is a resume base.
TEST_F(PartialStrictModes, TheServerNeverTakesAnotherUsersDestinationAsUpToDate) {
  fs::create_directories(ws.local / "tree");
  write_text_file(ws.local / "tree" / "run.sh", "echo hi\n");
  fs::create_directories(ws.root / "tree");
  const fs::path dest = ws.root / "tree" / "run.sh";
  for (bool tree : {false, true}) {
    fs::remove(dest);
    write_text_file(dest, "echo hi\n");  // the client's bytes, planted by another user
    plant_as_another_user(dest);
    auto r =
        tree ? run({"send", "-r", "--resume", (ws.local / "tree").string(), "127.0.0.1:"})
             : run({"send", "--resume", (ws.local / "tree" / "run.sh").string(), "127.0.0.1:tree/run.sh"});
    SCOPED_TRACE(tree ? "send -r --resume" : "send --resume");
    expect_replaced_as_this_users(r, dest);
    EXPECT_EQ(read_text_file(dest), "echo hi\n");
  }
  // A second name of a file of the server's own: not "up to date" either (the data would go on
  // reaching the other name's reader).
  fs::remove(dest);
  write_text_file(ws.root / "elsewhere.sh", "echo hi\n");
  fs::create_hard_link(ws.root / "elsewhere.sh", dest);
  auto r = run({"send", "--resume", (ws.local / "tree" / "run.sh").string(), "127.0.0.1:tree/run.sh"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.find("up to date"), std::string::npos) << r.out;
  EXPECT_EQ(fs::hard_link_count(dest), 1u);
}

// A thirty-third re-attack (B-N7): another user's partial file planted beside an identical
// destination of the server's own made send --resume send the whole file on every run: the
// passed-over partial file hid the destination. It is judged all the same: up to date, and the
// planted file left alone.
TEST_F(PartialStrictModes, APlantedPartialFileHidesNoUpToDateDestination) {
  write_random_file(ws.local / "aa", 3 << 20, 71);
  fs::create_directories(ws.root / "s6");
  fs::copy_file(ws.local / "aa", ws.root / "s6" / "aa");
  const fs::path partial = ws.root / "s6" / ".aa.aesxfer-partial";
  write_text_file(partial, "planted\n");
  fs::permissions(partial, fs::perms(0666));
  for (const bool tree : {false, true}) {
    auto r = tree ? run({"send", "-r", "--resume", (ws.local / "aa").string(), "127.0.0.1:s6/"})
                  : run({"send", "--resume", (ws.local / "aa").string(), "127.0.0.1:s6/"});
    SCOPED_TRACE(tree ? "send -r --resume" : "send --resume");
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.out.find("up to date"), std::string::npos) << r.describe();
    EXPECT_EQ(read_text_file(partial), "planted\n");
  }
}

// An eighth re-attack (F5): the server's refusal of a planted partial file escaped its name, and
// the client and the log escaped it again ("\x5cx1b"); the probe's refusal also named the
// directory sent to ("up/") instead of the file. Escaped once, where it is shown.
TEST_F(PartialStrictModes, TheServersRefusalNamesTheFileEscapedOnce) {
  const std::string name = "e\x1b[31m.bin";
  write_text_file(ws.local / name, "payload\n");
  fs::create_directories(ws.root / "up");
  const fs::path partial = ws.root / "up" / ("." + name + ".aesxfer-partial");
  write_text_file(partial, "pay");
  fs::permissions(partial, fs::perms(0664));
  auto r = run({"send", "--resume", (ws.local / name).string(), "127.0.0.1:up/"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("not resuming from the partial file up/.e\\x1b[31m.bin.aesxfer-partial"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("x5c"), std::string::npos) << r.err;
  EXPECT_TRUE(server->wait_for_log("partial file up/.e\\\\x1b[31m.bin.aesxfer-partial")) << server->log();
  EXPECT_EQ(server->log().find("x5c"), std::string::npos) << server->log();
  EXPECT_EQ(read_text_file(partial), "pay");
  EXPECT_EQ(read_text_file(ws.root / "up" / name), "payload\n");
}

// A ninth re-attack: a directory, FIFO or symbolic link that another user put where the server's
// partial file goes got "t/f: is a directory", "invalid argument" or "permission denied" (about
// the destination, not naming the partial file), and send -r --resume then left the file out.
// Such a thing is refused as a partial file not to trust: named, with what it is, and a tree
// sends the file whole beside it.
TEST_F(PartialStrictModes, APartialFileThatIsNotAFileIsRefusedByNameAndATreeSendsTheFileWhole) {
  fs::create_directories(ws.local / "t");
  write_text_file(ws.local / "t" / "f", "the file\n");
  const fs::path partial = ws.root / "t" / ".f.aesxfer-partial";
  for (const std::string kind : {"a directory", "a FIFO", "a symbolic link", "a socket"}) {
    SCOPED_TRACE(kind);
    fs::remove_all(ws.root / "t");
    fs::create_directories(ws.root / "t");
    if (kind == "a directory") fs::create_directory(partial);
    if (kind == "a FIFO") {
      ASSERT_EQ(::mkfifo(partial.c_str(), 0600), 0);
    }
    if (kind == "a symbolic link") fs::create_symlink(ws.root / "elsewhere", partial);
    files::UniqueFd sock;
    if (kind == "a socket") {  // a tenth re-attack: "sh/: permission denied", no name, no reason
      sock.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      ASSERT_LT(partial.string().size(), sizeof a.sun_path);
      std::strcpy(a.sun_path, partial.c_str());
      ASSERT_EQ(::bind(sock.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    }
    auto r = run({"send", "--resume", (ws.local / "t" / "f").string(), "127.0.0.1:t/f"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(notes(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("not resuming from the partial file t/.f.aesxfer-partial: " + std::string(kind)),
              std::string::npos)
        << r.err;
    EXPECT_EQ(read_text_file(ws.root / "t" / "f"), "the file\n");
    fs::remove(ws.root / "t" / "f");
    r = run({"send", "-r", "--resume", (ws.local / "t").string(), "127.0.0.1:"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.err.find("sending it whole"), std::string::npos) << r.err;
    EXPECT_EQ(read_text_file(ws.root / "t" / "f"), "the file\n");
    EXPECT_TRUE(fs::exists(fs::symlink_status(partial))) << "the planted thing is left as it was";
    EXPECT_FALSE(fs::exists(ws.root / "elsewhere"));
  }
}

// A tenth re-attack: a file too large to pipeline, whose kept partial file the server refused
// (another user's), was said to go whole but went with the resume flag, met the same refusal,
// and the tree stopped there: the files after it never went.
TEST_F(PartialStrictModes, ALargeFileWithAForeignPartialGoesWholeAndTheTreeGoesOn) {
  fs::create_directories(ws.local / "t");
  write_random_file(ws.local / "t" / "f", 3 << 20, 41);
  write_text_file(ws.local / "t" / "g", "small\n");
  write_random_file(ws.local / "t" / "h", 3 << 20, 42);
  fs::create_directories(ws.root / "t");
  const fs::path partial = ws.root / "t" / ".f.aesxfer-partial";
  plant(Plant::other_owner, ws.local / "t" / "f", partial, {});
  const std::string before = sha256_file(partial);
  auto r = run({"send", "-r", "--resume", (ws.local / "t").string(), "127.0.0.1:"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find(".f.aesxfer-partial: owned by uid 65534"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sending it whole"), std::string::npos) << r.err;
  for (const char* n : {"f", "g", "h"})
    EXPECT_EQ(sha256_file(ws.root / "t" / n), sha256_file(ws.local / "t" / n)) << n;
  EXPECT_EQ(sha256_file(partial), before) << "nothing written through another user's file";
}

// H6 where permissions bind: in a sticky, world-writable directory a third user (uid 65533)
// leaves a 0600 ".p.bin.aesxfer-partial" that neither end's user may open, remove or rename over.
// A server running as nobody, and a client running as nobody, each pass it over (EACCES: it is
// not theirs) and the file arrives; before, every --resume of that name failed for good.
TEST(PartialStrictModesAsAUser, AnUnopenablePartialFileInAStickyDirectoryBlocksNothing) {
  constexpr uid_t kThird = 65533;
  Workspace ws;
  write_random_file(ws.local / "p.bin", 600000, 61);
  // nobody's own client home and key, authorized before the server's home becomes nobody's
  const NobodyClient nobody_client(ws);
  const auto nobody = [&](const std::vector<std::string>& args) { return nobody_client.run(args); };
  hand_over(ws, kNobody);
  // A third user's partial file, 0600, where each end's user may not open, remove or rename it.
  const auto plant_theirs = [](const fs::path& dir) {
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms(01777));
    const fs::path f = dir / ".p.bin.aesxfer-partial";
    write_text_file(f, "theirs\n");
    EXPECT_EQ(::chown(f.c_str(), kThird, kThird), 0);
    fs::permissions(f, fs::perms(0600));
    return f;
  };
  const fs::path drop = ws.root / "drop", inbox = ws.tmp / "inbox";
  const fs::path planted = plant_theirs(drop), theirs = plant_theirs(inbox);
  ServerProcess server(ws.home, ws.root, {}, kNobody);
  const std::string port = std::to_string(server.port());
  auto r =
      run_aesxfer({"send", "--resume", (ws.local / "p.bin").string(), "127.0.0.1:drop/p.bin", "-P", port},
                  client_home(ws));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("not resuming from the partial file drop/.p.bin.aesxfer-partial: owned by uid 65533"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(sha256_file(drop / "p.bin"), sha256_file(ws.local / "p.bin"));
  EXPECT_EQ(read_text_file(planted), "theirs\n");

  r = nobody({"recv", "--resume", "127.0.0.1:drop/p.bin", (inbox / "p.bin").string(), "-P", port});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find(theirs.string() + ": not resuming from this partial file: owned by uid 65533"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(sha256_file(inbox / "p.bin"), sha256_file(ws.local / "p.bin"));
  EXPECT_EQ(read_text_file(theirs), "theirs\n");
  EXPECT_EQ(server.stop(), 0);
}

// A twenty-second re-attack (N2): both ends closed a resumed transfer's partial file, which let its
// lock go, before renaming it into place. In between, another session could lock the same file,
// adopt it and truncate it to its own offset (an ok put left an empty file), or a plain put's
// clean-up could remove it (verified data lost). tests/rename_probe.cpp (LD_PRELOAD) tries the
// lock at each such rename and says whether it was still held; it must be, on both ends.
TEST(PartialLockAtRename, BothEndsRenameAPartialFileWhileStillHoldingItsLock) {
  Workspace ws;
  std::string asan = std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "";
  const std::map<std::string, std::string> probe = {
      {"LD_PRELOAD", AESXFER_RENAME_PROBE},
      {"ASAN_OPTIONS", asan + (asan.empty() ? "" : ":") + "verify_asan_link_order=0"}};
  ServerProcess server(ws.home, ws.root, {}, 0, probe);
  const fs::path src = ws.local / "f.bin";
  write_random_file(src, 300000, 22);
  const std::string port = std::to_string(server.port());
  ProcResult r =
      run_aesxfer({"send", "--resume", "-q", "-P", port, src.string(), "127.0.0.1:f.bin"}, ws.home);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "f.bin"), sha256_file(src));
  std::map<std::string, std::string> env = probe;
  env["AESXFER_HOME"] = ws.home.string();
  r = run_process({AESXFER_BINARY, "recv", "--resume", "-q", "-P", port, "127.0.0.1:f.bin",
                   (ws.local / "back.bin").string()},
                  env, 120);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.local / "back.bin"), sha256_file(src));
  EXPECT_NE(r.err.find("rename_probe: held .back.bin.aesxfer-partial"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rename_probe: free"), std::string::npos) << r.err;
  server.stop();
  EXPECT_NE(server.log().find("rename_probe: held .f.bin.aesxfer-partial"), std::string::npos)
      << server.log();
  EXPECT_EQ(server.log().find("rename_probe: free"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace aesxfer::test
