// A fifteenth re-attack, K3 and K4: the server's log must say which of the authorized keys did
// what, and a listing that the server walked and the client then abandoned must leave a line.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "files/keystore.h"
#include "proto/handshake.h"
#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using ServerLogWho = ServerTest;

// Every session's first line after the handshake names the client key by its fingerprint; the
// requests that follow carry the same peer=, so each of them is tied to a key.
TEST_F(ServerLogWho, AnAcceptedSessionNamesItsKey) {
  write_text_file(ws.local / "f", "f\n");
  auto r = run({"send", "-q", (ws.local / "f").string(), "127.0.0.1:f"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const proto::Identity id = files::load_or_create_identity(ws.home / "id_ed25519");
  const std::string key = "msg=accepted key=" + proto::fingerprint(id.pk);
  ASSERT_TRUE(server->wait_for_log(key)) << server->log();
  ASSERT_TRUE(server->wait_for_log("op=put file=\"f\"")) << server->log();
  // The put's line has the accepted line's peer.
  const std::string log = server->log();
  const size_t at = log.find(key);
  const size_t peer = log.rfind("peer=", at);
  ASSERT_NE(peer, std::string::npos) << log;
  const std::string who = log.substr(peer, log.find(' ', peer) - peer);
  EXPECT_NE(log.find(who + " op=put file=\"f\""), std::string::npos) << log;
}

// A client asks for a listing that cannot fit the sockets' buffers and resets the connection
// without reading: the server walked the tree for nothing, and says so in its log (it said
// nothing but "connection lost").
TEST_F(ServerLogWho, AnAbandonedListingIsLogged) {
  const fs::path big = ws.root / "big";
  fs::create_directories(big);
  const std::string pad(200, 'n');
  for (int i = 0; i < 30000; ++i) std::ofstream(big / (pad + std::to_string(i)));  // ~6 MB of listing
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  const int small = 4096;  // a small window: the listing stays in the server's send path
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(server->port());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  {
    HandSession s(fd, files::load_or_create_identity(ws.home / "id_ed25519"));
    ASSERT_TRUE(s.welcome_ok);
    s.conn().send_message(make_request(proto::Op::list, "big"));
    s.conn().flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const linger l{1, 0};  // a reset: nothing of the listing is ever read
    ::setsockopt(s.conn().fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  EXPECT_TRUE(server->wait_for_log("op=list dir=\"big\" entries=30000 result=\"failed: ", 20))
      << server->log();
}

}  // namespace
}  // namespace aesxfer::test
