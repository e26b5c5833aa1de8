// Issue 24, item A1: connections that have not logged in have their own bounded pool, as sshd's
// MaxStartups and PerSourceMaxStartups, and never take a --max-sessions slot:
//
//   Startups.IdleConnectionsDoNotLockOutAnAuthorizedClient   idle connections held open and renewed
//                                                            (more than --max-sessions): a real
//                                                            client gets in, every time
//   Startups.FullPoolTellsTheClientServerBusy                 the pool full (FULL idle connections,
//                                                            renewed): a client gets in or reads
//                                                            "server busy: ...", never "is it an
//                                                            aesxfer server?"
//   Startups.RandomEarlyDropBetweenStartAndFull               between START and FULL some are
//                                                            dropped, some get in
//   Startups.PerSourceLimitSparesOtherSources                 --per-source-max-startups
//   Startups.OptionIsCheckedAtStart                           a bad START:RATE:FULL is a usage error
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <thread>

#include "proto/handshake.h"
#include "server/server.h"
#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/proc_status.h"

namespace aesxfer::test {
namespace {

using Clock = std::chrono::steady_clock;

struct Startups : testing::Test {
  Workspace ws;
  std::unique_ptr<ServerProcess> server;
  void start(const std::vector<std::string>& args) {
    server = std::make_unique<ServerProcess>(ws.home, ws.root, args);
    write_random_file(ws.local / "f.bin", 20000, 24);
  }
  void TearDown() override {
    if (!server) return;
    EXPECT_EQ(server->stop(), 0);
    EXPECT_EQ(sanitizer_findings(server->log()), "");
    if (HasFailure()) std::cerr << "--- server log ---\n" << server->log();
  }
  ProcResult send(const std::string& name) {
    return run_aesxfer({"send", (ws.local / "f.bin").string(), "127.0.0.1:" + name, "-P",
                        std::to_string(server->port()), "--timeout", "20", "-q"},
                       ws.home, 60);
  }
};

// What a connection from `from` is told before it says a word: true when the server answered
// with a busy ServerHello (status 5) within `wait_ms`, false when it said nothing (admitted to
// the pool: it waits for a ClientHello).
bool refused_busy(uint16_t port, const std::string& from, int wait_ms) {
  const int fd = connect_loopback_from(port, from);
  if (fd < 0) return false;
  std::vector<uint8_t> got;
  const auto deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
  while (got.size() < 179 && Clock::now() < deadline) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 50) <= 0) continue;
    uint8_t b[256];
    const ssize_t n = ::recv(fd, b, sizeof b, 0);
    if (n <= 0) break;
    got.insert(got.end(), b, b + n);
  }
  ::close(fd);
  // u32 length 175, type 2, "AESXFER1", version, status 5.
  return got.size() == 179 && got[4] == 2 && got[13] == proto::kVersion && got[14] == 5;
}

