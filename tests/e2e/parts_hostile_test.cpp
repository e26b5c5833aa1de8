// A client that misuses parallel-stream puts (server/parts.cpp, PROTOCOL.md 3.9) on purpose:
// mismatched parts of one transfer, a part index twice, overlapping ranges, a missing part, a
// commit on a connection that carried no part, and a second client key guessing a transfer id.
// None of them may put a file at the destination or leave a temporary file behind, and the server
// keeps serving. The sessions here are driven by hand with the product's own handshake and
// record layer, so each request can be shaped at will.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "crypto/suite.h"
#include "files/keystore.h"
#include "net/conn.h"
#include "net/transfer.h"
#include "proto/handshake.h"
#include "proto/messages.h"
#include "proto/record.h"
#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using proto::Message;
constexpr uint64_t kRec = proto::kDefaultPayload;

// An authenticated session with the server, driven by hand, with ranged puts and commits.
using Session = HandSession;

Message part(uint32_t i, uint32_t n, uint64_t off, uint64_t len, uint64_t size, uint8_t id_byte = 7) {
  Message m;
  m.type = proto::MsgType::request;
  m.op = proto::Op::put;
  m.path = "dst.bin";
  m.text = "src.bin";
  m.size = size;
  m.mode = 0644;
  m.flags = proto::kFlagRange;
  m.xfer_id.fill(id_byte);
  m.part = i;
  m.nparts = n;
  m.offset = off;
  m.length = len;
  return m;
}

class PartsHostile : public ServerTest {
 protected:
  // An idle timeout that sessions opened side by side outlive even under TSan beside other work
  // (at 2 s the first of three timed out while the others did their handshakes).
  std::vector<std::string> server_args() const override { return {"--timeout", "15"}; }
  fs::path id = ws.home / "id_ed25519";

