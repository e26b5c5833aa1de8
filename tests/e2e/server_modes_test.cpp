// A hostile client cannot plant set-user-ID or set-group-ID bits on the server: not on a file it
// puts with -p, not on a directory it creates or re-creates with -p (issue 14, item 3, the server's
// direction).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

class ServerModes : public ServerTest {
 protected:
  fs::path id = ws.home / "id_ed25519";
};

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

}  // namespace
}  // namespace aesxfer::test
