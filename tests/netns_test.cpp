// Issue 7: aesxfer between two network namespaces joined by a veth pair rate-limited to 1 Gbit/s
// (tc tbf), over IPv4 and IPv6, and at 50 ms RTT through a delay path, compared with scp over the
// same path. Everything lives in namespaces the test creates (addresses from 10.77.0.0/24 and
// fd77::/64 only there) and removes in TearDown; servers are stopped by their own PIDs.
//
// This kernel has no netem (and no fq for EDT delays), so the delay is a packet relay in the test:
// two TUN devices (one per namespace, MTU 65000, tbf 1 Gbit/s on both) whose packets the test
// reads and writes to the other side 25 ms later. It delays IP packets, not a TCP byte stream, so
// end-to-end TCP (windows, socket buffers, slow start) sees a real 50 ms RTT.
// Skipped (GTEST_SKIP) only when namespaces cannot be created (not root, no `ip`, no CAP_SYS_ADMIN).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <sstream>
#include <thread>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

using Clock = std::chrono::steady_clock;

const char* kIp = "/usr/sbin/ip";

ProcResult sh(const std::string& cmd, double timeout = 60) {
  return run_process({"/bin/sh", "-c", cmd}, {}, timeout);
}

// A process started inside a namespace (setns before exec: the PID is the program's own).
class NsProcess {
 public:
  NsProcess(const std::string& ns, const std::vector<std::string>& argv,
            const std::map<std::string, std::string>& env, const fs::path& log) {
    std::vector<std::string> envs;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      if (!env.count(kv.substr(0, kv.find('=')))) envs.push_back(kv);
    }
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> a, en;
    std::vector<std::string> args = argv;
    for (auto& s : args) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : envs) en.push_back(s.data());
    en.push_back(nullptr);
    std::string nspath = "/run/netns/" + ns;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      int nfd = ::open(nspath.c_str(), O_RDONLY | O_CLOEXEC);
      if (nfd < 0 || ::setns(nfd, CLONE_NEWNET) != 0) ::_exit(126);
      int lfd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      int dn = ::open("/dev/null", O_RDWR | O_CLOEXEC);
      ::dup2(dn, 0);
      ::dup2(lfd, 1);
      ::dup2(lfd, 2);
      ::execve(a[0], a.data(), en.data());
      ::_exit(127);
    }
  }
  ~NsProcess() { stop(); }
  pid_t pid() const { return pid_; }
  bool running() {
    if (pid_ <= 0) return false;
    int st;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
};

// Delays IP packets between two TUN devices by `delay` in each direction.
class TunDelay {
 public:
  TunDelay(int a, int b, std::chrono::microseconds delay) : a_(a), b_(b), delay_(delay) {
    t1_ = std::thread([this] { pump(a_, b_, &bytes_ab_); });
    t2_ = std::thread([this] { pump(b_, a_, &bytes_ba_); });
  }
  ~TunDelay() {
    stop_ = true;
    t1_.join();
    t2_.join();
  }
  uint64_t dropped() const { return dropped_; }

 private:
  struct Pkt {
    Clock::time_point due;
    std::vector<uint8_t> data;
  };
  void pump(int from, int to, std::atomic<uint64_t>* counter) {
    std::deque<Pkt> q;
    size_t queued = 0;
    const size_t cap = size_t(64) << 20;  // a deep router buffer: never the limit at 1 Gbit/s x 25 ms
    std::vector<uint8_t> buf(70000);
    while (!stop_) {
      int timeout = 5;
      if (!q.empty()) {
        auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(q.front().due - Clock::now()).count();
        timeout = int(std::max<int64_t>(0, std::min<int64_t>(left, 5)));
      }
      pollfd p{from, POLLIN, 0};
      if (::poll(&p, 1, timeout) > 0 && (p.revents & POLLIN)) {
        for (int i = 0; i < 64; ++i) {  // drain what is there
          ssize_t n = ::read(from, buf.data(), buf.size());
          if (n <= 0) break;
          if (queued + size_t(n) > cap) {
            ++dropped_;
            continue;
          }
          q.push_back({Clock::now() + delay_, std::vector<uint8_t>(buf.data(), buf.data() + n)});
          queued += size_t(n);
        }
      }
      auto now = Clock::now();
      while (!q.empty() && q.front().due <= now) {
        ssize_t w = ::write(to, q.front().data.data(), q.front().data.size());
        (void)w;  // a full queue on the other side drops, like a router
        *counter += q.front().data.size();
        queued -= q.front().data.size();
        q.pop_front();
      }
    }
  }
  int a_, b_;
  std::chrono::microseconds delay_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> bytes_ab_{0}, bytes_ba_{0}, dropped_{0};
  std::thread t1_, t2_;
};

