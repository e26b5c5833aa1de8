// Issue 24 item E12: `-r --resume` after an interrupted `-r` continues the destination the
// interrupted run was writing (host:tree, not host:tree/tree; local tree, not tree/tree), and
// running the same command again lands in the same place, as rsync does. A destination that holds
// anything else (a directory the user already had) still gets the tree inside it, as scp does.
// Both ways, each interrupted by a Relay that cuts the connection inside the large file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <thread>
#include <vector>

#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using TreeResume = ServerTest;

ino_t inode_of(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
}

// tree/{a.txt, b.txt, sub/c.txt, z.bin (6 MiB)}: the small files go (and land) first.
void make_tree(const fs::path& top) {
  fs::create_directories(top / "sub");
  write_text_file(top / "a.txt", "a\n");
  write_text_file(top / "b.txt", "b\n");
  write_text_file(top / "sub" / "c.txt", "c\n");
  write_random_file(top / "z.bin", 6 << 20, 4);
}

// A directory `top` holding these files (name, content); returns top.
fs::path write_tree(const fs::path& top, const std::vector<std::pair<std::string, std::string>>& files) {
  fs::create_directories(top);
  for (const auto& [name, content] : files) write_text_file(top / name, content);
  return top;
}

void expect_copy(const fs::path& src, const fs::path& dst) {
  for (const char* f : {"a.txt", "b.txt", "sub/c.txt", "z.bin"}) {
    ASSERT_TRUE(fs::is_regular_file(dst / f)) << dst / f;
    EXPECT_EQ(sha256_file(dst / f), sha256_file(src / f)) << f;
  }
  EXPECT_FALSE(fs::exists(dst / "tree")) << "the resumed tree was nested in its own copy";
}