  void expect_nothing_left() {
    for (int i = 0; i < 100 && !temp_debris(ws.root).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(fs::exists(ws.root / "dst.bin"));
    EXPECT_TRUE(temp_debris(ws.root).empty());
  }
  void expect_still_serving() {
    fs::path f = ws.local / "ok.bin";
    write_random_file(f, 3 * kRec, 9);
    auto r = run_aesxfer({"send", f.string(), "127.0.0.1:ok.bin", "--streams", "3", "-q", "-P",
                          std::to_string(server->port())},
                         ws.home);
    ASSERT_EQ(r.exit_code, 0) << r.describe() << server->log();
    EXPECT_EQ(sha256_file(ws.root / "ok.bin"), sha256_file(f));
  }
};

TEST_F(PartsHostile, HonestPartsByHandCommit) {
  // The same hand-driven sessions used correctly: the file appears (so the refusals below are
  // the server's checks, not a broken test client).
  Session a(server->port(), id), b(server->port(), id);
  ASSERT_TRUE(a.welcome_ok && b.welcome_ok);
  EXPECT_EQ(a.put_part(part(0, 2, 0, kRec, 2 * kRec + 1)).status, proto::Status::ok);
  EXPECT_EQ(b.put_part(part(1, 2, kRec, kRec + 1, 2 * kRec + 1)).status, proto::Status::ok);
  EXPECT_EQ(a.commit(part(0, 2, 0, kRec, 2 * kRec + 1)).status, proto::Status::ok);
  // A second commit is told the transfer is in place (a twenty-first re-attack, N5: "dst.bin: no
  // such file or directory", from renaming the temporary file again).
  const Message again = b.commit(part(1, 2, kRec, kRec + 1, 2 * kRec + 1));
  EXPECT_EQ(again.status, proto::Status::refused);
  EXPECT_NE(again.text.find("dst.bin: this transfer is already committed"), std::string::npos) << again.text;
  a.bye();
  b.bye();
  EXPECT_EQ(fs::file_size(ws.root / "dst.bin"), 2 * kRec + 1);
}

TEST_F(PartsHostile, MismatchedDuplicateAndOverlappingPartsAreRefused) {
  {
    Session a(server->port(), id), b(server->port(), id), c(server->port(), id);
    ASSERT_TRUE(a.welcome_ok);
    EXPECT_EQ(a.put_part(part(0, 2, 0, kRec, 2 * kRec)).status, proto::Status::ok);
    // Same transfer id, another size: refused.
    Message r = b.put_part(part(1, 2, kRec, kRec, 3 * kRec));
    EXPECT_EQ(r.status, proto::Status::refused) << r.text;
    // Part 0 a second time: refused.
    r = c.put_part(part(0, 2, 0, kRec, 2 * kRec));
    EXPECT_EQ(r.status, proto::Status::refused) << r.text;
    // Part 1 sent over the range of part 0 (both verify, but they do not tile the file).
    EXPECT_EQ(b.put_part(part(1, 2, 0, kRec, 2 * kRec)).status, proto::Status::ok);
    r = a.commit(part(0, 2, 0, kRec, 2 * kRec));
    EXPECT_EQ(r.status, proto::Status::integrity) << r.text;
    a.bye();
    b.bye();
    c.bye();
  }
  expect_nothing_left();
  expect_still_serving();
}

// A short idle timeout, so that a commit waiting for a part that never comes gives up soon (6 s:
// at 2 s a session waiting beside another's handshake under TSan timed out, and at 3 s the honest
// --streams 3 client of expect_still_serving did, under TSan beside two busy loops and a build).
class PartsHostileShortTimeout : public PartsHostile {
 protected:
  std::vector<std::string> server_args() const override { return {"--timeout", "6"}; }
};

TEST_F(PartsHostileShortTimeout, MissingPartAndForeignCommit) {
  {
    Session a(server->port(), id), other(server->port(), id);
    ASSERT_TRUE(a.welcome_ok);
    EXPECT_EQ(a.put_part(part(0, 3, 0, kRec, 3 * kRec)).status, proto::Status::ok);
    // A connection that carried no part of the transfer cannot commit it.
    Message r = other.commit(part(0, 3, 0, kRec, 3 * kRec));
    EXPECT_EQ(r.status, proto::Status::refused) << r.text;
    // Parts 1 and 2 never come: the commit gives up after the idle timeout (6 s here).
    auto t0 = std::chrono::steady_clock::now();
    r = a.commit(part(0, 3, 0, kRec, 3 * kRec));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, proto::Status::integrity) << r.text;
    EXPECT_LT(secs, 15.0);
    a.bye();
    other.bye();
  }
  expect_nothing_left();
  expect_still_serving();
}

TEST_F(PartsHostileShortTimeout, AnotherClientKeyCannotJoinATransfer) {
  // A second identity, authorized too.
  fs::path id2 = ws.tmp / "other_id";
  proto::Identity other = files::load_or_create_identity(id2);
  write_text_file(ws.home / "authorized_keys", read_text_file(fs::path(id2.string() + ".pub")));
  {
    Session a(server->port(), id), mallory(server->port(), id2);
    ASSERT_TRUE(a.welcome_ok);
    ASSERT_TRUE(mallory.welcome_ok) << server->log();
    EXPECT_EQ(a.put_part(part(0, 2, 0, kRec, 2 * kRec)).status, proto::Status::ok);
    // Mallory sends "part 1" of a's transfer id: it becomes a transfer of her own instead, which
    // never completes; a's transfer still lacks part 1.
    EXPECT_EQ(mallory.put_part(part(1, 2, kRec, kRec, 2 * kRec)).status, proto::Status::ok);
    Message r = a.commit(part(0, 2, 0, kRec, 2 * kRec));
    EXPECT_EQ(r.status, proto::Status::integrity) << r.text;
    a.bye();
    mallory.bye();
  }
  (void)other;
  expect_nothing_left();
  expect_still_serving();
}

}  // namespace
}  // namespace aesxfer::test