// Opens a TUN device named `name` inside namespace `ns` (from a short-lived thread that enters it).
int make_tun(const std::string& ns, const std::string& name, std::string* err) {
  int result = -1;
  std::thread t([&] {
    int nfd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nfd < 0 || ::unshare(CLONE_FS) != 0 || ::setns(nfd, CLONE_NEWNET) != 0) {
      *err = std::string("setns: ") + std::strerror(errno);
      if (nfd >= 0) ::close(nfd);
      return;
    }
    ::close(nfd);
    int fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      *err = std::string("/dev/net/tun: ") + std::strerror(errno);
      return;
    }
    ifreq ifr{};
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd, TUNSETIFF, &ifr) != 0) {
      *err = std::string("TUNSETIFF: ") + std::strerror(errno);
      ::close(fd);
      return;
    }
    result = fd;
  });
  t.join();
  return result;
}

// Milliseconds a TCP connect from namespace `ns` to addr:port takes (SYN -> SYN-ACK: one RTT).
double connect_rtt_ms(const std::string& ns, const std::string& addr, uint16_t port) {
  double ms = -1;
  std::thread t([&] {
    int nfd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nfd < 0 || ::setns(nfd, CLONE_NEWNET) != 0) return;
    ::close(nfd);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
    auto t0 = Clock::now();
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
      ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ::close(fd);
  });
  t.join();
  return ms;
}

// The raw value of `key` in the last JSON line of out that has it, or "".
std::string json_field(const std::string& out, const std::string& key) {
  std::istringstream is(out);
  std::string v;
  for (std::string l; std::getline(is, l);) {
    auto o = parse_flat_json(l);
    if (o && o->count(key)) v = (*o)[key];
  }
  return v;
}

double json_mbps(const std::string& out) {
  std::istringstream is(out);
  double v = -1;
  for (std::string l; std::getline(is, l);) {
    auto o = parse_flat_json(l);
    if (o && o->count("mb_per_s")) v = std::stod((*o)["mb_per_s"]);
  }
  return v;
}

class Netns : public testing::Test {
 protected:
  std::string tag = std::to_string(::getpid() % 100000);
  std::string ns_s = "axs" + tag, ns_c = "axc" + tag;
  std::string veth_s = "axvs" + tag, veth_c = "axvc" + tag, tun_s = "axts" + tag, tun_c = "axtc" + tag;
  bool created = false;
  Workspace ws;
  std::unique_ptr<NsProcess> server;
  uint16_t port = 0;

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root (euid " << ::geteuid() << ")";
    if (!fs::exists(kIp)) GTEST_SKIP() << "no " << kIp << " (iproute2)";
    auto r = run_process({kIp, "netns", "add", ns_s}, {});
    if (r.exit_code != 0) GTEST_SKIP() << "cannot create a network namespace: " << r.err;
    created = true;
    ASSERT_EQ(run_process({kIp, "netns", "add", ns_c}, {}).exit_code, 0);
    std::string q = "ip netns exec ";
    for (const std::string& c :
         {"ip link add " + veth_s + " netns " + ns_s + " type veth peer name " + veth_c + " netns " + ns_c,
          "ip -n " + ns_s + " addr add 10.77.0.1/30 dev " + veth_s,
          "ip -n " + ns_c + " addr add 10.77.0.2/30 dev " + veth_c,
          "ip -n " + ns_s + " -6 addr add fd77::1/64 dev " + veth_s + " nodad",
          "ip -n " + ns_c + " -6 addr add fd77::2/64 dev " + veth_c + " nodad",
          "ip -n " + ns_s + " link set lo up", "ip -n " + ns_c + " link set lo up",
          "ip -n " + ns_s + " link set " + veth_s + " up", "ip -n " + ns_c + " link set " + veth_c + " up",
          q + ns_s + " tc qdisc add dev " + veth_s + " root tbf rate 1gbit burst 256kb latency 50ms",
          q + ns_c + " tc qdisc add dev " + veth_c + " root tbf rate 1gbit burst 256kb latency 50ms"}) {
      auto res = sh(c);
      ASSERT_EQ(res.exit_code, 0) << c << "\n" << res.describe();
    }
    // The server listens on every address of its namespace (IPv6 and IPv4).
    fs::path pf = ws.tmp / "port";
    server = std::make_unique<NsProcess>(
        ns_s,
        std::vector<std::string>{AESXFER_BINARY, "serve", "-P", "0", "--root", ws.root.string(),
                                 "--port-file", pf.string(), "-q", "--timeout", "60"},
        std::map<std::string, std::string>{{"AESXFER_HOME", ws.home.string()}}, ws.tmp / "server.log");
    for (int i = 0; i < 1000 && !fs::exists(pf); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(fs::exists(pf)) << read_text_file(ws.tmp / "server.log");
    port = uint16_t(std::stoi(read_text_file(pf)));
  }

