// serve --ciphers / --macs (issue 13, item 10): allow-lists like sshd's Ciphers and MACs. A client
// asking for anything else is refused in the ServerHello (status cipher or MAC, as for an unknown
// one) and told so; the default allows every cipher.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

class ServerPolicy : public ServerTest {
 protected:
  std::vector<std::string> server_args() const override {
    return {"--ciphers", "aes128-gcm,aes128-cbc", "--macs", "hmac-sha256"};
  }
  fs::path id = ws.home / "id_ed25519";
};

TEST_F(ServerPolicy, OnlyAllowedCiphersAndMacsGetASession) {
  EXPECT_TRUE(HandSession(server->port(), id, "aes128-gcm", "none").welcome_ok);
  EXPECT_TRUE(HandSession(server->port(), id, "aes128-cbc", "hmac-sha256").welcome_ok);
  try {
    HandSession s(server->port(), id, "arcfour", "hmac-sha256");
    ADD_FAILURE() << "arcfour was allowed";
  } catch (const proto::Failure& f) {
    EXPECT_NE(std::string(f.what()).find("allow cipher arcfour"), std::string::npos) << f.what();
  }
  try {
    HandSession s(server->port(), id, "aes128-ctr", "hmac-sha256");
    ADD_FAILURE() << "aes128-ctr was allowed";
  } catch (const proto::Failure& f) {
    EXPECT_NE(std::string(f.what()).find("cipher"), std::string::npos) << f.what();
  }
  EXPECT_TRUE(server->wait_for_log("which --ciphers does not allow")) << server->log();
}

TEST_F(ServerPolicy, TheClientSaysWhy) {
  fs::path f = ws.local / "a.bin";
  write_random_file(f, 1000, 1);
  auto r = run({"send", f.string(), "127.0.0.1:a.bin", "-c", "arcfour", "-q"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("allow cipher arcfour (it allows: aes128-gcm, aes128-cbc)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(ws.root / "a.bin"));
  r = run({"send", f.string(), "127.0.0.1:a.bin", "-c", "aes128-cbc", "-m", "hmac-sha256", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "a.bin"), sha256_file(f));
}

TEST(ServerPolicyOptions, UnknownNamesAreRefusedAtStart) {
  Workspace ws;
  auto r = run_aesxfer({"serve", "--listen", "127.0.0.1", "-P", "0", "--root", ws.root.string(), "--ciphers",
                        "aes128-gcm,rot13"},
                       ws.home, 20);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown cipher 'rot13'"), std::string::npos) << r.err;
  r = run_aesxfer(
      {"serve", "--listen", "127.0.0.1", "-P", "0", "--root", ws.root.string(), "--macs", "crc32"}, ws.home,
      20);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown MAC 'crc32'"), std::string::npos) << r.err;
}

// A root removed and made again while the server runs: the server holds the deleted directory,
// where puts would vanish and listings show nothing, all with exit 0. Each login is refused with
// the reason, on both ends, until the server is restarted (a re-attack's known item).
class RemovedRoot : public ServerTest {};

TEST_F(RemovedRoot, LoginsAreRefusedWithTheReasonUntilARestart) {
  const fs::path f = ws.local / "a.bin";
  write_random_file(f, 1000, 2);
  auto r = run({"send", f.string(), "127.0.0.1:a.bin", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  fs::remove_all(ws.root);
  fs::create_directory(ws.root);
  for (int i = 0; i < 2; ++i) {
    r = run({"send", f.string(), "127.0.0.1:a.bin", "-q"});
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("the server's root directory was removed after the server started (restart it)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    // Not about the key: no advice to authorize it (a twenty-fifth re-attack, N1b).
    EXPECT_EQ(r.err.find("authorized_keys"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::is_empty(ws.root));
  EXPECT_TRUE(server->wait_for_log("was removed after the server started; restart the server", 5, 2))
      << server->log();
}

// A twenty-third re-attack (N3): `serve --root /tmp/share` served whatever another user's link at
// that name pointed to (the root was resolved by reading the link, where the kernel's
// fs.protected_symlinks never looks). Refused at start with the reason.
TEST(ServerPolicyOptions, ARootThroughAnotherUsersLinkInAStickyDirectoryIsRefused) {
  Workspace ws;
  const StickyShare s(ws.local);
  auto r =
      run_aesxfer({"serve", "--listen", "127.0.0.1", "-P", "0", "--root", s.link("srvlink", s.priv).string()},
                  ws.home, 20);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("srvlink: a symbolic link owned by uid 65534 in a sticky directory others can write "
                       "to (not followed, as fs.protected_symlinks refuses it)"),
            std::string::npos)
      << r.describe();
  EXPECT_EQ(r.err.find("listening"), std::string::npos) << r.describe();
}

// A twenty-sixth re-attack (N2): --port-file followed another user's link partway along its path
// and renamed the port file into the directory it chose (over a file of that name there).
TEST(ServerPolicyOptions, APortFileThroughAnotherUsersLinkIsRefused) {
  Workspace ws;
  const StickyShare s(ws.local);
  const fs::path& priv = s.priv;
  write_text_file(priv / "notes", "keep\n");
  auto r = run_aesxfer({"serve", "--listen", "127.0.0.1", "-P", "0", "--root", ws.root.string(),
                        "--port-file", (s.link("kd", priv) / "notes").string()},
                       ws.home, 20);
  // A usage error now, as any --port-file that cannot be written (app/cli_checks.h unwritable());
  // the server's own open of the directory is the same walk, should the link appear after it.
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("kd: a symbolic link owned by uid 65534 in a sticky directory"), std::string::npos)
      << r.describe();
  EXPECT_EQ(read_text_file(priv / "notes"), "keep\n");
  // Refused before the start lines: a supervisor reading the log never sees "listening" from a
  // server that then stops (a twenty-seventh re-attack, N1).
  EXPECT_EQ(r.err.find("listening"), std::string::npos) << r.describe();
}

}  // namespace
}  // namespace aesxfer::test