TEST_F(TreeResume, SendDashRResumeContinuesTheInterruptedDestination) {
  const fs::path src = ws.local / "tree";
  make_tree(src);
  {
    FaultSpec cut;
    cut.kind = FaultKind::cut;
    cut.cut_after = uint64_t(2) << 20;  // inside z.bin
    Relay relay(server->port(), cut);
    auto r = run({"send", "-r", "-q", src.string(), "127.0.0.1:tree", "--retries", "0"}, relay.port());
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(relay.fault_applied());
  }
  ASSERT_TRUE(fs::is_directory(ws.root / "tree"));
  EXPECT_FALSE(fs::exists(ws.root / "tree" / "z.bin"));
  for (int run_no = 0; run_no < 2; ++run_no) {  // and once more: the same place again
    auto r = run({"send", "-r", "--resume", "-q", src.string(), "127.0.0.1:tree"});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    expect_copy(src, ws.root / "tree");
  }
  // A directory that holds something else: the tree goes inside it, as scp puts it.
  fs::create_directories(ws.root / "backups");
  write_text_file(ws.root / "backups" / "other.txt", "mine\n");
  auto r = run({"send", "-r", "--resume", "-q", src.string(), "127.0.0.1:backups"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_copy(src, ws.root / "backups" / "tree");
  EXPECT_FALSE(fs::exists(ws.root / "backups" / "a.txt"));
}

// A fifty-eighth re-attack (I58-8): the source was recorded by the path as typed, so the same tree
// named through a link was another source: `send -r --resume LINK/tree host:copy` after a send of
// tree nested a second copy, sent whole. The source is the directory it is, links resolved.
TEST_F(TreeResume, TheSameSourceNamedThroughALinkContinuesItsCopy) {
  const fs::path src = ws.local / "tree";
  make_tree(src);
  fs::create_directory_symlink(ws.local, ws.tmp.path() / "ln");
  auto first = run({"send", "-r", "-q", src.string(), "127.0.0.1:copy"});
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  auto r = run({"send", "-r", "--resume", "-q", (ws.tmp.path() / "ln" / "tree").string(), "127.0.0.1:copy"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_copy(src, ws.root / "copy");
  EXPECT_FALSE(fs::exists(ws.root / "copy" / "tree"));
}

// A forty-ninth re-attack (B49-5): a directory the user already had, holding only names that are
// also at the top of the source, was taken for the copy an interrupted run had made, and its file
// was replaced by the tree's. Only a DEST this client recorded as made for this source continues.
TEST_F(TreeResume, ADirectoryWithTheSameNamesIsNotTheCopyUnlessThisRunMadeIt) {
  const fs::path src = ws.local / "docs";
  fs::create_directories(src);
  write_text_file(src / "notes.txt", "the tree's notes\n");
  write_text_file(src / "b.txt", "b\n");
  fs::create_directories(ws.root / "mine");
  write_text_file(ws.root / "mine" / "notes.txt", "the user's own notes\n");
  auto r = run({"send", "-r", "--resume", "-q", src.string(), "127.0.0.1:mine"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "mine" / "notes.txt"), "the user's own notes\n");
  EXPECT_EQ(read_text_file(ws.root / "mine" / "docs" / "notes.txt"), "the tree's notes\n");
  EXPECT_FALSE(fs::exists(ws.root / "mine" / "b.txt"));
  // Made by this client for another source: not this source's copy either.
  const fs::path other = ws.local / "other";
  fs::create_directories(other);
  write_text_file(other / "notes.txt", "other notes\n");
  r = run({"send", "-r", "-q", other.string(), "127.0.0.1:made"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_EQ(read_text_file(ws.root / "made" / "notes.txt"), "other notes\n");
  r = run({"send", "-r", "--resume", "-q", src.string(), "127.0.0.1:made"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "made" / "notes.txt"), "other notes\n");
  EXPECT_EQ(read_text_file(ws.root / "made" / "docs" / "notes.txt"), "the tree's notes\n");
  // The same source again, written with a trailing slash and through "./": continued.
  r = run({"send", "-r", "--resume", "-q", src.string() + "/", "127.0.0.1:./made/docs/"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(ws.root / "made" / "docs" / "docs"));
}

// A fifty-sixth re-attack (B56-2): the record named the copy by its path alone: `rm -r backup;
// mkdir backup` on the server (often the same inode) and a file of the server's user in it, and
// `send -r --resume proj host:backup` took the new directory for the copy and replaced the file.
// The record holds the server's identity of the directory it made (device, inode, birth time).
TEST_F(TreeResume, ADirectoryMadeAgainWhereTheCopyWasIsNotTheCopy) {
  const fs::path src =
      write_tree(ws.local / "proj", {{"notes.txt", "new notes from laptop\n"}, {"main.c", "int main;\n"}});
  auto r = run({"send", "-r", "-q", src.string(), "127.0.0.1:backup"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_EQ(read_text_file(ws.root / "backup" / "notes.txt"), "new notes from laptop\n");
  r = run({"send", "-r", "--resume", "-q", src.string(), "127.0.0.1:backup"});  // the copy: continued
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(ws.root / "backup" / "proj"));
  fs::remove_all(ws.root / "backup");
  fs::create_directories(ws.root / "backup");
  write_text_file(ws.root / "backup" / "notes.txt", "the server user's own notes\n");
  r = run({"send", "-r", "--resume", "-q", src.string(), "127.0.0.1:backup"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "backup" / "notes.txt"), "the server user's own notes\n");
  EXPECT_EQ(read_text_file(ws.root / "backup" / "proj" / "notes.txt"), "new notes from laptop\n");
}

// A fifty-seventh re-attack (D57-1, D57-3): the resume listed DEST to find whether it is the copy:
// a copy still empty (cut in its first file) was nested, and so was any copy whose listing the
// server refused (busy with other listings, or over --max-list), a second copy sent whole. The
// identity of DEST, from one stat, settles it: no listing is asked for.
TEST_F(TreeResume, TheCopyIsKnownByItsIdentityEvenEmptyAndWithoutAListing) {
  const fs::path src = write_tree(ws.local / "proj", {{"a.txt", "a\n"}, {"b.txt", "b\n"}});
  auto r = run({"send", "-r", "-q", src.string(), "127.0.0.1:bk2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* f : {"a.txt", "b.txt"}) fs::remove(ws.root / "bk2" / f);  // the copy, empty again
  r = run({"send", "-r", "--resume", "-q", src.string(), "127.0.0.1:bk2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "bk2" / "a.txt"), "a\n");
  EXPECT_FALSE(fs::exists(ws.root / "bk2" / "proj")) << "the resume nested the tree";
  EXPECT_EQ(server->log().find("op=list"), std::string::npos) << server->log();
}

// A thirty-second re-attack (B-N2): a tree whose first file was interrupted left DEST holding only
// the partial file the server kept for --resume, which listings leave out: the resume found DEST
// "empty", so not the copy, nested the tree in DEST/NAME and sent it all again, the partial file
// orphaned. A partial file of one of the tree's top-level files makes DEST the copy.
TEST_F(TreeResume, ATreeCutInItsFirstFileContinuesWhereItsPartialFileIs) {
  const fs::path src = ws.local / "one";
  fs::create_directories(src);
  write_random_file(src / "big.iso", 8 << 20, 51);
  {
    FaultSpec cut;
    cut.kind = FaultKind::cut;
    cut.cut_after = uint64_t(3) << 20;
    Relay relay(server->port(), cut);
    auto r = run({"send", "-r", "--resume", "-q", src.string(), "127.0.0.1:onecopy", "--retries", "0"},
                 relay.port());
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(relay.fault_applied());
  }
  ASSERT_TRUE(server->wait_for_log("partial file kept")) << server->log();
  ASSERT_TRUE(fs::exists(ws.root / "onecopy" / ".big.iso.aesxfer-partial"));
  auto r = run({"send", "-r", "--resume", "--json", src.string(), "127.0.0.1:onecopy"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(ws.root / "onecopy" / "one")) << "the resume nested the tree";
  EXPECT_EQ(sha256_file(ws.root / "onecopy" / "big.iso"), sha256_file(src / "big.iso"));
  EXPECT_TRUE(temp_debris(ws.root / "onecopy").empty());
  EXPECT_NE(r.out.find("\"resumed_from\":"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"resumed_from\":0,"), std::string::npos) << "sent from the start: " << r.out;
}

TEST_F(TreeResume, RecvDashRResumeContinuesTheInterruptedDestination) {
  make_tree(ws.root / "tree");
  const fs::path dest = ws.local / "tree";
  {
    FaultSpec cut;
    cut.cut_s2c_after = uint64_t(2) << 20;  // inside z.bin
    Relay relay(server->port(), cut);
    auto r = run({"recv", "-r", "-q", "127.0.0.1:tree", dest.string(), "--retries", "0"}, relay.port());
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(relay.fault_applied());
  }
  ASSERT_TRUE(fs::is_directory(dest));
  EXPECT_FALSE(fs::exists(dest / "z.bin"));
  for (int run_no = 0; run_no < 2; ++run_no) {
    auto r = run({"recv", "-r", "--resume", "-q", "127.0.0.1:tree", dest.string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    expect_copy(ws.root / "tree", dest);
  }
  fs::create_directories(ws.local / "backups");
  write_text_file(ws.local / "backups" / "other.txt", "mine\n");
  auto r = run({"recv", "-r", "--resume", "-q", "127.0.0.1:tree", (ws.local / "backups").string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_copy(ws.root / "tree", ws.local / "backups" / "tree");
  EXPECT_FALSE(fs::exists(ws.local / "backups" / "a.txt"));
}

// A third re-attack (N1): the old rule took DEST for the copy when it held only names the server
// listed, so a server whose tree held .bashrc and .profile made `recv -r --resume host:backup DIR`
// write into DIR itself (scp's CVE-2019-6111 class). Only a DEST that an earlier recv -r of the
// same source created is continued (recorded in $AESXFER_HOME); any other goes DEST/NAME.
TEST_F(TreeResume, RecvResumeNeverTakesTheListingsWordForTheDestination) {
  fs::create_directories(ws.root / "backup" / ".ssh");
  write_text_file(ws.root / "backup" / ".bashrc", "echo PWNED\n");
  write_text_file(ws.root / "backup" / ".profile", "server\n");
  write_text_file(ws.root / "backup" / ".ssh" / "authorized_keys", "ssh-ed25519 AAAA attacker\n");
  const fs::path victim = ws.local / "victim";
  fs::create_directories(victim / ".ssh");
  write_text_file(victim / ".bashrc", "original\n");
  write_text_file(victim / ".ssh" / "authorized_keys", "ssh-ed25519 AAAA victim\n");
  auto r = run({"recv", "-r", "--resume", "-q", "127.0.0.1:backup", victim.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(victim / ".bashrc"), "original\n");
  EXPECT_EQ(read_text_file(victim / ".ssh" / "authorized_keys"), "ssh-ed25519 AAAA victim\n");
  EXPECT_FALSE(fs::exists(victim / ".profile"));
  EXPECT_EQ(read_text_file(victim / "backup" / ".bashrc"), "echo PWNED\n");
  // A copy made by recv -r of another source is not continued either.
  const fs::path made = ws.local / "made";
  r = run({"recv", "-r", "-q", "127.0.0.1:backup/.ssh", made.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run({"recv", "-r", "--resume", "-q", "127.0.0.1:backup", made.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(made / "backup" / ".bashrc"));
  EXPECT_FALSE(fs::exists(made / ".bashrc"));
}

// A fourth re-attack: the record held device and inode only, and a directory made right after
// the copy was removed got the same inode number (ext4, tmpfs): `rm -r dl; mkdir work` made
// `work` "the copy" and the server's files replaced the user's. The birth time tells them apart.
TEST_F(TreeResume, ADirectoryOnAReusedInodeIsNotTheCopy) {
  make_tree(ws.root / "tree");
  const fs::path dl = ws.local / "dl";
  auto r = run({"recv", "-r", "-q", "127.0.0.1:tree", dl.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const ino_t ino = inode_of(dl);
  fs::remove_all(dl);
  // Whatever inode the new directory gets (tried until it is the old one, where the file system
  // gives it back), it is not the recorded copy.
  fs::path work;
  for (int i = 0; i < 50; ++i) {
    const fs::path w = ws.local / ("work" + std::to_string(i));
    fs::create_directory(w);
    if (inode_of(w) == ino) {
      work = w;
      break;
    }
  }
  if (work.empty()) work = ws.local / "work0";
  write_text_file(work / "a.txt", "the user's own\n");
  r = run({"recv", "-r", "--resume", "-q", "127.0.0.1:tree", work.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(work / "a.txt"), "the user's own\n");
  EXPECT_TRUE(fs::exists(work / "tree" / "z.bin")) << "not nested: taken for the copy";
  std::printf("[ resume  ] the new directory %s the removed copy's inode\n",
              inode_of(work) == ino ? "got" : "did not get");
}

// A thirty-fourth re-attack (B-N6): the record named the source as "host:path" alone, so the same
// path on another server on the same host (another port) was taken for the same source, and its
// tree was merged into the first one's copy. The source is known by the server's host key, not by
// the name typed for it: another server's tree goes DEST/NAME; the first server, reached again by
// another name, still continues its copy.
TEST_F(TreeResume, TheSamePathOnAnotherServerIsAnotherSource) {
  make_tree(ws.root / "tree");
  const fs::path home2 = ws.tmp / "home2", root2 = ws.tmp / "root2";
  fs::create_directories(home2);
  fs::create_directories(root2 / "tree");
  fs::permissions(home2, fs::perms(0700));
  fs::copy_file(ws.home / "id_ed25519.pub", home2 / "authorized_keys");
  write_text_file(root2 / "tree" / "a.txt", "the other server's a\n");
  ServerProcess other(home2, root2);
  const fs::path dl = ws.local / "dl";
  auto r = run({"recv", "-r", "-q", "127.0.0.1:tree", dl.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run({"recv", "-r", "--resume", "-q", "127.0.0.1:tree", dl.string()}, other.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(dl / "a.txt"), "a\n") << "merged into the first server's copy";
  EXPECT_EQ(read_text_file(dl / "tree" / "a.txt"), "the other server's a\n");
  // The first server by another of its names (a thirty-fifth re-attack, B-N4: localhost for
  // 127.0.0.1 nested a second copy).
  fs::remove(dl / "z.bin");
  r = run({"recv", "-r", "--resume", "-q", "localhost:tree", dl.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(dl / "a.txt"), "a\n");
  EXPECT_EQ(sha256_file(dl / "z.bin"), sha256_file(ws.root / "tree" / "z.bin"));
  EXPECT_FALSE(fs::exists(dl / "tree" / "z.bin")) << "the first server's copy was nested";
  EXPECT_EQ(other.stop(), 0);
}

// N5: a FIFO where a file of a tree goes does not hang recv -r --resume (the destination is opened
// non-blocking, and is no resume base); it is replaced like any other non-file. (A FIFO the user
// names as the destination of one file is written through, as cp does: that waits for a reader.)
TEST_F(TreeResume, AFifoAtTheDestinationDoesNotHangAResume) {
  fs::create_directories(ws.root / "t");
  write_random_file(ws.root / "t" / "f.bin", 200000, 3);
  fs::create_directories(ws.local / "t");
  ASSERT_EQ(::mkfifo((ws.local / "t" / "f.bin").c_str(), 0600), 0);
  auto r = run({"recv", "-r", "--resume", "-q", "127.0.0.1:t", ws.local.string(), "--timeout", "10"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.local / "t" / "f.bin"), sha256_file(ws.root / "t" / "f.bin"));
}

// A sixteenth re-attack (L5): recv -r commands ending at once each rewrote tree_copies with what it
// had read, and a record was lost (a later --resume then nested a second copy). Six at once: six
// records, and each copy is continued by --resume.
TEST_F(TreeResume, ConcurrentRecvsKeepEveryRecord) {
  for (int i = 0; i < 6; ++i) {
    fs::create_directories(ws.root / "many" / ("t" + std::to_string(i)));
    write_text_file(ws.root / "many" / ("t" + std::to_string(i)) / "f", std::to_string(i) + "\n");
  }
  std::vector<std::thread> runs;
  std::vector<ProcResult> results(6);
  for (int i = 0; i < 6; ++i)
    runs.emplace_back([&, i] {
      results[size_t(i)] = run({"recv", "-r", "-q", "127.0.0.1:many/t" + std::to_string(i),
                                (ws.local / ("c" + std::to_string(i))).string()});
    });
  for (auto& t : runs) t.join();
  for (const auto& r : results) ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(nonempty_lines(read_text_file(ws.home / "tree_copies")).size(), 6u);
  for (int i = 0; i < 6; ++i) {
    const fs::path c = ws.local / ("c" + std::to_string(i));
    auto r = run({"recv", "-r", "-q", "--resume", "127.0.0.1:many/t" + std::to_string(i), c.string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_FALSE(fs::exists(c / ("t" + std::to_string(i)))) << "a second copy nested in " << c;
  }
}

}  // namespace
}  // namespace aesxfer::test