  void TearDown() override {
    if (server) server->stop();
    if (created) {
      // Whatever still runs in the test's namespaces was started by this test: an sshd session
      // child, say, whose connection lost its peer when the delay path went away (it would
      // otherwise wait for ever and keep the namespace alive).
      for (const std::string& ns : {ns_c, ns_s}) {
        auto pids = run_process({kIp, "netns", "pids", ns}, {});
        std::istringstream is(pids.out);
        for (long pid; is >> pid;)
          if (pid > 1 && pid != ::getpid()) ::kill(pid_t(pid), SIGKILL);
      }
      run_process({kIp, "netns", "del", ns_c}, {});
      run_process({kIp, "netns", "del", ns_s}, {});
      auto l = run_process({kIp, "netns", "list"}, {});
      EXPECT_EQ(l.out.find(ns_s), std::string::npos) << l.out;
      EXPECT_EQ(l.out.find(ns_c), std::string::npos) << l.out;
    }
  }

  ProcResult client(const std::vector<std::string>& args, double timeout = 300) {
    std::vector<std::string> a{kIp, "netns", "exec", ns_c, AESXFER_BINARY};
    a.insert(a.end(), args.begin(), args.end());
    a.insert(a.end(), {"-P", std::to_string(port), "--json", "--timeout", "60"});
    return run_process(a, {{"AESXFER_HOME", ws.home.string()}}, timeout);
  }

  // One cached source file for the sends.
  fs::path source(uint64_t size) {
    fs::path f = ws.local / "src.bin";
    if (!fs::exists(f) || fs::file_size(f) != size) {
      write_random_file(f, size, 77);
      sha256_file(f);  // read it once: the sends come from the page cache
    }
    return f;
  }
};

constexpr double kLinkMBps = 125.0;  // 1 Gbit/s

TEST_F(Netns, Ipv4AndIpv6OverTheRateLimitedVeth) {
  fs::path f = source(uint64_t(256) << 20);
  std::string want = sha256_file(f);
  for (const std::string host : {"10.77.0.1", "[fd77::1]"}) {
    SCOPED_TRACE(host);
    auto r = client({"send", f.string(), host + ":/dev/null"});
    ASSERT_EQ(r.exit_code, 0) << r.describe() << read_text_file(ws.tmp / "server.log");
    double up = json_mbps(r.out);
    // A small file stored for real, to check integrity over this path as well.
    auto r2 = client({"send", f.string(), host + ":copy.bin"});
    ASSERT_EQ(r2.exit_code, 0) << r2.describe();
    EXPECT_EQ(sha256_file(ws.root / "copy.bin"), want);
    auto r3 = client({"recv", host + ":/dev/zero", "/dev/null", "--size", std::to_string(256 << 20)});
    ASSERT_EQ(r3.exit_code, 0) << r3.describe();
    double down = json_mbps(r3.out);
    std::printf(
        "[ netns   ] %-11s 1 Gbit/s tbf, no added delay: send %.1f MB/s (%.0f%%), recv %.1f MB/s (%.0f%%)\n",
        host.c_str(), up, 100 * up / kLinkMBps, down, 100 * down / kLinkMBps);
    EXPECT_GT(up, 0.5 * kLinkMBps);
    EXPECT_LT(up, 1.1 * kLinkMBps) << "faster than the tbf rate: is the limit in place?";
    EXPECT_GT(down, 0.5 * kLinkMBps);
    RecordProperty(host == "10.77.0.1" ? "ipv4_send_mb_per_s" : "ipv6_send_mb_per_s", std::to_string(up));
  }
}

