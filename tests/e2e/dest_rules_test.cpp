// Issue 24, section E: ordinary commands that must not lose data or change what they overwrite.
// E8: a destination written with a trailing slash names a directory that must exist. E11: an
// overwritten file keeps its mode without -p, a new one gets the source's mode less the umask,
// -p gives the source's mode; on both ends, for every way a file is written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
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
    // The directory that is not there is named, as cp names it, not the file that was to go in
    // it (a nineteenth re-attack, N5: "host:iso/a.txt: not a directory").
    const std::string asked = args.back();
    EXPECT_NE(r.err.find(asked + ": not a directory"), std::string::npos) << r.describe();
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
// A fifty-sixth re-attack's note: `send -r TREE host:/dev/null` was told "absolute paths are
// refused (... /dev/null and /dev/zero are the only exceptions)", which said both. A tree is no
// file for the sink: "not a directory", exit 1, nothing written.
TEST_F(DestRules, ATreeSentToTheSinkIsNotADirectory) {
  fs::create_directories(ws.local / "t2");
  write_text_file(ws.local / "t2" / "a", "a");
  auto r = run({"send", "-r", "-q", (ws.local / "t2").string(), "127.0.0.1:/dev/null"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("/dev/null: not a directory (only a file can be sent to /dev/null)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("are the only exceptions"), std::string::npos) << r.err;
}

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

// The source's side (a twelfth re-attack, G8): recv host:f/ names a directory f on the server, so a
// file f is "not a directory", exit 1, nothing written, whichever way the file would come
// (alone, with --resume, large, several sources); cp and scp say the same. A refused get with
// --resume leaves no empty partial file behind either.
TEST_F(DestRules, RecvFromATrailingSlashNeedsADirectory) {
  write_text_file(ws.root / "a.txt", "a\n");
  write_random_file(ws.root / "big.bin", 3 << 20, 1);
  const std::vector<std::vector<std::string>> cases = {
      {"recv", "127.0.0.1:a.txt/", (ws.local / "x").string()},
      {"recv", "127.0.0.1:a.txt/.", (ws.local / "x").string()},
      {"recv", "127.0.0.1:big.bin/", (ws.local / "x").string()},
      {"recv", "--resume", "127.0.0.1:a.txt/", (ws.local / "x").string()},
      {"recv", "127.0.0.1:a.txt/", "127.0.0.1:big.bin", ws.local.string()},
  };
  for (const auto& args : cases) {
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_TRUE(r.err.find("a.txt/: not a directory") != std::string::npos ||
                r.err.find("a.txt/.: not a directory") != std::string::npos ||
                r.err.find("big.bin/: not a directory") != std::string::npos)
        << r.describe();
    EXPECT_FALSE(fs::exists(ws.local / "x")) << r.describe();
    EXPECT_FALSE(fs::exists(ws.local / "a.txt")) << r.describe();
    EXPECT_TRUE(temp_debris(ws.local).empty());
  }
}

// A name the server cannot store is named in the refusal, not only the directory it was to go in
// (a twelfth re-attack, G6: "127.0.0.1:dd: invalid file name" for a file named "nl\nx").
TEST_F(DestRules, ARefusedNameIsNamed) {
  write_text_file(ws.local / "nl\nx", "d\n");
  fs::create_directories(ws.root / "dd");
  auto r = run({"send", (ws.local / "nl\nx").string(), "127.0.0.1:dd"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("nl\\x0ax: invalid file name"), std::string::npos) << r.describe();
  EXPECT_TRUE(fs::is_empty(ws.root / "dd"));
}

// A thirteenth re-attack (H3): a file named as the server names its own temporary and partial
// files was stored, listed and served, then removed by the server's sweep once old enough (with -p
// at the next sweep). Such a name is refused at the put, on its own and in a tree (the rest goes).
TEST_F(DestRules, TheServersOwnNameShapesAreRefused) {
  const fs::path tree = ws.local / "sw";
  fs::create_directories(tree);
  write_text_file(tree / ".db.aesxfer-tmp-Q1w2E3r4T5", "precious backup\n");
  write_text_file(tree / ".notes.aesxfer-partial", "keep me too\n");
  write_text_file(tree / "plain.txt", "plain\n");
  fs::create_directories(tree / ".a.aesxfer-partial");  // a directory so named too (J3)
  write_text_file(tree / ".a.aesxfer-partial" / "f", "in\n");
  auto one = run({"send", (tree / ".notes.aesxfer-partial").string(), "127.0.0.1:"});
  EXPECT_EQ(one.exit_code, 1) << one.describe();
  EXPECT_NE(one.err.find("the shape the server keeps for its own temporary and partial files"),
            std::string::npos)
      << one.describe();
  auto r = run({"send", "-r", "-p", tree.string(), "127.0.0.1:"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "sw" / "plain.txt"), "plain\n");
  EXPECT_FALSE(fs::exists(ws.root / "sw" / ".db.aesxfer-tmp-Q1w2E3r4T5"));
  EXPECT_FALSE(fs::exists(ws.root / "sw" / ".notes.aesxfer-partial"));
  EXPECT_FALSE(fs::exists(ws.root / ".notes.aesxfer-partial"));
  EXPECT_FALSE(fs::exists(ws.root / "sw" / ".a.aesxfer-partial"));
}

// The client's side (a fourteenth re-attack, J2): a listed name of those shapes (a server's root
// may hold one put there by other means; a server before protocol rule 3.7's leaves them in) is
// skipped with a line, never written where recv -r --resume would take it for a's partial file and
// rename it away. A server lists such a directory (here the case of a hostile one), never a file.
TEST_F(DestRules, RecvTreeSkipsTheReservedNameShapes) {
  fs::create_directories(ws.root / "t" / ".d.aesxfer-partial");
  write_text_file(ws.root / "t" / "a", "REAL-A\n");
  write_text_file(ws.root / "t" / ".d.aesxfer-partial" / "x", "inside\n");
  for (bool resume : {false, true}) {
    std::vector<std::string> args{"recv", "-r", "-q", "127.0.0.1:t", (ws.local / "o").string()};
    if (resume) args.push_back("--resume");
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("t/.d.aesxfer-partial: a name of the shape aesxfer keeps for its own partial and "
                         "temporary files; skipped with all below it"),
              std::string::npos)
        << r.describe();
    EXPECT_EQ(read_text_file(ws.local / "o" / "a"), "REAL-A\n");
    EXPECT_FALSE(fs::exists(ws.local / "o" / ".d.aesxfer-partial"));
  }
  // Several sources, one of them the root: its contents go into DEST under names no check can
  // know beforehand, so it goes alone (J1).
  fs::create_directories(ws.local / "d");
  auto r = run({"recv", "-r", "127.0.0.1:.", "127.0.0.1:t", (ws.local / "d").string()});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("puts the server's whole root into DEST"), std::string::npos) << r.describe();
  EXPECT_TRUE(fs::is_empty(ws.local / "d"));
}

// A twenty-second re-attack (N2b): the server listed its own temporary file of an upload in
// progress and the partial files it keeps for --resume, and every recv -r of such a directory
// failed on them ("a name of the shape aesxfer keeps ..."), exit 1. They are left out of listings
// (PROTOCOL.md 3.7): the tree arrives whole, exit 0, nothing said.
TEST_F(DestRules, RecvTreeOfADirectoryOthersUploadIntoSucceeds) {
  fs::create_directories(ws.root / "busy");
  write_text_file(ws.root / "busy" / "real.txt", "REAL\n");
  for (const char* own : {".up.bin.aesxfer-tmp-Q1w2E3r4T5", ".kept.bin.aesxfer-partial"}) {
    write_text_file(ws.root / "busy" / own, "the server's own\n");
    fs::permissions(ws.root / "busy" / own, fs::perms(0600));
  }
  auto r = run({"recv", "-r", "--json", "127.0.0.1:busy", (ws.local / "o").string()});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out.find("\"error\""), std::string::npos) << r.out;
  EXPECT_EQ(read_text_file(ws.local / "o" / "real.txt"), "REAL\n");
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(ws.local / "o")) ++n;
  EXPECT_EQ(n, 1u);
}

