// Load: one server, 32 concurrent client processes (the real binary), each putting several files
// and getting them back with its own cipher; every file must arrive with the right SHA-256. The
// server's peak RSS (VmHWM) and thread count are printed and bounded. Then --max-startups and
// --max-sessions: the client turned away is told "server busy" (exit 1), and the server's threads
// stay bounded however many connections pile up.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/proc_status.h"

namespace aesxfer::test {
namespace {

using Clock = std::chrono::steady_clock;

// Sanitizer runtimes (shadow memory, ASan's 256 MiB quarantine) inflate RSS: the bound on the
// server's peak RSS is 512 MiB for a plain build and 2 GiB under a sanitizer.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr long kMaxRssKb = 2048 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr long kMaxRssKb = 2048 * 1024;
#else
constexpr long kMaxRssKb = 512 * 1024;
#endif
#else
constexpr long kMaxRssKb = 512 * 1024;
#endif

// ThreadSanitizer's runtime starts a background thread of its own in the server at some point.
#if defined(__SANITIZE_THREAD__)
constexpr long kRuntimeThreads = 1;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr long kRuntimeThreads = 1;
#else
constexpr long kRuntimeThreads = 0;
#endif
#else
constexpr long kRuntimeThreads = 0;
#endif

// Samples the server's thread count every 20 ms while alive.
class ThreadSampler {
 public:
  explicit ThreadSampler(pid_t pid)
      : pid_(pid), t_([this] {
          while (!stop_) {
            long n = proc_status(pid_, "Threads");
            if (n > max_) max_ = n;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
  ~ThreadSampler() { finish(); }
  long finish() {
    stop_ = true;
    if (t_.joinable()) t_.join();
    return max_;
  }

 private:
  pid_t pid_;
  std::atomic<bool> stop_{false};
  std::atomic<long> max_{0};
  std::thread t_;
};

struct CipherChoice {
  std::vector<std::string> args;
};

const std::vector<CipherChoice> kCiphers = {
    {{"-c", "aes128-gcm"}},   {{"-c", "aes128-ctr"}}, {{"-c", "aes128-cbc"}},
    {{"-c", "blowfish-cbc"}}, {{"-c", "arcfour"}},    {{"-c", "aes128-cbc", "-m", "none"}},
    {{"-c", "none"}},
};

TEST(Load, ThirtyTwoClientsMixedCiphersNothingLost) {
  constexpr int kClients = 32, kFiles = 3;
  Workspace ws;
  // The 32 clients connect at once: the startups pool holds them all (the default 10:30:100 drops
  // some of them early, as sshd's MaxStartups would; Startups.* tests that).
  ServerProcess server(ws.home, ws.root,
                       {"--timeout", "60", "--max-sessions", "64", "--max-startups", "64:30:128"});
  // Sizes: empty, one byte, record boundaries +-1, and random ones up to 4 MiB.
  std::mt19937_64 rng(20261129);
  const uint64_t kRec = 256 * 1024;
  std::vector<uint64_t> fixed = {0, 1, kRec - 1, kRec, kRec + 1, 3 * kRec + 17};
  struct File {
    fs::path local;
    std::string sha;
  };
  std::vector<std::vector<File>> files(kClients);
  uint64_t total_bytes = 0;
  for (int c = 0; c < kClients; ++c) {
    fs::create_directories(ws.local / ("c" + std::to_string(c)));
    fs::create_directories(ws.local / ("back" + std::to_string(c)));
    fs::create_directories(ws.root / ("c" + std::to_string(c)));
    for (int f = 0; f < kFiles; ++f) {
      size_t idx = size_t(c * kFiles + f);
      uint64_t size = idx < fixed.size() ? fixed[idx] : rng() % (4 << 20);
      fs::path p = ws.local / ("c" + std::to_string(c)) / ("f" + std::to_string(f) + ".bin");
      write_random_file(p, size, 1000 + idx);
      files[c].push_back({p, sha256_file(p)});
      total_bytes += size;
    }
  }

  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<int> puts_ok{0}, gets_ok{0};
  ThreadSampler sampler(server.pid());
  auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto fail = [&](const std::string& what) {
        std::lock_guard<std::mutex> g(mu);
        failures.push_back("client " + std::to_string(c) + ": " + what);
      };
      const auto& cipher = kCiphers[size_t(c) % kCiphers.size()].args;
      std::string dir = "c" + std::to_string(c);
      // One put of all files into the client's directory (one connection, several transfers).
      std::vector<std::string> a{"send"};
      for (const auto& f : files[c]) a.push_back(f.local.string());
      a.push_back("127.0.0.1:" + dir + "/");
      a.insert(a.end(), cipher.begin(), cipher.end());
      a.insert(a.end(), {"-P", std::to_string(server.port()), "--timeout", "60", "-q"});
      ProcResult r = run_aesxfer(a, ws.home, 240);
      if (r.exit_code != 0) return fail("send failed: " + r.describe());
      for (const auto& f : files[c]) {
        fs::path there = ws.root / dir / f.local.filename();
        std::string got = fs::exists(there) ? sha256_file(there) : "missing";
        if (got != f.sha)
          fail(there.string() + ": SHA-256 " + got + " expected " + f.sha);
        else
          ++puts_ok;
      }
      // Get every file back, one connection each.
      for (const auto& f : files[c]) {
        fs::path back = ws.local / ("back" + std::to_string(c)) / f.local.filename();
        std::vector<std::string> g{"recv", "127.0.0.1:" + dir + "/" + f.local.filename().string(),
                                   back.string()};
        g.insert(g.end(), cipher.begin(), cipher.end());
        g.insert(g.end(), {"-P", std::to_string(server.port()), "--timeout", "60", "-q"});
        ProcResult rr = run_aesxfer(g, ws.home, 240);
        if (rr.exit_code != 0) {
          fail("recv failed: " + rr.describe());
          continue;
        }
        std::string got = fs::exists(back) ? sha256_file(back) : "missing";
        if (got != f.sha)
          fail(back.string() + ": SHA-256 " + got + " expected " + f.sha);
        else
          ++gets_ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  long max_threads = sampler.finish();
  long hwm_kb = proc_status(server.pid(), "VmHWM");
  ASSERT_GT(hwm_kb, 0) << "cannot read VmHWM of the server";

  std::printf(
      "[load] %d clients, %d puts + %d gets verified (%.1f MiB each way) in %.1f s; server peak RSS "
      "(VmHWM) %.1f MiB (bound %ld MiB), peak threads %ld\n",
      kClients, puts_ok.load(), gets_ok.load(), double(total_bytes) / (1 << 20), secs, hwm_kb / 1024.0,
      kMaxRssKb / 1024, max_threads);
  for (const auto& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(puts_ok.load(), kClients * kFiles);
  EXPECT_EQ(gets_ok.load(), kClients * kFiles);
  EXPECT_LT(hwm_kb, kMaxRssKb) << "server peak RSS " << hwm_kb << " kB";
  // Nothing left behind by any receiver.
  for (int c = 0; c < kClients; ++c) {
    EXPECT_TRUE(temp_debris(ws.root / ("c" + std::to_string(c))).empty());
    EXPECT_TRUE(temp_debris(ws.local / ("back" + std::to_string(c))).empty());
  }
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(sanitizer_findings(server.log()), "");
  if (HasFailure()) std::cerr << "--- server log ---\n" << server.log();
}

// Connections that only hold a socket open (no handshake bytes) occupy a session from accept on.
std::vector<int> open_idle(uint16_t port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int fd = connect_loopback(port);
    if (fd >= 0) fds.push_back(fd);
  }
  return fds;
}

// Waits until the server has `want` threads or more (true), or 5 s passed.
bool wait_threads(pid_t pid, long want) {
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    if (proc_status(pid, "Threads") >= want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Issue 24 (A1): idle connections fill the startups pool (--max-startups), never the sessions;
// the sessions are counted once a client has logged in. Either way a client turned away reads
// "server busy: ..." and the server's threads stay bounded (pool + sessions).
TEST(Load, MaxSessionsCountedAtLoginAndThreadsBounded) {
  constexpr int kMax = 4;
  Workspace ws;
  ServerProcess server(ws.home, ws.root,
                       {"--max-sessions", std::to_string(kMax), "--max-startups", std::to_string(kMax),
                        "--handshake-timeout", "60", "--timeout", "60"});
  write_random_file(ws.local / "f.bin", 100000, 9);
  auto put = [&](const std::string& name) {
    return run_aesxfer({"send", (ws.local / "f.bin").string(), "127.0.0.1:" + name, "-P",
                        std::to_string(server.port()), "--timeout", "20", "-q"},
                       ws.home, 60);
  };
  const long base = proc_status(server.pid(), "Threads");
  ASSERT_GT(base, 0);

  // kMax connections that never say a word fill the startups pool...
  std::vector<int> idle = open_idle(server.port(), kMax);
  ASSERT_EQ(idle.size(), size_t(kMax));
  ASSERT_TRUE(wait_threads(server.pid(), base + kMax)) << "sessions did not start";
  // ...so a real client is turned away with a clear message and a non-zero exit.
  ProcResult r = put("refused.bin");
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("server busy: too many connections are waiting to log in"), std::string::npos)
      << r.describe();
  EXPECT_FALSE(fs::exists(ws.root / "refused.bin"));

  // A pile of further connections: each is told busy and closed without a thread.
  std::vector<int> more = open_idle(server.port(), 60);
  EXPECT_EQ(more.size(), 60u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  long threads = proc_status(server.pid(), "Threads");
  std::printf("[load] --max-startups %d with %zu connections open: server threads %ld (idle: %ld)\n", kMax,
              idle.size() + more.size(), threads, base);
  EXPECT_LE(threads, base + kMax + kRuntimeThreads) << "a thread per connection?";
  int closed = 0;
  for (int fd : more) {
    char b[256];
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t n = 0;
    while ((n = ::recv(fd, b, sizeof b, 0)) > 0) {
    }
    if (n == 0 || (n < 0 && errno == ECONNRESET)) ++closed;
  }
  EXPECT_EQ(closed, 60) << "every connection beyond the pool is closed";
  for (int fd : more) ::close(fd);

  // Free the pool: the next client gets in (the server notices the closes asynchronously).
  for (int fd : idle) ::close(fd);
  bool ok = false;
  for (int i = 0; i < 50 && !ok; ++i) {
    r = put("admitted.bin");
    ok = r.exit_code == 0;
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(ok) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "admitted.bin"), sha256_file(ws.local / "f.bin"));

  // kMax clients logged in hold every session: the next one is told so after its login.
  {
    std::vector<std::unique_ptr<HandSession>> in;
    for (int i = 0; i < kMax; ++i) {
      in.push_back(std::make_unique<HandSession>(server.port(), ws.home / "id_ed25519"));
      ASSERT_TRUE(in.back()->welcome_ok);
    }
    r = put("refused2.bin");
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("server busy: " + std::to_string(kMax) + " sessions already"), std::string::npos)
        << r.describe();
    EXPECT_FALSE(fs::exists(ws.root / "refused2.bin"));
    for (auto& s : in) s->bye();
  }

  // Once the sessions have ended, kMax clients at once all get in.
  for (int i = 0; i < 250 && proc_status(server.pid(), "Threads") > base; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<std::thread> ts;
  std::atomic<int> good{0};
  for (int i = 0; i < kMax; ++i)
    ts.emplace_back([&, i] {
      if (put("par" + std::to_string(i) + ".bin").exit_code == 0) ++good;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(good.load(), kMax);
  EXPECT_EQ(server.stop(), 0);
  EXPECT_EQ(sanitizer_findings(server.log()), "");
  if (HasFailure()) std::cerr << "--- server log ---\n" << server.log();
}

}  // namespace
}  // namespace aesxfer::test
