// The client's config file, -F, -o, -i and -v, through the binary: a loopback server started and
// stopped by the test (by its PID, tests/harness.h), a fresh $AESXFER_HOME for each side.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

void write_mode(const fs::path& p, const std::string& text, mode_t mode) {
  write_text_file(p, text);
  ASSERT_EQ(::chmod(p.c_str(), mode), 0);
}

// A server (its own home), a client home with no key of its own, and a key made by keygen in a
// third home and authorized on the server.
class ConfigCli : public ::testing::Test {
 protected:
  Workspace ws;  // ws.home: the server's
  TempDir client{"aesxfer-client"};
  TempDir keys{"aesxfer-keys"};
  std::unique_ptr<ServerProcess> server;
  std::string port;
  fs::path key;  // authorized on the server

  void SetUp() override {
    auto k = run_aesxfer({"keygen"}, keys.path(), 30);
    ASSERT_EQ(k.exit_code, 0) << k.describe();
    key = keys / "id_ed25519";
    auto a = run_aesxfer({"authorize", (keys / "id_ed25519.pub").string()}, ws.home, 30);
    ASSERT_EQ(a.exit_code, 0) << a.describe();
    server = std::make_unique<ServerProcess>(ws.home, ws.root);
    port = std::to_string(server->port());
    write_text_file(ws.local / "f", "hello");
  }
  void TearDown() override {
    if (server) {
      EXPECT_EQ(server->stop(), 0);
    }
  }
  // `aesxfer args...` with the client's home, and HOME for "~".
  ProcResult run(std::vector<std::string> args) {
    args.insert(args.begin(), AESXFER_BINARY);
    return run_process(args, {{"AESXFER_HOME", client.path().string()}, {"HOME", keys.path().string()}}, 60);
  }
  std::string f() const { return (ws.local / "f").string(); }
};

TEST_F(ConfigCli, HostBlockGivesHostNamePortCipherAndIdentityFile) {
  write_mode(client / "config",
             "# my servers\n"
             "Host other\n"
             "  Port 1\n"
             "Host box box2\n"
             "  HostName 127.0.0.1\n"
             "  Port " +
                 port +
                 "\n"
                 "  Cipher aes128-cbc\n"
                 "  IdentityFile ~/id_ed25519\n"  // HOME is the keys' directory
                 "Host *\n"
                 "  Cipher arcfour\n",
             0600);
  auto r = run({"send", f(), "box:g"});
  EXPECT_EQ(r.exit_code, 0) << r.describe() << server->log();
  EXPECT_EQ(read_text_file(ws.root / "g"), "hello");
  EXPECT_NE(r.out.find("(aes128-cbc, hmac-sha256,"), std::string::npos) << r.out;
  EXPECT_TRUE(server->wait_for_log("file=\"g\" bytes=5 cipher=aes128-cbc")) << server->log();
  EXPECT_FALSE(fs::exists(client / "id_ed25519")) << "the IdentityFile was used, no default key made";
  // known_hosts names the address connected to (HostName:Port), as ssh does.
  EXPECT_EQ(read_text_file(client / "known_hosts").rfind("127.0.0.1:" + port + " aesxfer-ed25519 ", 0), 0u);
  auto back = run({"recv", "box2:g", (ws.local / "back").string(), "-q"});
  EXPECT_EQ(back.exit_code, 0) << back.describe();
  EXPECT_EQ(read_text_file(ws.local / "back"), "hello");
}

TEST_F(ConfigCli, OptionOverridesConfigAndCommandLineOverridesBoth) {
  const std::string wrong = std::to_string(unused_port());
  write_mode(client / "config",
             "Host box\n  HostName 127.0.0.1\n  Port " + wrong + "\n  Cipher aes128-cbc\n  IdentityFile " +
                 key.string() + "\n",
             0600);
  auto refused = run({"send", f(), "box:a", "--timeout", "5"});
  EXPECT_EQ(refused.exit_code, 1) << "the config's port has no server: " << refused.describe();
  auto o =
      run({"send", f(), "box:b", "-o", "Port=" + port, "-o", "Cipher aes128-ctr", "-o", "Cipher=arcfour"});
  EXPECT_EQ(o.exit_code, 0) << o.describe();
  EXPECT_NE(o.out.find("(aes128-ctr, hmac-sha256,"), std::string::npos) << "first -o wins: " << o.out;
  auto cli = run({"send", f(), "box:c", "-o", "Port=" + wrong, "-P", port, "-o", "Cipher=aes128-ctr", "-c",
                  "aes128-gcm"});
  EXPECT_EQ(cli.exit_code, 0) << cli.describe();
  EXPECT_NE(cli.out.find("(aes128-gcm, aead,"), std::string::npos) << cli.out;
  EXPECT_EQ(read_text_file(ws.root / "c"), "hello");
  auto bad = run({"send", f(), "box:d", "-o", "Prot=1"});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_EQ(lines(bad.err), 1) << bad.err;
  EXPECT_NE(bad.err.find("-o 'Prot=1': unknown keyword 'Prot'"), std::string::npos) << bad.err;
}

