// A client ends every session with Bye, after a refused request as after a
// success (docs/PROTOCOL.md 3.3), so that a server can tell a finished session from a broken one.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_server.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

// Waits up to 5 s for the fake server to have seen n Byes (the client may exit before the fake
// server's thread has read the last record).
bool wait_byes(FakeServer& f, int n) {
  for (int i = 0; i < 250 && f.byes() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return f.byes() == n;
}

class ByeAfterRefusal : public testing::Test {
 protected:
  Workspace ws;
  ProcResult run(std::vector<std::string> a, uint16_t port) {
    for (const char* x : {"-P", "", "--timeout", "10"}) a.push_back(x);
    a[a.size() - 3] = std::to_string(port);
    return run_aesxfer(a, ws.home, 60);
  }
};

// Every request refused: the command fails with the server's reason, and still says Bye.
TEST_F(ByeAfterRefusal, RecvAndSendSayByeAfterARefusal) {
  FakeServer fake([](net::Conn& c, const proto::Message& m) {
    c.send_message(
        response(m.op == proto::Op::get ? proto::Status::not_found : proto::Status::permission, "no"));
  });
  auto r = run({"recv", "127.0.0.1:missing", (ws.local / "out").string(), "-q"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(wait_byes(fake, 1)) << "recv: no Bye after the refusal; requests: " << fake.seen_text();
  write_text_file(ws.local / "a", "a");
  r = run({"send", (ws.local / "a").string(), "127.0.0.1:a", "-q"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(wait_byes(fake, 2)) << "send: no Bye after the refusal; requests: " << fake.seen_text();
  EXPECT_FALSE(std::filesystem::exists(ws.local / "out"));
}

// A refused request leaves the session usable: with two files, the second is still sent on the
// same connection after the first was refused, then Bye.
TEST_F(ByeAfterRefusal, SessionGoesOnAfterARefusal) {
  FakeServer fake([](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat) {  // what a server answers for a directory (Client::is_remote_dir)
      c.send_message(response(proto::Status::is_directory, m.path + ": is a directory"));
      return;
    }
    c.send_message(response(proto::Status::permission, "no"));
  });
  write_text_file(ws.local / "a", "a");
  write_text_file(ws.local / "b", "b");
  auto r =
      run({"send", (ws.local / "a").string(), (ws.local / "b").string(), "127.0.0.1:dir", "-q"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(wait_byes(fake, 1)) << fake.seen_text();
  const std::string seen = fake.seen_text();
  size_t puts = 0;
  for (size_t at = seen.find("put dir\n"); at != std::string::npos; at = seen.find("put dir\n", at + 1))
    ++puts;
  EXPECT_EQ(puts, 2u) << "both files asked for in one session:\n" << seen;
}

// The client decides on the refusal's status, never on its text: "(use -r)" follows status 10
// (is a directory), not a text that happens to say so under another status.
TEST_F(ByeAfterRefusal, HintsFollowTheStatusNotTheText) {
  for (const auto st : {proto::Status::is_directory, proto::Status::bad_path}) {
    FakeServer fake([st](net::Conn& c, const proto::Message& m) {
      c.send_message(response(st, m.path + ": is a directory"));
    });
    auto r = run({"recv", "127.0.0.1:d", (ws.local / "out").string(), "-q"}, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(r.err.find("(use -r)") != std::string::npos, st == proto::Status::is_directory)
        << "status " << int(st) << ": " << r.err;
  }
}

}  // namespace
}  // namespace aesxfer::test