TEST_F(Startups, IdleConnectionsDoNotLockOutAnAuthorizedClient) {
  // Eight idle connections, renewed as the 2 s handshake deadline closes them: more than the
  // two sessions allowed (were they counted at accept, they would take every slot and the client
  // would read "closed the connection during the handshake"), fewer than the pool's START (10), so nothing is
  // dropped.
  start({"--max-sessions", "2", "--handshake-timeout", "2", "--timeout", "10"});
  IdleFlood flood(server->port(), 8);
  ASSERT_TRUE(flood.wait_held(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the server accepted them all
  const auto t0 = Clock::now();
  int tries = 0;
  while (tries < 6 || Clock::now() - t0 < std::chrono::milliseconds(2500)) {
    ProcResult r = send("in" + std::to_string(tries) + ".bin");
    EXPECT_EQ(r.exit_code, 0) << "try " << tries << ": " << r.describe();
    ++tries;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(flood.renewed(), 0) << "the idle connections were never renewed";
  EXPECT_EQ(sha256_file(ws.root / "in0.bin"), sha256_file(ws.local / "f.bin"));
}

TEST_F(Startups, FullPoolTellsTheClientServerBusy) {
  start({"--max-startups", "4", "--handshake-timeout", "2", "--timeout", "10"});
  IdleFlood flood(server->port(), 4);
  ASSERT_TRUE(flood.wait_held(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int busy = 0, in = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < 8 || Clock::now() - t0 < std::chrono::milliseconds(2500); ++i) {
    ProcResult r = send("full" + std::to_string(i) + ".bin");
    if (r.exit_code == 0) {
      ++in;  // a moment when the server had closed an idle one and the flood had not reopened it
      continue;
    }
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("server busy: "), std::string::npos) << r.describe();
    EXPECT_EQ(r.err.find("is it an aesxfer server"), std::string::npos) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.describe();
    EXPECT_FALSE(fs::exists(ws.root / ("full" + std::to_string(i) + ".bin")));
    ++busy;
  }
  std::printf("[startups] pool full: %d refused busy, %d got in, %d idle connections renewed\n", busy, in,
              flood.renewed());
  EXPECT_GT(busy, 0);
  EXPECT_GT(flood.renewed(), 0);
  EXPECT_TRUE(server->wait_for_log("unauthenticated connections already (--max-startups 4:100:4)"))
      << server->log();
}

// A forty-fifth re-attack (A45-3): a connection turned away busy was drained, 512 bytes a read,
// for a whole second: 60 connections blasting data at the drains cost the io thread 4.4 times the
// attacker's CPU. A drain now reads at most 16 KiB (more than a ClientHello) and then closes: a
// peer that goes on sending has its connection reset, whatever the timing.
TEST_F(Startups, ADrainedConnectionThatKeepsSendingIsClosed) {
  start({"--max-startups", "2", "--handshake-timeout", "10", "--timeout", "10"});
  IdleFlood flood(server->port(), 2);
  ASSERT_TRUE(flood.wait_held(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int fd = connect_loopback(server->port());
  ASSERT_GE(fd, 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char first = 0;
  ASSERT_EQ(::recv(fd, &first, 1, 0), 1);  // the busy ServerHello has come
  const std::vector<char> chunk(64 << 10, 'x');
  size_t sent = 0;
  int err = 0;
  while (sent < (64u << 20)) {
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      err = errno;
      break;
    }
    sent += size_t(n);
  }
  ::close(fd);
  std::printf("[startups] a drained connection took %zu bytes before its reset (errno %d)\n", sent, err);
  EXPECT_TRUE(err == ECONNRESET || err == EPIPE) << "sent " << sent << " bytes, errno " << err;
  EXPECT_LT(sent, 64u << 20);
}

// A thirteenth re-attack (H2): with the pool full, every connection turned away wrote a log line,
// 4 MB in 2 s from one loop of connects. One line a second at most now, the next saying how many
// went without one.
TEST_F(Startups, DroppedConnectionsCostTheLogALineASecond) {
  start({"--max-startups", "2", "--handshake-timeout", "10", "--timeout", "10"});
  IdleFlood flood(server->port(), 2);
  ASSERT_TRUE(flood.wait_held(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = Clock::now();
  int tried = 0;
  while (Clock::now() - t0 < std::chrono::milliseconds(2500)) {
    const int fd = connect_loopback(server->port());
    if (fd >= 0) ::close(fd);
    ++tried;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(server->wait_for_log("dropped_without_a_line=", 5)) << server->log().substr(0, 4000);
  const std::string log = server->log();
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("dropped before the handshake", at)) != std::string::npos; ++at) ++lines;
  std::printf("[startups] %d connections in %.1f s while the pool was full: %zu log lines\n", tried, secs,
              lines);
  EXPECT_GT(tried, 50);
  EXPECT_GE(lines, 1u);
  EXPECT_LE(double(lines), secs + 2) << log.substr(0, 4000);
}

// The same bound for connections admitted to the pool that fail before their handshake ends (a
// twenty-fourth re-attack, N2: a connect-and-close loop that never filled the pool wrote a line
// for each, 2.6 MB in 3 s): one line a second, the next one counting those left out.
TEST_F(Startups, FailedHandshakesCostTheLogALineASecond) {
  start({});
  const auto t0 = Clock::now();
  int tried = 0;
  while (Clock::now() - t0 < std::chrono::milliseconds(2500)) {
    const int fd = connect_loopback(server->port());
    if (fd >= 0) {
      (void)!::write(fd, "GET / HTTP/1.0\r\n\r\n", 18);
      ::close(fd);
    }
    ++tried;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // below --max-startups' START
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(server->wait_for_log("failed_handshakes_without_a_line=", 5)) << server->log().substr(0, 4000);
  const std::string log = server->log();
  // Only the failed handshakes' own lines: a slow server (TSan) also fills the pool, and the drops
  // have their own line a second (DroppedConnectionsCostTheLogALineASecond).
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("error=\"handshake failed", at)) != std::string::npos; ++at) ++lines;
  std::printf("[startups] %d failed handshakes in %.1f s: %zu log lines\n", tried, secs, lines);
  EXPECT_GT(tried, 50);
  EXPECT_LE(double(lines), secs + 2) << log.substr(0, 4000);
}

TEST_F(Startups, RandomEarlyDropBetweenStartAndFull) {
  // Two idle connections reach START: each new one is dropped with probability 50%, so 40 tries
  // show both outcomes (all alike: 2^-39). A dropped one is told busy; one let in logs in.
  start({"--max-startups", "2:50:6", "--timeout", "10"});
  IdleFlood flood(server->port(), 2);
  ASSERT_TRUE(flood.wait_held(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int dropped = 0, in = 0;
  for (int i = 0; i < 40; ++i) {
    try {
      HandSession s(server->port(), ws.home / "id_ed25519");
      EXPECT_TRUE(s.welcome_ok);
      ++in;
      s.bye();
    } catch (const proto::Failure& f) {
      EXPECT_NE(std::string(f.what()).find("server busy: "), std::string::npos) << f.what();
      ++dropped;
    }
  }
  std::printf("[startups] 2:50:6 with 2 idle: %d dropped, %d in\n", dropped, in);
  EXPECT_GT(dropped, 0);
  EXPECT_GT(in, 0);
}

TEST_F(Startups, PerSourceLimitSparesOtherSources) {
  start({"--per-source-max-startups", "3", "--timeout", "10"});
  IdleFlood flood(server->port(), 3, "127.0.0.2");
  ASSERT_TRUE(flood.wait_held(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // A fourth from the same source is told busy at once; other sources are let in.
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(refused_busy(server->port(), "127.0.0.2", 3000)) << "try " << i;
    ProcResult r = send("other" + std::to_string(i) + ".bin");
    EXPECT_EQ(r.exit_code, 0) << r.describe();
  }
  EXPECT_FALSE(refused_busy(server->port(), "127.0.0.3", 500));
  EXPECT_TRUE(server->wait_for_log("unauthenticated connections from 127.0.0.2 already")) << server->log();
}

// The third re-attack (R1): a source was one exact address, and an IPv6 client has a /64 or more
// to pick from. --per-source-netblock masks the address first, as sshd's PerSourceNetBlockSize.
TEST_F(Startups, PerSourceLimitCountsANetblock) {
  start({"--per-source-max-startups", "3", "--per-source-netblock", "24:64", "--timeout", "10"});
  IdleFlood flood(server->port(), 3, "127.0.0.2");
  ASSERT_TRUE(flood.wait_held(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(refused_busy(server->port(), "127.0.0.9", 3000));  // the same /24
  EXPECT_FALSE(refused_busy(server->port(), "127.0.1.2", 500));  // another one
  EXPECT_TRUE(server->wait_for_log("unauthenticated connections from 127.0.0.0/24 already")) << server->log();
  EXPECT_TRUE(server->wait_for_log("per_source_netblock=24:64")) << server->log();
}

// A uid no account and no other test uses: RLIMIT_NPROC counts every task of the real uid, so a
// server alone under it has exactly the tasks the test gives it (nobody's count would include
// other tests' processes).
// One for each test, which ctest -j may run at once.
constexpr uid_t kTaskUid = 64999, kTaskUid2 = 64998;

// A server that runs as `uid` under a soft RLIMIT_NPROC of `tasks` (root is exempt from the
// limit: the test sets it on itself for the fork to inherit, then restores it).
std::unique_ptr<ServerProcess> server_with_task_limit(const Workspace& ws, uid_t uid, rlim_t tasks,
                                                      const std::vector<std::string>& args,
                                                      const std::map<std::string, std::string>& env = {}) {
  rlimit saved{};
  if (::getrlimit(RLIMIT_NPROC, &saved) != 0) throw std::runtime_error("getrlimit");
  rlimit low = saved;
  low.rlim_cur = tasks;
  if (::setrlimit(RLIMIT_NPROC, &low) != 0) throw std::runtime_error("setrlimit");
  std::unique_ptr<ServerProcess> server;
  try {
    server = std::make_unique<ServerProcess>(ws.home, ws.root, args, uid, env);
  } catch (...) {
    ::setrlimit(RLIMIT_NPROC, &saved);
    throw;
  }
  ::setrlimit(RLIMIT_NPROC, &saved);
  return server;
}

// A forty-first re-attack (A-F1b): when the process may start no more threads (RLIMIT_NPROC of a
// service user, systemd's TasksMax, a container's pids.max), every connect wrote a log line
// (1,100 in 1.3 s) and an authorized client read "closed the connection during the handshake".
// Now such a connection is told busy, as one over the pool is, within the drops' line a second;
// serve warns at start that the limit is below what its options can use; once threads are
// free again the next client gets in.
TEST(StartupsTasks, PastTheTaskLimitAClientIsToldBusyAndTheLogKeepsItsBudget) {
  Workspace ws;
  write_random_file(ws.local / "f.bin", 20000, 24);
  hand_over(ws, kTaskUid);
  auto server =
      server_with_task_limit(ws, kTaskUid, 12, {"--max-startups", "200", "--handshake-timeout", "30"});
  EXPECT_TRUE(server->wait_for_log("the task limit (12, RLIMIT_NPROC")) << server->log();
  auto send = [&](const std::string& name) {
    return run_aesxfer({"send", (ws.local / "f.bin").string(), "127.0.0.1:" + name, "-P",
                        std::to_string(server->port()), "--timeout", "20", "-q"},
                       client_home(ws), 60);
  };
  int tried = 0;
  double secs = 0;
  {
    IdleFlood flood(server->port(), 16);  // more than the threads there are: the rest renew at once
    const auto t0 = Clock::now();
    while (!server->wait_for_log("no thread for a session", 0.05) &&
           Clock::now() - t0 < std::chrono::seconds(10))
      ;
    ProcResult r = send("busy.bin");
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("server busy: "), std::string::npos) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.describe();
    EXPECT_FALSE(fs::exists(ws.root / "busy.bin"));
    const auto t1 = Clock::now();
    while (Clock::now() - t1 < std::chrono::milliseconds(1500)) {
      const int fd = connect_loopback(server->port());
      if (fd >= 0) ::close(fd);
      ++tried;
    }
    secs = std::chrono::duration<double>(Clock::now() - t0).count();
  }  // the flood closes its connections: their threads end
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::string log = server->log();
  size_t lines = 0;
  for (const auto& l : nonempty_lines(log)) lines += l.find(" error=") != std::string::npos;
  std::printf("[startups] past the task limit: %d connections in %.1f s, %zu error lines\n", tried, secs,
              lines);
  EXPECT_GT(tried, 50);
  EXPECT_LE(double(lines), 2 * (secs + 2)) << log.substr(0, 4000);
  // Once the flood's threads have ended (on a loaded machine that takes a while), a client gets in.
  ProcResult in = send("in.bin");
  for (int i = 0; i < 40 && in.exit_code != 0 && in.err.find("server busy") != std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    in = send("in.bin");
  }
  EXPECT_EQ(in.exit_code, 0) << in.describe() << server->log();
  EXPECT_EQ(server->stop(), 0);
}

// A forty-second re-attack (A-F1): at the task limit a session whose own thread fitted could not
// start its file reader or writer thread: the session ended with "Resource temporarily
// unavailable" and the client read a closed connection. The stream runs inline instead. Three
// idle connections and the session take the five tasks the limit allows (with the io thread);
// AESXFER_PIPELINE=threads asks for the thread that any non-loopback peer gets.
TEST(StartupsTasks, AtTheTaskLimitAFileMovesWithoutItsReaderThread) {
  Workspace ws;
  write_random_file(ws.root / "big.bin", 3 << 20, 25);
  write_random_file(ws.local / "up.bin", 3 << 20, 26);
  hand_over(ws, kTaskUid2);
  auto server =
      server_with_task_limit(ws, kTaskUid2, 5, {"--max-startups", "200", "--handshake-timeout", "30"},
                             {{"AESXFER_PIPELINE", "threads"}});
  IdleFlood flood(server->port(), 3);
  ASSERT_TRUE(flood.wait_held(5));
  // The server took them: its io thread and three session threads, the limit's fifth is the get's.
  for (int i = 0; i < 500 && proc_status(server->pid(), "Threads") < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(proc_status(server->pid(), "Threads"), 4) << server->log();
  const std::string port = std::to_string(server->port());
  ProcResult get = run_aesxfer({"recv", "127.0.0.1:big.bin", (ws.local / "big.bin").string(), "-P", port,
                                "--timeout", "20", "--retries", "0", "-q"},
                               client_home(ws), 60);
  EXPECT_EQ(get.exit_code, 0) << get.describe() << server->log();
  EXPECT_EQ(sha256_file(ws.local / "big.bin"), sha256_file(ws.root / "big.bin"));
  ProcResult put = run_aesxfer({"send", (ws.local / "up.bin").string(), "127.0.0.1:up.bin", "-P", port,
                                "--timeout", "20", "--retries", "0", "-q"},
                               client_home(ws), 60);
  EXPECT_EQ(put.exit_code, 0) << put.describe() << server->log();
  EXPECT_EQ(sha256_file(ws.root / "up.bin"), sha256_file(ws.local / "up.bin"));
  EXPECT_EQ(server->log().find("Resource temporarily unavailable"), std::string::npos) << server->log();
  EXPECT_EQ(server->stop(), 0);
}

TEST(StartupsOption, SourceBlocksAsSshdCountsThem) {
  EXPECT_EQ(server::source_block("192.0.2.77", 32, 64), "192.0.2.77");
  EXPECT_EQ(server::source_block("192.0.2.77", 24, 64), "192.0.2.0/24");
  EXPECT_EQ(server::source_block("::ffff:192.0.2.77", 16, 64), "192.0.0.0/16");  // a mapped IPv4
  EXPECT_EQ(server::source_block("2001:db8:1:2:3:4:5:6", 32, 64), "2001:db8:1:2::/64");
  EXPECT_EQ(server::source_block("2001:db8:1:2:3:4:5:6", 32, 56), "2001:db8:1::/56");
  EXPECT_EQ(server::source_block("2001:db8:1:12:3:4:5:6", 32, 60), "2001:db8:1:10::/60");
  EXPECT_EQ(server::source_block("2001:db8::1", 32, 128), "2001:db8::1");
  EXPECT_EQ(server::source_block("?", 24, 64), "?");
  server::ServerOptions o;
  EXPECT_EQ(server::parse_netblock("24:48", o), "");
  EXPECT_EQ(o.source_v4_bits, 24u);
  EXPECT_EQ(o.source_v6_bits, 48u);
  for (const char* bad : {"0:64", "33:64", "24:129", "24:", ":64", "a:b", "24:64:1"})
    EXPECT_NE(server::parse_netblock(bad, o), "") << bad;
}

TEST(StartupsOption, OptionIsCheckedAtStart) {
  Workspace ws;
  for (const char* bad : {"10:30", "10:130:100", "50:30:10", "0", "a:b:c", "10:30:100:5"}) {
    ProcResult r =
        run_aesxfer({"serve", "--max-startups", bad, "-P", "0", "--root", ws.root.string()}, ws.home, 20);
    EXPECT_NE(r.exit_code, 0) << bad << ": " << r.describe();
    EXPECT_NE(r.err.find("--max-startups"), std::string::npos) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.describe();
  }
}

}  // namespace
}  // namespace aesxfer::test