TEST_F(Netns, FiftyMsRttThroughputAndScp) {
  std::string err;
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  };
  Fd fc{make_tun(ns_c, tun_c, &err)};
  ASSERT_GE(fc.fd, 0) << err;
  Fd fs_{make_tun(ns_s, tun_s, &err)};
  ASSERT_GE(fs_.fd, 0) << err;
  int tc = fc.fd, ts = fs_.fd;
  std::string q = "ip netns exec ";
  for (const std::string& c :
       {"ip -n " + ns_c + " link set " + tun_c + " mtu 65000 up",
        "ip -n " + ns_s + " link set " + tun_s + " mtu 65000 up",
        "ip -n " + ns_c + " addr add 10.77.0.6/32 peer 10.77.0.5/32 dev " + tun_c,
        "ip -n " + ns_s + " addr add 10.77.0.5/32 peer 10.77.0.6/32 dev " + tun_s,
        q + ns_c + " tc qdisc add dev " + tun_c + " root tbf rate 1gbit burst 256kb latency 50ms",
        q + ns_s + " tc qdisc add dev " + tun_s + " root tbf rate 1gbit burst 256kb latency 50ms"}) {
    auto res = sh(c);
    ASSERT_EQ(res.exit_code, 0) << c << "\n" << res.describe();
  }
  TunDelay delay(tc, ts, std::chrono::milliseconds(25));
  double rtt_ms = connect_rtt_ms(ns_c, "10.77.0.5", port);
  std::printf("[ netns   ] delay path: TCP connect (one RTT) %.1f ms\n", rtt_ms);
  EXPECT_GE(rtt_ms, 49.0);
  EXPECT_LT(rtt_ms, 80.0);

  const uint64_t size = uint64_t(512) << 20;
  fs::path f = source(size);
  // Defaults: --streams auto sees the 50 ms round trip and spreads the file over several
  // connections (client/parallel.cpp).
  auto r = client({"send", f.string(), "10.77.0.5:/dev/null"});
  ASSERT_EQ(r.exit_code, 0) << r.describe() << read_text_file(ws.tmp / "server.log");
  double up = json_mbps(r.out);
  std::string up_streams = json_field(r.out, "streams");
  auto r3 = client({"recv", "10.77.0.5:/dev/zero", "/dev/null", "--size", std::to_string(size)});
  ASSERT_EQ(r3.exit_code, 0) << r3.describe();
  double down = json_mbps(r3.out);
  std::string down_streams = json_field(r3.out, "streams");
  std::printf(
      "[ netns   ] 50 ms RTT, 1 Gbit/s, defaults: aesxfer send %.1f MB/s (%.0f%% of the link, %s streams), "
      "recv %.1f MB/s (%.0f%%, %s streams)\n",
      up, 100 * up / kLinkMBps, up_streams.c_str(), down, 100 * down / kLinkMBps, down_streams.c_str());
  RecordProperty("rtt50_send_mb_per_s", std::to_string(up));
  RecordProperty("rtt50_recv_mb_per_s", std::to_string(down));
  EXPECT_GE(std::stoi(up_streams), 2) << "auto should open more than one stream at 50 ms";
  EXPECT_GE(std::stoi(down_streams), 2);
  EXPECT_GT(up, 10.0);
  EXPECT_LT(up, 1.1 * kLinkMBps);
  EXPECT_EQ(delay.dropped(), 0u);

  // One stream, for comparison.
  auto r1 = client({"send", f.string(), "10.77.0.5:/dev/null", "--streams", "1"});
  ASSERT_EQ(r1.exit_code, 0) << r1.describe();
  double up1 = json_mbps(r1.out);
  auto r13 =
      client({"recv", "10.77.0.5:/dev/zero", "/dev/null", "--size", std::to_string(size), "--streams", "1"});
  ASSERT_EQ(r13.exit_code, 0) << r13.describe();
  double down1 = json_mbps(r13.out);
  std::printf(
      "[ netns   ] 50 ms RTT, 1 Gbit/s, --streams 1: aesxfer send %.1f MB/s (%.0f%%), recv %.1f MB/s "
      "(%.0f%%)\n",
      up1, 100 * up1 / kLinkMBps, down1, 100 * down1 / kLinkMBps);
  RecordProperty("rtt50_send_1stream_mb_per_s", std::to_string(up1));
  EXPECT_EQ(json_field(r1.out, "streams"), "1");

  // A real file both ways over the auto streams: every byte in place.
  auto rf = client({"send", f.string(), "10.77.0.5:copy.bin"});
  ASSERT_EQ(rf.exit_code, 0) << rf.describe();
  EXPECT_EQ(sha256_file(ws.root / "copy.bin"), sha256_file(f));
  fs::path back = ws.local / "back.bin";
  auto rg = client({"recv", "10.77.0.5:copy.bin", back.string()});
  ASSERT_EQ(rg.exit_code, 0) << rg.describe();
  EXPECT_EQ(sha256_file(back), sha256_file(f));
  fs::remove(back);

  // What limits one stream: the send buffer. tcp_wmem max is 4 MiB here, below the 6.25 MB BDP
  // (and the kernel counts skb overhead against it). One stream with tcp_wmem max 16 MiB in the
  // client's namespace (per-namespace sysctl) shows what a bigger buffer gives.
  auto wm = sh(q + ns_c + " sysctl -q -w net.ipv4.tcp_wmem='4096 16384 16777216'");
  ASSERT_EQ(wm.exit_code, 0) << wm.describe();
  auto rb = client({"send", f.string(), "10.77.0.5:/dev/null", "--streams", "1"});
  ASSERT_EQ(rb.exit_code, 0) << rb.describe();
  double big = json_mbps(rb.out);
  std::printf(
      "[ netns   ] 50 ms RTT, 1 Gbit/s, client tcp_wmem max 16 MiB: aesxfer send %.1f MB/s (%.0f%%)\n", big,
      100 * big / kLinkMBps);
  RecordProperty("rtt50_send_wmem16m_mb_per_s", std::to_string(big));
  EXPECT_GT(big, 10.0);
  sh(q + ns_c + " sysctl -q -w net.ipv4.tcp_wmem='4096 16384 4194304'");

  // scp over the same path: a throwaway sshd in the server namespace with its own keys.
  if (!fs::exists("/usr/sbin/sshd") || !fs::exists("/usr/bin/scp")) {
    std::printf("[ netns   ] scp comparison skipped: no sshd/scp\n");
    return;
  }
  fs::path sd = ws.tmp / "ssh";
  fs::create_directories(sd);
  ASSERT_EQ(sh("ssh-keygen -q -t ed25519 -N '' -f " + (sd / "host").string() +
               " && ssh-keygen -q -t ed25519 -N '' -f " + (sd / "user").string() + " && cp " +
               (sd / "user.pub").string() + " " + (sd / "authorized_keys").string())
                .exit_code,
            0);
  fs::create_directories("/run/sshd");  // sshd's privilege separation directory
  NsProcess sshd(ns_s,
                 {"/usr/sbin/sshd",
                  "-D",
                  "-e",
                  "-p",
                  "2222",
                  "-o",
                  "ListenAddress=10.77.0.5",
                  "-h",
                  (sd / "host").string(),
                  "-o",
                  "AuthorizedKeysFile=" + (sd / "authorized_keys").string(),
                  "-o",
                  "StrictModes=no",
                  "-o",
                  "UsePAM=no",
                  "-o",
                  "PidFile=" + (sd / "pid").string(),
                  "-o",
                  "PasswordAuthentication=no",
                  "-o",
                  "PermitRootLogin=prohibit-password"},
                 {}, sd / "sshd.log");
  for (int i = 0; i < 300 && read_text_file(sd / "sshd.log").find("listening") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::string scp = q + ns_c + " scp -q -i " + (sd / "user").string() +
                    " -P 2222 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
                    " -c aes128-gcm@openssh.com " +
                    f.string() + " root@10.77.0.5:/dev/null";
  auto t0 = Clock::now();
  auto s = sh(scp, 600);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(s.exit_code, 0) << scp << "\n" << s.describe() << read_text_file(sd / "sshd.log");
  double scp_mbps = double(size) / secs / 1e6;
  std::printf(
      "[ netns   ] 50 ms RTT, 1 Gbit/s: scp -c aes128-gcm@openssh.com %.1f MB/s (%.0f%%), aesxfer/scp %.2f\n",
      scp_mbps, 100 * scp_mbps / kLinkMBps, up / scp_mbps);
  RecordProperty("rtt50_scp_mb_per_s", std::to_string(scp_mbps));
  EXPECT_GT(scp_mbps, 1.0);
  sshd.stop();
}

}  // namespace
}  // namespace aesxfer::test