TEST_F(ConfigCli, DashFSelectsAnotherFile) {
  write_mode(client / "config",
             "Host box\n  HostName 127.0.0.1\n  Port " + std::to_string(unused_port()) + "\n", 0600);
  write_mode(client / "other",
             "Host box\n  HostName 127.0.0.1\n  Port " + port + "\n  IdentityFile " + key.string() + "\n",
             0600);
  auto r = run({"send", f(), "box:g", "-F", (client / "other").string()});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "g"), "hello");
  auto none = run({"send", f(), "127.0.0.1:h", "-F", "none", "-P", port, "-i", key.string()});
  EXPECT_EQ(none.exit_code, 0) << none.describe();
  auto missing = run({"send", f(), "box:g", "-F", (client / "nope").string()});
  EXPECT_EQ(missing.exit_code, 2) << missing.describe();
  EXPECT_NE(missing.err.find("cannot read config file " + (client / "nope").string() + ": no such file"),
            std::string::npos)
      << missing.err;
}

TEST_F(ConfigCli, UnknownKeywordIsOneLineWithFileAndLine) {
  write_mode(client / "config", "Host box\n  HostName 127.0.0.1\n  Prot 7227\n", 0600);
  auto r = run({"send", f(), "box:g"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("aesxfer: " + (client / "config").string() +
                            ":3: unknown keyword 'Prot' (known: Host, HostName,",
                        0),
            0u)
      << r.err;
  write_mode(client / "config", "Port 70000\n", 0600);
  auto v = run({"recv", "box:g", (ws.local / "x").string()});
  EXPECT_EQ(v.exit_code, 2) << v.describe();
  EXPECT_NE(v.err.find("config:1: Port '70000': bad port (1 to 65535)"), std::string::npos) << v.err;
  EXPECT_FALSE(fs::exists(ws.root / "g"));
}

TEST_F(ConfigCli, ConfigWritableByOthersIsRefused) {
  for (mode_t mode : {mode_t(0666), mode_t(0620)}) {
    write_mode(client / "config", "Host box\n  HostName 127.0.0.1\n  Port " + port + "\n", mode);
    auto r = run({"send", f(), "box:g", "-i", key.string()});
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("bad owner or permissions on config file " + (client / "config").string()),
              std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(ws.root / "g"));
  ASSERT_EQ(::chmod((client / "config").c_str(), 0644), 0);  // readable by others is fine, as for ssh
  auto ok = run({"send", f(), "box:g", "-i", key.string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
  // Another user's file: the owner is named, not the mode (a twenty-eighth re-attack, N7: "mode
  // 0644 ... chmod go-w it"); and another user's link in a sticky directory is not followed.
  const fs::path theirs = ws.local / "their-config";
  write_mode(theirs, "Host box\n  Port 1\n", 0644);
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  auto r = run({"send", f(), "box:g", "-i", key.string(), "-F", theirs.string()});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("bad owner of config file " + theirs.string() + ": it belongs to uid 65534"),
            std::string::npos)
      << r.err;
  const StickyShare s(ws.local);
  fs::copy_file(client / "config", s.priv / "config");
  r = run({"send", f(), "box:g", "-i", key.string(), "-F", s.link("cfg", s.priv / "config").string()});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("cfg: a symbolic link owned by uid 65534 in a sticky directory"), std::string::npos)
      << r.err;
  // Nor their link in a directory of their own, to a file they do not own (files::foreign_reach,
  // the rule of every path the user types).
  const fs::path their_dir = ws.local / "their-dir";
  fs::create_directories(their_dir);
  fs::create_symlink(client / "config", their_dir / "cfg");
  ASSERT_EQ(::lchown((their_dir / "cfg").c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chown(their_dir.c_str(), kNobody, kNobody), 0);
  r = run({"send", f(), "box:g", "-i", key.string(), "-F", (their_dir / "cfg").string()});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("cfg: reached through a symbolic link of uid 65534 to what uid 0 owns"),
            std::string::npos)
      << r.err;
}

TEST_F(ConfigCli, IdentityMustBeAuthorizedAndPrivate) {
  TempDir stranger("aesxfer-stranger");
  ASSERT_EQ(run_aesxfer({"keygen"}, stranger.path(), 30).exit_code, 0);
  std::vector<std::string> send = {"send", f(), "127.0.0.1:g", "-P", port, "-i"};
  auto s = send;
  s.push_back((stranger / "id_ed25519").string());
  auto refused = run(s);
  EXPECT_EQ(refused.exit_code, 1) << refused.describe();
  EXPECT_NE(refused.err.find("refused the login"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find((stranger / "id_ed25519").string() + ".pub holds it"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(ws.root / "g"));
  auto k = send;
  k.push_back(key.string());
  auto ok = run(k);
  EXPECT_EQ(ok.exit_code, 0) << ok.describe();
  EXPECT_EQ(read_text_file(ws.root / "g"), "hello");
  ASSERT_EQ(::chmod(key.c_str(), 0640), 0);
  auto open_key = run(k);
  EXPECT_EQ(open_key.exit_code, 1) << open_key.describe();
  EXPECT_NE(open_key.err.find("identity file " + key.string() + " is accessible by others (mode 0640)"),
            std::string::npos)
      << open_key.err;
  auto m = send;
  m.push_back((keys / "missing").string());
  auto missing = run(m);
  EXPECT_EQ(missing.exit_code, 1) << missing.describe();
  EXPECT_NE(missing.err.find("cannot read identity file " + (keys / "missing").string() + ": no such file"),
            std::string::npos)
      << missing.err;
  EXPECT_FALSE(fs::exists(keys / "missing")) << "-i never creates a key";
}

TEST_F(ConfigCli, VerboseShowsHandshakeHostKeySuiteBuffersAndRoundTrip) {
  write_mode(client / "config",
             "Host box\n  HostName 127.0.0.1\n  Port " + port + "\n  IdentityFile " + key.string() + "\n",
             0600);
  auto quiet = run({"send", f(), "box:g"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.describe();
  EXPECT_EQ(quiet.err.find("debug"), std::string::npos) << quiet.err;
  auto r = run({"send", f(), "box:g", "-v", "-c", "aes128-cbc"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string hp = "127.0.0.1:" + port;
  for (const std::string& want :
       {"debug1: reading configuration " + (client / "config").string() + "\n",
        "debug1: " + (client / "config").string() + " line 1: applying options for box\n",
        "debug1: identity " + key.string() + " (SHA256:",
        "debug1: connected to 127.0.0.1 port " + port + " in ",
        std::string(
            "debug1: sent ClientHello: protocol 6, cipher aes128-cbc, MAC hmac-sha256, checksum xxh128, "
            "record size 262144\n"),
        std::string("debug1: received ServerHello ("), "debug1: host key for " + hp + " is known: SHA256:",
        std::string("debug1: sent ClientAuth: signature by SHA256:"),
        std::string(" over the transcript, key and signature sealed (AES-128-GCM handshake key)\n"),
        std::string("debug1: login accepted"), std::string("debug1: cipher aes128-cbc ["),
        std::string("MAC hmac-sha256 [sha256 "), std::string("checksum xxh128 [xxh3 "),
        std::string("record size 262144 bytes\n"), std::string("debug1: socket buffers: SO_SNDBUF "),
        std::string("debug1: round trip "),
        std::string("debug1: streams: auto, 1 per large file, decided once (base round trip "),
        std::string(" ms, below 10 ms)\n"),
        "debug1: " + f() + ": 1 stream, 1 record of up to 262144 bytes\n"})
    EXPECT_NE(r.err.find(want), std::string::npos) << want << "\n" << r.err;
  EXPECT_EQ(r.err.find("debug2:"), std::string::npos) << r.err;
  // The host key shown is the one the server prints at start.
  const std::string log = server->log();
  const size_t at = log.find("host_key=SHA256:");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string fp = log.substr(at + 9, log.find_first_of(" \n", at + 9) - at - 9);
  EXPECT_NE(r.err.find("is known: " + fp + " matches"), std::string::npos) << fp << "\n" << r.err;
  // The summary line keeps -v's checksum.
  EXPECT_NE(r.out.find(", xxh128 "), std::string::npos) << r.out;
  // The socket buffer and round-trip lines carry numbers.
  const size_t sb = r.err.find("SO_SNDBUF ");
  EXPECT_GT(std::stol(r.err.substr(sb + 10)), 0) << r.err;
  const size_t rcv = r.err.find("SO_RCVBUF ");
  EXPECT_GT(std::stol(r.err.substr(rcv + 10)), 0) << r.err;
  const size_t rt = r.err.find("round trip ");
  EXPECT_GT(std::stod(r.err.substr(rt + 11)), 0.0) << r.err;
  auto vv = run({"send", f(), "box:g", "-vv", "-q"});
  ASSERT_EQ(vv.exit_code, 0) << vv.describe();
  EXPECT_NE(vv.err.find("debug2: ClientHello is "), std::string::npos) << vv.err;
  EXPECT_NE(vv.err.find("debug2: TCP: rtt variance "), std::string::npos) << vv.err;
  EXPECT_NE(vv.err.find("debug1: cipher aes128-gcm ["), std::string::npos) << vv.err;
}

}  // namespace
}  // namespace aesxfer::test
