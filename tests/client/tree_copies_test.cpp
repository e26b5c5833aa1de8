// client/tree_resume.h: $AESXFER_HOME/tree_copies, the record of which copy a tree's --resume
// continues, keeps the newest records within what is read back of it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "client/tree_resume.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

// A fifty-sixth re-attack (B56-5): at most 1 MiB of the file is read, but up to 1000 records of
// about 8 KB each were kept: once records of long paths filled the first MiB, each new one was
// written past it, where no --resume found it (a second copy nested from zero, exit 0). The
// newest record is always found, and the file stays within what is read.
TEST(TreeCopies, TheNewestRecordIsFoundWhenLongPathsFillTheFile) {
  TempDir home("aesxfer-home");
  ::chmod(home.path().c_str(), 0700);
  const std::string local = "/" + std::string(1030, 'l') + "/tiny";
  const std::string dir(3011, 'd');
  const std::string id(32, '\x5a');  // the directory's identity, as the server's answer gives it
  for (int i = 0; i < 300; ++i)
    client::remember_sent_copy(home.path(), "SHA256:x", dir + "/n" + std::to_string(i), id, local);
  client::remember_sent_copy(home.path(), "SHA256:x", dir + "/nX", id, local);
  EXPECT_TRUE(client::is_sent_copy(home.path(), "SHA256:x", dir + "/nX", id, local));
  EXPECT_TRUE(client::is_sent_copy(home.path(), "SHA256:x", dir + "/n299", id, local));
  EXPECT_FALSE(client::is_sent_copy(home.path(), "SHA256:x", dir + "/n0", id, local));  // the oldest went
  EXPECT_LE(fs::file_size(home.path() / "tree_copies"), size_t(1) << 20);
}

// A fifty-sixth re-attack (B56-2): the record named DEST by its path alone, so a directory removed
// and made again there (or another server's of the same host key) was "the copy". The record holds
// the server's identity of the directory, and another identity, or none, is not the copy.
TEST(TreeCopies, ASentCopyIsTheDirectoryThatWasMadeNotItsPath) {
  TempDir home("aesxfer-home");
  ::chmod(home.path().c_str(), 0700);
  const std::string made(32, '\x01'), again(32, '\x02');
  client::remember_sent_copy(home.path(), "SHA256:x", "backup", made, "/home/u/proj");
  EXPECT_TRUE(client::is_sent_copy(home.path(), "SHA256:x", "backup", made, "/home/u/proj"));
  EXPECT_FALSE(client::is_sent_copy(home.path(), "SHA256:x", "backup", again, "/home/u/proj"));
  EXPECT_FALSE(client::is_sent_copy(home.path(), "SHA256:x", "backup", "", "/home/u/proj"));
  client::remember_sent_copy(home.path(), "SHA256:x", "other", "", "/home/u/proj");  // no identity: no record
  EXPECT_FALSE(client::is_sent_copy(home.path(), "SHA256:x", "other", "", "/home/u/proj"));
}

}  // namespace
}  // namespace aesxfer::test
