// A nineteenth re-attack (N6): a plain transfer completed NAME and left an older
// ".NAME.aesxfer-partial" beside it; a later --resume of the same file then "resumed at byte
// 5242880" from that stale prefix and moved the rest again where a whole copy already stood. A
// transfer that completes NAME without resuming removes this user's adoptable partial file of NAME
// (files::drop_stale_partial), on both ends; a file another user owns, or one a --resume holds
// locked now, stays (docs/PROTOCOL.md 3.6).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "files/unique_fd.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

class StalePartial : public ServerTest {
 protected:
  // The first half of `from`, as this user's 0600 partial file at `to` (what an interrupted
  // --resume leaves).
  static void leave_half(const fs::path& from, const fs::path& to) {
    std::string head(size_t(fs::file_size(from) / 2), '\0');
    std::ifstream(from, std::ios::binary).read(head.data(), std::streamsize(head.size()));
    std::ofstream(to, std::ios::binary).write(head.data(), std::streamsize(head.size()));
    fs::permissions(to, fs::perms(0600));
  }
};

// The server's end: the plain send removes the stale partial file, and the next send --resume
// finds the whole copy up to date instead of resuming from the old prefix.
TEST_F(StalePartial, APlainSendRemovesTheServersStalePartialFile) {
  const fs::path f = ws.local / "s.bin";
  write_random_file(f, 3 << 20, 71);
  const fs::path partial = ws.root / ".s.bin.aesxfer-partial";
  leave_half(f, partial);
  auto r = run({"send", f.string(), "127.0.0.1:s.bin"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "s.bin"), sha256_file(f));
  EXPECT_FALSE(fs::exists(partial)) << "the stale partial file stayed beside the complete copy";
  r = run({"send", "--resume", f.string(), "127.0.0.1:s.bin"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("up to date"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("resumed at byte"), std::string::npos) << r.out;
}

// The client's end, with what must stay: another user's partial file, and one a --resume holds
// locked at this moment (here the test holds the lock).
TEST_F(StalePartial, APlainRecvRemovesOnlyThisUsersUnlockedPartialFile) {
  write_random_file(ws.root / "c.bin", 2 << 20, 72);
  const fs::path dest = ws.local / "c.bin", partial = ws.local / ".c.bin.aesxfer-partial";
  leave_half(ws.root / "c.bin", partial);
  auto r = run({"recv", "127.0.0.1:c.bin", dest.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(dest), sha256_file(ws.root / "c.bin"));
  EXPECT_FALSE(fs::exists(partial)) << "the stale partial file stayed beside the complete copy";

  leave_half(ws.root / "c.bin", partial);
  {
    files::UniqueFd held(::open(partial.c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(held);
    ASSERT_EQ(::flock(held.get(), LOCK_EX | LOCK_NB), 0);
    r = run({"recv", "127.0.0.1:c.bin", dest.string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(fs::exists(partial)) << "a partial file being resumed was removed";
  }
  ASSERT_EQ(::chown(partial.c_str(), 65534, 65534), 0);
  r = run({"recv", "127.0.0.1:c.bin", dest.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(partial)) << "another user's file was removed";
}

}  // namespace
}  // namespace aesxfer::test
