// Record order on a live connection (proto::RecordOrder as net/ applies it): a real server, a
// session driven by hand (tests/hand_session.h) that sends records where they may not come.
#include <gtest/gtest.h>

#include <cstring>

#include "proto/end_record.h"
#include "proto/messages.h"
#include "proto/record.h"
#include "tests/hand_session.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

class RecordOrderSession : public ServerTest {
 protected:
  fs::path id = ws.home / "id_ed25519";

  // After a request that is answered, the server wants the next request: a data record there
  // (as if after the end record of a file) ends the session with a protocol error.
  void expect_refused(HandSession& s) {
    uint8_t* p = s.conn().payload_buffer();
    std::memset(p, 'x', 100);
    s.conn().send_record(proto::RecordType::data, 0, 100);
    EXPECT_TRUE(server->wait_for_log("expected a control message")) << server->log();
    EXPECT_THROW(s.conn().recv_message("the test"), proto::Failure) << "the server closed the session";
  }
};

TEST_F(RecordOrderSession, DataAfterTheEndRecordOfAFile) {
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  proto::Message res = s.put(make_request(proto::Op::put, "a.bin", "a.bin"), std::string(5000, 'a'));
  ASSERT_EQ(res.status, proto::Status::ok) << res.text;
  expect_refused(s);
}

TEST_F(RecordOrderSession, DataOrEndBeforeAnyRequest) {
  {
    HandSession s(server->port(), id);
    ASSERT_TRUE(s.welcome_ok);
    expect_refused(s);
  }
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  proto::EndRecord end{};
  end.checksum.alg = crypto::ChecksumAlg::none;
  s.conn().send_record(proto::RecordType::end, proto::kFlagFinal,
                       proto::encode_end(s.conn().payload_buffer(), end));
  EXPECT_THROW(s.conn().recv_message("the test"), proto::Failure);
}

}  // namespace
}  // namespace aesxfer::test