// A thirteenth re-attack (H1): several sources stored under one name in one directory had the
// second overwrite the first, each "verified", exit 0. Refused before anything moves (cp refuses
// the second), for send, recv and trees; the line names both sources.
// A fifteenth re-attack (K1): send -r stored the tree's file "report" inside a server directory
// named "report" (as t5/report/report) and said ok, and --resume then called it up to date. A
// directory where a tree's file goes is refused by name, as recv -r refuses one locally, for a
// pipelined small file, a large one, and the probes of --resume; nothing goes inside it.
TEST_F(DestRules, ATreesFileNeverGoesIntoADirectoryOfItsName) {
  const fs::path t = ws.local / "t5";
  fs::create_directories(t / "docs");
  write_text_file(t / "report", "new report\n");
  write_random_file(t / "docs" / "big.bin", 3 << 20, 7);
  write_text_file(t / "docs" / "x", "x\n");
  for (const char* d : {"e5/t5/report", "e5/t5/docs/big.bin"}) {
    fs::create_directories(ws.root / d);
    write_text_file(ws.root / d / "old.txt", "old\n");
  }
  for (bool resume : {false, true}) {
    SCOPED_TRACE(resume ? "send -r --resume" : "send -r");
    std::vector<std::string> args{"send", "-r", "-q", t.string(), "127.0.0.1:e5"};
    if (resume) args.insert(args.begin() + 1, "--resume");
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("e5/t5/report: is a directory"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("e5/t5/docs/big.bin: is a directory"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("up to date"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(ws.root / "e5" / "t5" / "report" / "report"));
    EXPECT_FALSE(fs::exists(ws.root / "e5" / "t5" / "docs" / "big.bin" / "big.bin"));
    EXPECT_EQ(read_text_file(ws.root / "e5" / "t5" / "docs" / "x"), "x\n");
    EXPECT_EQ(read_text_file(ws.root / "e5" / "t5" / "report" / "old.txt"), "old\n");
  }
  // --json: each failed file has its object, the large one too, named (a sixteenth re-attack, L3).
  auto r = run({"send", "-r", "-q", "--json", t.string(), "127.0.0.1:e5"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  for (const std::string f : {"t5/report", "t5/docs/big.bin"}) {
    const size_t at = r.out.find("\"file\":\"" + (ws.local / f).string() + "\"");
    ASSERT_NE(at, std::string::npos) << f << "\n" << r.out;
    EXPECT_NE(r.out.find("is a directory", at), std::string::npos) << r.out;
  }
}

// A sixteenth re-attack (L6): in send -r, one path over the protocol's 4096 bytes ended the whole
// tree with an unnamed error (the request could not be encoded) and every file after it stayed
// behind. That directory is named and left out with all below it; the rest arrives.
TEST_F(DestRules, ATreePathOverTheLimitFailsAloneAndIsNamed) {
  // The server's place is long (two 250-byte names), the local tree 18 levels of 200-byte names:
  // every local path stays under PATH_MAX, the 18th level's path on the server does not.
  const std::string base = std::string(250, 'x') + "/" + std::string(250, 'y');
  fs::create_directories(ws.root / base);
  const fs::path src = ws.local / "deep";
  fs::path d = src;
  for (int i = 0; i < 18; ++i) d /= std::string(200, 'd');
  fs::create_directories(d);
  write_text_file(d / "f", "x\n");
  write_text_file(src / "aa", "a\n");
  write_text_file(src / "top", "t\n");
  write_text_file(src / "zz", "z\n");
  auto r = run({"send", "-r", "-q", src.string(), "127.0.0.1:" + base});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  // Named by its head and its tail: a line over about 1 KB keeps those (app::bounded_line).
  EXPECT_NE(r.err.find("aesxfer: " + d.string().substr(0, 300)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(d.string().substr(d.string().size() - 200) + ": its path on the server would be "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("over the protocol's 4096; skipped with all below it"), std::string::npos) << r.err;
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  for (const char* f : {"aa", "top", "zz"}) EXPECT_TRUE(fs::exists(ws.root / base / "deep" / f)) << f;
}

// Several files sent to a directory that is not there: one line for the destination, and with
// --json one object per file (a twenty-first re-attack, N1: stdout was empty).
TEST_F(DestRules, SeveralFilesToNoDirectoryEachGetAnObject) {
  write_text_file(ws.local / "f5", "5\n");
  write_text_file(ws.local / "f6", "6\n");
  auto r = run({"send", "--json", (ws.local / "f5").string(), (ws.local / "f6").string(), "127.0.0.1:d/"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("127.0.0.1:d/: not a directory"), std::string::npos) << r.err;
  const auto lines = nonempty_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (size_t i = 0; i < 2; ++i) {
    auto o = parse_flat_json(lines[i]);
    ASSERT_TRUE(o) << lines[i];
    EXPECT_EQ(fs::path((*o)["file"]).filename(), i == 0 ? "f5" : "f6");
    EXPECT_NE((*o)["error"].find("not sent: 127.0.0.1:d/: not a directory"), std::string::npos) << lines[i];
  }
  EXPECT_FALSE(fs::exists(ws.root / "d"));
}

// A UNIX socket in the root is "not a regular file", as a FIFO or a device is (a twenty-first
// re-attack, N4: "no such device or address").
TEST_F(DestRules, ASocketOnTheServerIsNotARegularFile) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  const std::string path = (ws.root / "sock").string();
  ASSERT_LT(path.size(), sizeof sa.sun_path);
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  auto r = run({"recv", "127.0.0.1:sock", (ws.local / "x").string()});
  ::close(s);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("127.0.0.1:sock: not a regular file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.local / "x"));
}

// recv of several sources: a source that fails has its --json object too (L3).
TEST_F(DestRules, RecvOfSeveralSourcesGivesAFailedOneItsJsonObject) {
  write_text_file(ws.root / "ok1", "ok\n");
  write_random_file(ws.root / "big", 3 << 20, 9);
  fs::create_directories(ws.root / "bigdir");
  fs::create_directories(ws.local / "d");
  auto r = run({"recv", "-q", "--json", "127.0.0.1:ok1", "127.0.0.1:nonexist", "127.0.0.1:bigdir",
                "127.0.0.1:big", (ws.local / "d").string()});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  for (const std::string f : {"nonexist", "bigdir"}) {
    const size_t at = r.out.find("\"file\":\"" + f + "\"");
    ASSERT_NE(at, std::string::npos) << f << "\n" << r.out;
    EXPECT_NE(r.out.find("\"error\":", at), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("\"file\":\"big\""), std::string::npos) << r.out;
  EXPECT_EQ(read_text_file(ws.local / "d" / "ok1"), "ok\n");
  // One object per source, in the order of the command line, as the files are named there (an
  // eighteenth re-attack's leftover: the failed ones came first).
  std::vector<std::string> order;
  for (const auto& l : nonempty_lines(r.out)) order.push_back(l.substr(0, l.find(',')));
  EXPECT_EQ(order, (std::vector<std::string>{"{\"file\":\"ok1\"", "{\"file\":\"nonexist\"",
                                             "{\"file\":\"bigdir\"", "{\"file\":\"big\""}))
      << r.out;
}

// A thirty-sixth re-attack (B6): send -r of a tree holding names of aesxfer's own shapes (a
// partial file that a recv --resume kept there, a directory so named) had each refused by the
// server and the files below such a directory failed one by one with "not a directory" (four
// lines for one directory). Each is skipped in one line, as recv -r skips them, the rest of the
// tree arrives, and the command fails at the end.
TEST_F(DestRules, SendTreeSkipsNamesOfAesxfersOwnShapesInOneLine) {
  const fs::path t = ws.local / "dl";
  fs::create_directories(t / ".d.aesxfer-partial" / "sub");
  write_text_file(t / ".d.aesxfer-partial" / "in1", "1\n");
  write_text_file(t / ".d.aesxfer-partial" / "sub" / "in2", "2\n");
  write_text_file(t / ".big.iso.aesxfer-partial", "partial\n");
  write_text_file(t / "ok", "ok\n");
  auto r = run({"send", "-r", t.string(), "127.0.0.1:"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "dl" / "ok"), "ok\n");
  EXPECT_FALSE(fs::exists(ws.root / "dl" / ".big.iso.aesxfer-partial"));
  EXPECT_FALSE(fs::exists(ws.root / "dl" / ".d.aesxfer-partial"));
  const std::string shape =
      ": a name of the shape aesxfer keeps for its own partial and temporary files; skipped";
  EXPECT_NE(r.err.find((t / ".big.iso.aesxfer-partial").string() + shape + "\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((t / ".d.aesxfer-partial").string() + shape + " with all below it"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("not a directory"), std::string::npos) << r.err;
  size_t lines = 0;
  for (const auto& l : nonempty_lines(r.err)) lines += l.find(shape) != std::string::npos;
  EXPECT_EQ(lines, 2u) << r.err;
}

// A thirty-sixth re-attack (B8): a path through a directory of aesxfer's own name shapes was
// stored and served, though recv -r skips such a directory and could never fetch it back. The
// server refuses it as it refuses the name itself: put into it (as DEST or through it), get and
// mkdir through it.
TEST_F(DestRules, APathThroughAReservedDirectoryIsRefused) {
  fs::create_directories(ws.root / ".dd.aesxfer-partial");
  write_text_file(ws.root / ".dd.aesxfer-partial" / "old", "old\n");
  write_text_file(ws.local / "tiny", "tiny\n");
  for (const char* dest : {"127.0.0.1:.dd.aesxfer-partial/x", "127.0.0.1:.dd.aesxfer-partial/sub/x"}) {
    auto r = run({"send", "-q", (ws.local / "tiny").string(), dest});
    EXPECT_EQ(r.exit_code, 1) << dest << "\n" << r.describe();
    EXPECT_NE(r.err.find(".dd.aesxfer-partial: a name of the shape the server keeps for its own"),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(ws.root / ".dd.aesxfer-partial" / "x"));
  auto r = run({"recv", "-q", "127.0.0.1:.dd.aesxfer-partial/old", (ws.local / "got").string()});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_FALSE(fs::exists(ws.local / "got"));
}

// A thirty-sixth re-attack (B7): each send of several files asks whether DEST is a directory,
// and the server logged the answer as a refusal ('result="refused: tree: is a directory"').
TEST_F(DestRules, TheServerLogsAStatOfADirectoryAsItsAnswer) {
  fs::create_directories(ws.root / "tree");
  write_text_file(ws.local / "a", "a\n");
  write_text_file(ws.local / "b", "b\n");
  auto r = run({"send", "-q", (ws.local / "a").string(), (ws.local / "b").string(), "127.0.0.1:tree"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_TRUE(server->wait_for_log("op=stat file=\"tree\" result=\"a directory\"")) << server->log();
  EXPECT_EQ(server->log().find("refused: tree: is a directory"), std::string::npos) << server->log();
}

// A thirty-sixth re-attack (B4): recv --json of a source that failed into standard output gave
// no object (a successful one had its object on standard error). The failed one's object goes to
// standard error too, and nothing to standard output.
TEST_F(DestRules, RecvToStandardOutputGivesAFailedSourceItsJsonObject) {
  auto r = run({"recv", "-q", "--json", "127.0.0.1:nonexist", "-"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.out, "");
  bool object = false;
  for (const auto& l : nonempty_lines(r.err)) {
    if (l.empty() || l[0] != '{') continue;
    const auto j = nlohmann::json::parse(l);
    object =
        j.value("file", "") == "nonexist" && j.value("error", "") != "" && j.value("verified", true) == false;
  }
  EXPECT_TRUE(object) << r.err;
}

// A fifteenth re-attack (K5): recv HOST:f HOST:x wrote a local file named "HOST:x", exit 0 (scp
// would copy between the servers). Refused as a usage error; ./HOST:x names the local file.
TEST_F(DestRules, RecvToHostPathIsRefused) {
  write_text_file(ws.root / "sf", "server\n");
  // Run in ws.local, where the old client wrote the file.
  auto r = run_process({"/bin/sh", "-c", "cd \"$0\" && exec \"$1\" recv 127.0.0.1:sf 127.0.0.1:x -P \"$2\"",
                        ws.local.string(), AESXFER_BINARY, std::to_string(server->port())},
                       {{"AESXFER_HOME", ws.home.string()}});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("the destination 127.0.0.1:x is HOST:PATH"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.local / "127.0.0.1:x"));
  const fs::path local = ws.local / "127.0.0.1:y";
  r = run({"recv", "-q", "127.0.0.1:sf", local.string()});  // a path with a slash before the colon
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(local), "server\n");
}

TEST_F(DestRules, SourcesOfOneNameAreRefusedBeforeAnythingMoves) {
  for (const char* d : {"a/t", "b/t"}) fs::create_directories(ws.root / d);
  write_text_file(ws.root / "a" / "x", "A\n");
  write_text_file(ws.root / "b" / "x", "B\n");
  write_text_file(ws.root / "a" / "t" / "f", "A\n");
  write_text_file(ws.root / "b" / "t" / "f", "B\n");
  for (const char* d : {"la", "lb", "d"}) fs::create_directories(ws.local / d);
  write_text_file(ws.local / "la" / "y", "a\n");
  write_text_file(ws.local / "lb" / "y", "b\n");
  const std::vector<std::vector<std::string>> cases = {
      {"recv", "127.0.0.1:a/x", "127.0.0.1:b/x", (ws.local / "d").string()},
      {"recv", "-r", "127.0.0.1:a/t", "127.0.0.1:b/t/", (ws.local / "d").string()},
      {"send", (ws.local / "la" / "y").string(), (ws.local / "lb" / "y").string(), "127.0.0.1:a"},
      {"send", "-r", (ws.local / "la").string(), (ws.local / "lb" / ".." / "la" / ".").string(),
       "127.0.0.1:b"},
      // "-" is stored as "stdin": a file of that name beside it (a sixteenth re-attack, L4)
      {"send", (ws.local / "la" / "stdin").string(), "-", "127.0.0.1:a"},
  };
  write_text_file(ws.local / "la" / "stdin", "a file\n");
  for (const auto& args : cases) {
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(r.err.find("the second over the first; nothing was moved"), std::string::npos) << r.describe();
    EXPECT_TRUE(fs::is_empty(ws.local / "d")) << r.describe();
  }
  EXPECT_FALSE(fs::exists(ws.root / "a" / "y"));
  EXPECT_FALSE(fs::exists(ws.root / "a" / "stdin"));
  EXPECT_FALSE(fs::exists(ws.root / "b" / "la"));
}

// ---- E11 -----------------------------------------------------------------------------------------

class ModeRules : public ServerTest {
 protected:
  // For a small (pipelined) and a large file, plain and with --resume: `from` (0664) overwrites
  // a 0600 file in `to_dir` with `verb` ("send": local to server, "recv": server to local), which
  // keeps 0600; a new file gets 0664 less the umask (the server's too: it inherits the test's);
  // -p gives 0664.
  void check(const std::string& verb, const fs::path& from_dir, const fs::path& to_dir) {
    const unsigned um = process_umask();
    write_text_file(from_dir / "small.txt", "new contents\n");
    write_random_file(from_dir / "big.bin", 3 << 20, 2);
    for (const std::string name : {"small.txt", "big.bin"}) {
      fs::permissions(from_dir / name, fs::perms(0664));
      for (bool resume : {false, true}) {
        SCOPED_TRACE(verb + " " + name + (resume ? " --resume" : ""));
        const fs::path there = to_dir / name;
        std::vector<std::string> args = {verb, "-q", (ws.local / name).string(), "127.0.0.1:" + name};
        if (verb == "recv") args = {verb, "-q", "127.0.0.1:" + name, (ws.local / name).string()};
        if (resume) args.push_back("--resume");
        struct Case {
          bool existing, preserve;
          unsigned want;
        };
        for (Case c : {Case{true, false, 0600u}, Case{false, false, 0664u & ~um}, Case{true, true, 0664u}}) {
          if (c.preserve) args.push_back("-p");
          if (c.existing) {  // old contents: else --resume finds it whole and moves nothing
            write_text_file(there, "old\n");
            fs::permissions(there, fs::perms(0600));
          }
          auto r = run(args);
          ASSERT_EQ(r.exit_code, 0) << r.describe();
          EXPECT_EQ(sha256_file(there), sha256_file(from_dir / name));
          EXPECT_EQ(mode_of(there), c.want)
              << (c.existing ? "overwritten" : "new") << (c.preserve ? ", -p" : "");
          fs::remove(there);
        }
      }
    }
  }
};

// An overwritten file that another user owned (planted 0666 in a shared directory) does not lend
// its mode to the data: the new-file rule applies, both ways.
TEST_F(ModeRules, AnotherUsersFileLendsNoMode) {
  if (::geteuid() != 0) GTEST_SKIP() << "planting another user's file needs root";
  const unsigned um = process_umask();
  for (const std::string verb : {"send", "recv"}) {
    SCOPED_TRACE(verb);
    const fs::path from = (verb == "send" ? ws.local : ws.root) / "s.txt";
    const fs::path there = (verb == "send" ? ws.root : ws.local) / "s.txt";
    write_text_file(from, "secret\n");
    fs::permissions(from, fs::perms(0640));
    // Planted as another user's file, and as a hard link to a 0666 file of this user's.
    const fs::path shared = ws.tmp / "shared-0666";
    for (bool link : {false, true}) {
      SCOPED_TRACE(link ? "hard link" : "other owner");
      if (link) {
        write_text_file(shared, "mine, for everyone\n");
        fs::permissions(shared, fs::perms(0666));
        fs::create_hard_link(shared, there);
      } else {
        write_text_file(there, "planted\n");
        fs::permissions(there, fs::perms(0666));
        ASSERT_EQ(::chown(there.c_str(), 65534, 65534), 0);
      }
      auto r = verb == "send" ? run({"send", "-q", from.string(), "127.0.0.1:s.txt"})
                              : run({"recv", "-q", "127.0.0.1:s.txt", there.string()});
      ASSERT_EQ(r.exit_code, 0) << r.describe();
      EXPECT_EQ(read_text_file(there), "secret\n");
      EXPECT_EQ(mode_of(there), 0640u & ~um);
      struct stat st {};
      ASSERT_EQ(::stat(there.c_str(), &st), 0);
      EXPECT_EQ(st.st_uid, ::geteuid());
      EXPECT_EQ(st.st_nlink, 1u);
      if (link) {
        EXPECT_EQ(read_text_file(shared), "mine, for everyone\n") << "never written through the link";
      }
      fs::remove(there);
      fs::remove(shared);
    }
  }
}

// A thirty-second re-attack (B-N3): a file of this user's own with a second hard link (a
// snapshot tree, cp -al) lent no mode, so a 0600 file became 0644. It gets the bits both modes
// allow: never wider than the file it replaces, nor than a new file would be.
TEST_F(ModeRules, AHardLinkedFileOfOnesOwnNeverGetsWider) {
  const unsigned um = process_umask();
  for (const std::string verb : {"send", "recv"}) {
    SCOPED_TRACE(verb);
    const fs::path from = (verb == "send" ? ws.local : ws.root) / "h.txt";
    const fs::path there = (verb == "send" ? ws.root : ws.local) / "h.txt";
    write_text_file(from, "new\n");
    fs::permissions(from, fs::perms(0644));
    write_text_file(there, "old secret\n");
    fs::permissions(there, fs::perms(0600));
    const fs::path snapshot = there.parent_path() / "h.txt.snapshot";
    fs::create_hard_link(there, snapshot);
    auto r = verb == "send" ? run({"send", "-q", from.string(), "127.0.0.1:h.txt"})
                            : run({"recv", "-q", "127.0.0.1:h.txt", there.string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(read_text_file(there), "new\n");
    EXPECT_EQ(mode_of(there), 0600u & 0644u & ~um);
    EXPECT_EQ(read_text_file(snapshot), "old secret\n") << "never written through the link";
    EXPECT_EQ(mode_of(snapshot), 0600u);
    fs::remove(there);
    fs::remove(snapshot);
  }
}

// send: on the server (pipelined, a single large put, a resumed put).
TEST_F(ModeRules, SendKeepsTheModeOfWhatItOverwrites) { check("send", ws.local, ws.root); }

// recv: on the client (a single get, a large one, a resumed one, recv -r into a tree).
TEST_F(ModeRules, RecvKeepsTheModeOfWhatItOverwrites) {
  check("recv", ws.root, ws.local);
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

// A forty-seventh re-attack (C47-2): recv -r gave the directories it made the server's mode as it
// was, 0000 or 0555 included, so the copy could not be read, removed nor received into again. The
// user keeps rwx on them, with and without -p; the rest of the mode is the server's.
TEST_F(ModeRules, RecvTreeKeepsTheUsersRwxOnTheDirectoriesItMakes) {
  const unsigned um = process_umask();
  fs::create_directories(ws.root / "ro" / "locked");
  write_text_file(ws.root / "ro" / "locked" / "f", "f\n");
  fs::permissions(ws.root / "ro" / "locked", fs::perms(0555));
  fs::permissions(ws.root / "ro", fs::perms(0555));
  for (bool preserve : {false, true}) {
    SCOPED_TRACE(preserve ? "-p" : "no -p");
    const fs::path dest = ws.local / (preserve ? "p" : "n");
    fs::create_directories(dest);
    std::vector<std::string> args = {"recv", "-r", "-q", "127.0.0.1:ro", dest.string()};
    if (preserve) args.push_back("-p");
    auto r = run(args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(read_text_file(dest / "ro" / "locked" / "f"), "f\n");
    const unsigned want = preserve ? 0755u : (0555u & ~um) | 0700u;
    EXPECT_EQ(mode_of(dest / "ro"), want);
    EXPECT_EQ(mode_of(dest / "ro" / "locked"), want);
    // Received again into the same copy: it can be, and gets the update.
    fs::permissions(ws.root / "ro" / "locked", fs::perms(0755));
    write_text_file(ws.root / "ro" / "locked" / "g", "g\n");
    r = run(args);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(read_text_file(dest / "ro" / "locked" / "g"), "g\n");
    fs::remove(ws.root / "ro" / "locked" / "g");
    fs::permissions(ws.root / "ro" / "locked", fs::perms(0555));
  }
  fs::permissions(ws.root / "ro" / "locked", fs::perms(0755));
  fs::permissions(ws.root / "ro", fs::perms(0755));
}

// A seventeenth re-attack (M1): send -r -p gave the tree's modes and times to server directories
// that were there before: a private 0700 directory (or, with the server as root, another user's)
// became 0777. Only the directories the command created get them; one that existed keeps its own.
TEST_F(ModeRules, SendTreePreserveLeavesExistingDirectoriesAlone) {
  const fs::path there = ws.root / "pd";
  fs::create_directories(there / "old");
  fs::permissions(there, fs::perms(0700));
  fs::permissions(there / "old", fs::perms(0700));
  const fs::path src = ws.local / "pd";
  for (const char* d : {"old", "new"}) {
    fs::create_directories(src / d);
    write_text_file(src / d / "f", "f\n");
    fs::permissions(src / d, fs::perms(0777));
  }
  fs::permissions(src, fs::perms(0777));
  const auto mtime = [](const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mtim.tv_sec;
  };
  for (const fs::path& p : {src, src / "old", src / "new"}) {
    const timespec t[2] = {{946684800, 0}, {946684800, 0}};  // 2000-01-01
    ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, 0), 0);
  }
  auto r = run({"send", "-r", "-p", "-q", src.string(), "127.0.0.1:"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(there / "new" / "f"), "f\n");
  EXPECT_EQ(mode_of(there), 0700u);
  EXPECT_EQ(mode_of(there / "old"), 0700u);
  EXPECT_NE(mtime(there), 946684800) << "an existing directory took the source's time";
  EXPECT_NE(mtime(there / "old"), 946684800) << "an existing directory took the source's time";
  EXPECT_EQ(mode_of(there / "new"), 0777u) << "a directory the command made gets the source's mode";
  EXPECT_EQ(mtime(there / "new"), 946684800);
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// A thirty-seventh re-attack (B1): a tree from a server wrote into this client's own
// $AESXFER_HOME (recv -r host:.config ~ with the home at ~/.config/aesxfer), so the server chose
// its identity, known_hosts and config. That directory is skipped with all below it, named, and
// the command fails at the end; the rest of the tree arrives. A tree whose top is the home is
// refused.
TEST_F(DestRules, ATreeFromAServerNeverWritesIntoThisClientsHome) {
  const fs::path cfg = ws.root / "cfg";
  fs::create_directories(cfg / "aesxfer");
  write_text_file(cfg / "aesxfer" / "known_hosts", "planted\n");
  write_text_file(cfg / "aesxfer" / "config", "Host *\n  Port 1\n");
  write_text_file(cfg / "other", "kept\n");
  const fs::path home = ws.local / "cfg" / "aesxfer";
  fs::create_directories(home);
  ASSERT_EQ(::chmod(home.c_str(), 0700), 0);
  for (const char* f : {"id_ed25519", "id_ed25519.pub"}) fs::copy_file(ws.home / f, home / f);
  auto r = run_aesxfer(
      {"recv", "-r", "127.0.0.1:cfg", ws.local.string(), "-P", std::to_string(server->port())}, home);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find(home.string() + ": this client's own aesxfer home ($AESXFER_HOME)"), std::string::npos)
      << r.err;
  const std::string pins = read_text_file(home / "known_hosts");  // this command's own pin, not the server's
  EXPECT_NE(pins.find("127.0.0.1:"), std::string::npos) << pins;
  EXPECT_FALSE(fs::exists(home / "config"));
  EXPECT_EQ(read_text_file(ws.local / "cfg" / "other"), "kept\n");
  // The home as the tree's top.
  r = run_aesxfer({"recv", "-r", "127.0.0.1:cfg/aesxfer", (ws.local / "cfg").string(), "-P",
                   std::to_string(server->port())},
                  home);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("this client's own aesxfer home"), std::string::npos) << r.err;
  EXPECT_EQ(read_text_file(home / "known_hosts"), pins);
  EXPECT_FALSE(fs::exists(home / "config"));
  // The home, or a directory in it, as DEST (a forty-second re-attack: DEST/config made there
  // stopped every later command at "config file ... is not a regular file"): refused before
  // anything is made, with the tree as the top (DEST/NAME) and as DEST itself.
  fs::create_directories(ws.root / "config");
  write_text_file(ws.root / "config" / "f", "x\n");
  fs::create_directories(home / "sub");
  for (const fs::path& dest : {home, home / "sub", home / "sub" / "new"}) {
    SCOPED_TRACE(dest.string());
    r = run_aesxfer({"recv", "-r", "127.0.0.1:config", dest.string(), "-P", std::to_string(server->port())},
                    home);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("this client's own aesxfer home ($AESXFER_HOME), or a directory in it"),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(home / "config"));
  EXPECT_FALSE(fs::exists(home / "sub" / "config"));
  EXPECT_FALSE(fs::exists(home / "sub" / "new"));
  // Above the home is not in it: the tree arrives.
  r = run_aesxfer(
      {"recv", "-r", "127.0.0.1:config", (ws.local / "cfg").string(), "-P", std::to_string(server->port())},
      home);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.local / "cfg" / "config" / "f"), "x\n");
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// A thirty-seventh re-attack (A1): a directory another user planted under a tree's name in a
// sticky directory others can write to took the tree, on either end (recv -r into /tmp; send -r
// into a served 1777 directory, logged "ok (it was there)"), and that user read it. Refused with
// the owner named, nothing written into it.
TEST_F(DestRules, ATreeIsNeverWrittenIntoADirectoryAnotherUserPlantedInASharedOne) {
  fs::create_directories(ws.root / "priv");
  write_text_file(ws.root / "priv" / "doc", "secret\n");
  const fs::path share = ws.local / "share";
  fs::create_directories(share);
  ASSERT_EQ(::chmod(share.c_str(), 01777), 0);
  plant_directory(share / "priv");
  auto r = run({"recv", "-r", "127.0.0.1:priv", share.string()});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(
      r.err.find((share / "priv").string() +
                 ": a directory owned by uid 65534 in a sticky directory others can write to: a tree is "
                 "not written into it"),
      std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(share / "priv" / "doc"));
  // Nor into one planted under the DEST typed as a name (a thirty-eighth re-attack, B-F1: recv
  // host:f /tmp/copy and recv -r host:tree /tmp/copy wrote into nobody's /tmp/copy, exit 0).
  plant_directory(share / "copy");
  for (const auto& args : std::vector<std::vector<std::string>>{{"recv", "127.0.0.1:priv/doc"},
                                                                {"recv", "-r", "127.0.0.1:priv"}}) {
    std::vector<std::string> a = args;
    a.push_back((share / "copy").string());
    r = run(a);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(
        r.err.find((share / "copy").string() +
                   ": a directory owned by uid 65534 in a sticky directory others can write to: nothing "
                   "is written into it"),
        std::string::npos)
        << r.err;
  }
  // Nor below it, named with a trailing "/" or as a directory on the way (a thirty-ninth
  // re-attack, B-F5: recv -r host:tree /tmp/backup/today wrote into nobody's /tmp/backup).
  const std::string below =
      " in a sticky directory others can write to is on its way: nothing is written into or below it";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"recv", "127.0.0.1:priv/doc", (share / "copy").string() + "/"},
           {"recv", "127.0.0.1:priv/doc", (share / "copy" / "doc.copy").string()},
           {"recv", "-r", "127.0.0.1:priv", (share / "copy").string() + "/"},
           {"recv", "-r", "127.0.0.1:priv", (share / "copy" / "today").string()},
           // ...with --resume too (a fortieth re-attack, A-F2: its own walk had no such rule)
           {"recv", "--resume", "127.0.0.1:priv/doc", (share / "copy" / "doc.r").string()},
           {"recv", "--resume", "--streams", "2", "127.0.0.1:priv/doc",
            (share / "copy" / "doc.s").string()}}) {
    r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find(": a directory owned by uid 65534" + below), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::is_empty(share / "copy"));

  // The server's side: send -r into a served sticky directory where the name is another user's.
  fs::create_directories(ws.root / "pub");
  ASSERT_EQ(::chmod((ws.root / "pub").c_str(), 01777), 0);
  plant_directory(ws.root / "pub" / "l1");
  fs::create_directories(ws.local / "l1");
  write_text_file(ws.local / "l1" / "doc", "local secret\n");
  r = run({"send", "-r", "-p", (ws.local / "l1").string(), "127.0.0.1:pub/"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("a directory owned by uid 65534 in a sticky directory others can write to"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(ws.root / "pub" / "l1" / "doc"));
  // A put into one typed as a name (a thirty-eighth re-attack, B-F1).
  plant_directory(ws.root / "pub" / "up");
  r = run({"send", (ws.local / "l1" / "doc").string(), "127.0.0.1:pub/up"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("pub/up: a directory owned by uid 65534" + below), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.root / "pub" / "up" / "doc"));
  // Nor below it, whatever the form (a thirty-ninth re-attack, B-F5).
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"send", (ws.local / "l1" / "doc").string(), "127.0.0.1:pub/up/"},
           {"send", (ws.local / "l1" / "doc").string(), "127.0.0.1:pub/up/doc.copy"},
           {"send", "-r", (ws.local / "l1").string(), "127.0.0.1:pub/up/"},
           {"send", "-r", (ws.local / "l1").string(), "127.0.0.1:pub/up/today"}}) {
    r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find(": a directory owned by uid 65534" + below), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::is_empty(ws.root / "pub" / "up"));
  EXPECT_TRUE(server->wait_for_log("op=mkdir file=\"pub/l1\" result=\"refused: ")) << server->log();
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// A thirty-seventh re-attack (A8): send -r of a tree another user can write to followed that user's
// link to a private file of the sender's (root's 0600 file, uploaded, exit 0). A link of another
// user to a file that user does not own is named and not followed; the rest goes, exit 1.
TEST_F(DestRules, SendTreeNeverFollowsAnotherUsersLinkToAFileNotTheirs) {
  const fs::path secret = ws.local / "secret";
  write_text_file(secret, "root only\n");
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  const fs::path tree = ws.local / "theirs";
  fs::create_directories(tree);
  write_text_file(tree / "f", "hi\n");
  write_text_file(tree / "mine", "theirs\n");
  ASSERT_EQ(::chown((tree / "mine").c_str(), kNobody, kNobody), 0);
  fs::create_symlink(secret, tree / "leak");
  fs::create_symlink(tree / "mine", tree / "own");  // their link to their file: followed
  for (const char* l : {"leak", "own"}) ASSERT_EQ(::lchown((tree / l).c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chown(tree.c_str(), kNobody, kNobody), 0);
  auto r = run({"send", "-r", tree.string(), "127.0.0.1:up"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find((tree / "leak").string() +
                       ": a symbolic link of uid 65534 to a file of uid 0, which that user does not own: not "
                       "followed"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(ws.root / "up" / "leak"));
  EXPECT_EQ(read_text_file(ws.root / "up" / "f"), "hi\n");
  EXPECT_EQ(read_text_file(ws.root / "up" / "own"), "theirs\n");
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// A thirty-eighth re-attack (A-F1, A-F2): the path the user typed followed another user's link in
// that user's own directory (not sticky, so the kernel's rule says nothing) to the sender's private
// files, and a download replaced the receiver's file through one. A link of another user than
// this one and root leads only to what that user owns, for sources and destinations alike.
TEST_F(DestRules, ATypedPathNeverFollowsAnotherUsersLinkToWhatIsNotTheirs) {
  const fs::path secret = ws.local / "secret";
  fs::create_directories(secret);
  write_text_file(secret / "s.txt", "root only\n");
  ASSERT_EQ(::chmod((secret / "s.txt").c_str(), 0600), 0);
  write_text_file(ws.local / "victim", "mine\n");
  ASSERT_EQ(::chmod((ws.local / "victim").c_str(), 0600), 0);
  write_text_file(ws.root / "a.txt", "from the server\n");
  const fs::path theirs = ws.local / "theirs";
  fs::create_directories(theirs);
  fs::create_symlink(secret / "s.txt", theirs / "one.txt");
  fs::create_directory_symlink(secret, theirs / "share");
  fs::create_symlink(ws.local / "victim", theirs / "out.txt");
  for (const char* l : {"one.txt", "share", "out.txt"})
    ASSERT_EQ(::lchown((theirs / l).c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  const std::string why = ": reached through a symbolic link of uid 65534 to what uid 0 owns: not followed";
  auto r = run({"send", (theirs / "one.txt").string(), "127.0.0.1:leak.txt"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find((theirs / "one.txt").string() + why), std::string::npos) << r.err;
  r = run({"send", "-r", (theirs / "share").string(), "127.0.0.1:leak"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find((theirs / "share").string() + why), std::string::npos) << r.err;
  for (const bool resume : {false, true}) {
    r = resume ? run({"recv", "--resume", "127.0.0.1:a.txt", (theirs / "out.txt").string()})
               : run({"recv", "127.0.0.1:a.txt", (theirs / "out.txt").string()});
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find((theirs / "out.txt").string() + why), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(ws.root / "leak.txt"));
  EXPECT_FALSE(fs::exists(ws.root / "leak"));
  EXPECT_EQ(read_text_file(ws.local / "victim"), "mine\n");
  // A fifty-third re-attack (B53-1): a DEST that recv -r makes, reached through their dangling
  // link to a new name in root's directory, or below their link to root's directory.
  fs::create_directories(ws.root / "t");
  write_text_file(ws.root / "t" / "f", "from the server\n");
  fs::create_symlink(secret / "made", theirs / "restore");
  ASSERT_EQ(::lchown((theirs / "restore").c_str(), kNobody, kNobody), 0);
  for (const fs::path& dest : {theirs / "restore", theirs / "share" / "newdir"}) {
    r = run({"recv", "-r", "127.0.0.1:t", dest.string()});
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find(dest.string() + why), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(secret / "made"));
  EXPECT_FALSE(fs::exists(secret / "newdir"));
  // This user's own link is followed as before.
  fs::create_symlink(secret / "s.txt", ws.local / "mine.txt");
  r = run({"send", (ws.local / "mine.txt").string(), "127.0.0.1:mine.txt"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

// A process of nobody's holding root's directory and file (opened before it became nobody's), as
// descriptors and as its working directory: /proc/PID/fd/N and /proc/PID/cwd are the process's,
// so nobody's link to them passed foreign_reach, and the kernel opened what they hold as root (a
// thirty-ninth re-attack, A-F1: send -r uploaded root's 0700 directory, recv -r wrote into it).
TEST_F(DestRules, AnotherUsersLinkToAProcLinkIsNeverFollowed) {
  const fs::path secret = ws.local / "secret";
  fs::create_directories(secret);
  ASSERT_EQ(::chmod(secret.c_str(), 0700), 0);
  write_text_file(secret / "s.txt", "root only\n");
  ASSERT_EQ(::chmod((secret / "s.txt").c_str(), 0600), 0);
  write_text_file(ws.root / "a.txt", "from the server\n");
  fs::create_directories(ws.root / "tree");
  write_text_file(ws.root / "tree" / "planted", "x\n");
  const int dir_fd = ::open(secret.c_str(), O_PATH | O_DIRECTORY);
  const int file_fd = ::open((secret / "s.txt").c_str(), O_PATH);
  ASSERT_GE(dir_fd, 0);
  ASSERT_GE(file_fd, 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {  // nobody's process, holding them as fds 100 and 101 and as its cwd
    if (::dup2(dir_fd, 100) < 0 || ::dup2(file_fd, 101) < 0 || ::chdir(secret.c_str()) != 0) ::_exit(3);
    ::execl("/usr/bin/setpriv", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sleep",
            "60", static_cast<char*>(nullptr));
    ::_exit(4);
  }
  ::close(dir_fd);
  ::close(file_fd);
  const std::string proc = "/proc/" + std::to_string(holder);
  struct stat ps {};
  for (int i = 0; i < 500 && (::stat(proc.c_str(), &ps) != 0 || ps.st_uid != kNobody); ++i) ::usleep(10000);
  ASSERT_EQ(ps.st_uid, kNobody) << "the holder became nobody's";
  const fs::path theirs = ws.local / "theirs";
  fs::create_directories(theirs);
  fs::create_symlink(proc + "/fd/100", theirs / "dir");
  fs::create_symlink(proc + "/fd/101", theirs / "file");
  fs::create_symlink(proc + "/cwd", theirs / "cwd");
  for (const char* l : {"dir", "file", "cwd"}) ASSERT_EQ(::lchown((theirs / l).c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  const std::string why = ": reached through a symbolic link of uid 65534 to a link of /proc";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"send", (theirs / "file").string(), "127.0.0.1:leak.txt"},
                                             {"send", "-r", (theirs / "dir").string(), "127.0.0.1:leak"},
                                             {"send", "-r", (theirs / "cwd").string(), "127.0.0.1:leak"},
                                             {"recv", "-r", "127.0.0.1:tree", (theirs / "cwd").string()},
                                             {"recv", "-r", "127.0.0.1:tree", (theirs / "dir").string()}}) {
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_FALSE(fs::exists(ws.root / "leak.txt"));
  EXPECT_FALSE(fs::exists(ws.root / "leak"));
  EXPECT_FALSE(fs::exists(secret / "tree"));
  EXPECT_FALSE(fs::exists(secret / "planted"));
}

}  // namespace
}  // namespace aesxfer::test

namespace aesxfer::test {
namespace {

// A sticky directory writable by its group only (a team's drop directory): a member planted a
// directory and a FIFO there, which the rules for world-writable ones refused (a fortieth
// re-attack, B-F3). The kernel's protected_fifos and protected_regular at 2 judge both kinds.
TEST_F(DestRules, AGroupWritableStickyDirectoryIsJudgedAsAWorldWritableOne) {
  fs::create_directories(ws.root / "tree");
  write_text_file(ws.root / "tree" / "doc", "secret\n");
  const fs::path team = ws.local / "team";
  fs::create_directories(team);
  ASSERT_EQ(::chown(team.c_str(), 0, 1234), 0);
  ASSERT_EQ(::chmod(team.c_str(), 01770), 0);
  plant_directory(team / "backup", kNobody, 1234);
  ASSERT_EQ(::mkfifo((team / "out").c_str(), 0666), 0);
  ASSERT_EQ(::lchown((team / "out").c_str(), kNobody, 1234), 0);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"recv", "-r", "127.0.0.1:tree", (team / "backup" / "today").string()},
           {"recv", "127.0.0.1:tree/doc", (team / "backup" / "doc").string()},
           {"recv", "127.0.0.1:tree/doc", (team / "out").string()}}) {
    auto r = run(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("owned by uid 65534 in a sticky directory others can write to"), std::string::npos)
        << r.err;
  }
  EXPECT_TRUE(fs::is_empty(team / "backup"));
}

// What the user names for the programs' own output, and the server's root, are not in or below a
// directory another user planted either (a fortieth re-attack, A-F4, B-F4, B-F5: nobody swapped the
// port file of serve --port-file /tmp/run/port for their own server's port, and serve --root
// /tmp/drop stored and served files nobody then replaced).
TEST_F(DestRules, TheServersRootAndOutputFilesAreNeverInADirectoryAnotherUserPlanted) {
  write_text_file(ws.root / "a.txt", "a\n");
  const fs::path share = ws.local / "share", drop = share / "drop";
  fs::create_directories(share);
  ASSERT_EQ(::chmod(share.c_str(), 01777), 0);
  plant_directory(drop);
  const std::string why =
      "a directory owned by uid 65534 in a sticky directory others can write to is on its "
      "way: nothing is written into or below it";
  auto r = run_aesxfer({"serve", "--listen", "127.0.0.1", "-P", "0", "--root", drop.string()}, ws.home, 30);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("root " + drop.string() + ": " + why), std::string::npos) << r.err;
  r = run_aesxfer({"serve", "--listen", "127.0.0.1", "-P", "0", "--root", ws.root.string(), "--port-file",
                   (drop / "port").string()},
                  ws.home, 30);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  r = run({"recv", "127.0.0.1:a.txt", (ws.local / "a.txt").string(), "--keylog", (drop / "keys").string()});
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  r = run_aesxfer({"speed", "--plot", (drop / "chart.svg").string()}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find((drop / "chart.svg").string() + ": " + why), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(drop));
}

// A thirty-eighth re-attack (A-F3): a client home others may write to was used without a word
// (another user renamed its config away, and StrictHostKeyChecking yes no longer held).
TEST_F(DestRules, AHomeOthersMayWriteToIsSaid) {
  write_text_file(ws.root / "a.txt", "a\n");
  const std::string warning = "warning: $AESXFER_HOME: another user can replace its config and known_hosts: ";
  ASSERT_EQ(::chmod(ws.home.c_str(), 0777), 0);
  auto r = run({"recv", "127.0.0.1:a.txt", (ws.local / "a.txt").string()});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find(warning + ws.home.string() + " is writable by group or others (mode 0777)"),
            std::string::npos)
      << r.err;
  ASSERT_EQ(::chmod(ws.home.c_str(), 0755), 0);
  r = run({"recv", "127.0.0.1:a.txt", (ws.local / "b.txt").string()});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err.find("warning: $AESXFER_HOME"), std::string::npos) << r.err;
  // Another user's home, whatever its mode, and one below a directory others may write to, are
  // said too, with -q as well (a thirty-ninth re-attack, B-F4: the mode bits alone were judged).
  ASSERT_EQ(::chown(ws.home.c_str(), kNobody, kNobody), 0);
  r = run({"recv", "-q", "127.0.0.1:a.txt", (ws.local / "c.txt").string()});
  EXPECT_NE(r.err.find(warning + ws.home.string() + " is owned by uid 65534"), std::string::npos) << r.err;
  ASSERT_EQ(::chown(ws.home.c_str(), 0, 0), 0);
  const fs::path above = ws.home.parent_path();
  struct stat was {};
  ASSERT_EQ(::stat(above.c_str(), &was), 0);
  ASSERT_EQ(::chmod(above.c_str(), 0777), 0);
  r = run({"recv", "-q", "127.0.0.1:a.txt", (ws.local / "d.txt").string()});
  ASSERT_EQ(::chmod(above.c_str(), was.st_mode & 07777), 0);
  EXPECT_NE(
      r.err.find(warning + "directory " + above.string() + " is writable by group or others (mode 0777)"),
      std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace aesxfer::test
