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

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/harness.h"
#include "tests/tun_relay.h"

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

  ProcResult client(const std::vector<std::string>& args, double timeout = 300, const std::string& ns = "",
                    const std::string& binary = AESXFER_BINARY, uint16_t to_port = 0) {
    std::vector<std::string> a{kIp, "netns", "exec", ns.empty() ? ns_c : ns, binary};
    a.insert(a.end(), args.begin(), args.end());
    a.insert(a.end(), {"-P", std::to_string(to_port ? to_port : port), "--json", "--timeout", "60"});
    return run_process(a, {{"AESXFER_HOME", ws.home.string()}}, timeout);
  }

  // The 50 ms path: TUN devices 10.77.0.6 (client) <-> 10.77.0.5 (server), 1 Gbit/s tbf on both,
  // and the relay that holds every packet 25 ms each way.
  struct TunFd {
    int fd = -1;
    ~TunFd() {
      if (fd >= 0) ::close(fd);
    }
  };
  TunFd tun_fd_c, tun_fd_s;
  std::unique_ptr<TunRelay> delay_path() {
    LinkParams p;
    p.delay = std::chrono::milliseconds(25);
    return wan_path(p, 65000, true);
  }
  // The WAN lab: the same TUN pair, the relay given loss, a bottleneck rate and
  // its bounded queue (`p`), MTU `mtu`; tbf on the devices only when `tbf` (the relay's bottleneck
  // replaces it otherwise).
  std::unique_ptr<TunRelay> wan_path(LinkParams p, int mtu, bool tbf = false) {
    std::string err;
    tun_fd_c.fd = open_tun_in(ns_c, tun_c, &err);
    EXPECT_GE(tun_fd_c.fd, 0) << err;
    tun_fd_s.fd = open_tun_in(ns_s, tun_s, &err);
    EXPECT_GE(tun_fd_s.fd, 0) << err;
    if (tun_fd_c.fd < 0 || tun_fd_s.fd < 0) return nullptr;
    std::string q = "ip netns exec ", m = std::to_string(mtu);
    std::vector<std::string> cmds{"ip -n " + ns_c + " link set " + tun_c + " mtu " + m + " up",
                                  "ip -n " + ns_s + " link set " + tun_s + " mtu " + m + " up",
                                  "ip -n " + ns_c + " addr add 10.77.0.6/32 peer 10.77.0.5/32 dev " + tun_c,
                                  "ip -n " + ns_s + " addr add 10.77.0.5/32 peer 10.77.0.6/32 dev " + tun_s};
    if (tbf)
      for (const auto& [ns, dev] : {std::pair{ns_c, tun_c}, std::pair{ns_s, tun_s}})
        cmds.push_back(q + ns + " tc qdisc add dev " + dev + " root tbf rate 1gbit burst 256kb latency 50ms");
    for (const std::string& c : cmds) {
      auto res = sh(c);
      EXPECT_EQ(res.exit_code, 0) << c << "\n" << res.describe();
      if (res.exit_code != 0) return nullptr;
    }
    p.max_packet = uint32_t(mtu);
    return std::make_unique<TunRelay>(tun_fd_c.fd, tun_fd_s.fd, p);
  }
  // Stops the relay and removes the TUN pair (they go with their file descriptors).
  void close_wan(std::unique_ptr<TunRelay>& relay) {
    relay.reset();
    for (TunFd* t : {&tun_fd_c, &tun_fd_s}) {
      if (t->fd >= 0) ::close(t->fd);
      t->fd = -1;
    }
  }
  // iperf3 from the client namespace to a one-shot iperf3 server in the server namespace
  // (stopped by its PID): the bits per second received; -1 when iperf3 failed.
  double iperf3(const std::string& extra, double seconds = 3) {
    auto srv = std::make_unique<NsProcess>(
        ns_s, std::vector<std::string>{"/usr/bin/iperf3", "-s", "-1", "-B", "10.77.0.5", "-p", "5299"},
        std::map<std::string, std::string>{}, ws.tmp / "iperf3.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // probing the port would count as a run
    auto r = sh("ip netns exec " + ns_c + " iperf3 -c 10.77.0.5 -p 5299 -t " + std::to_string(seconds) + " " +
                    extra + " -J",
                seconds + 60);
    srv->stop();
    auto at = r.out.find("\"sum_received\"");
    if (r.exit_code != 0 || at == std::string::npos) return -1;
    auto b = r.out.find("\"bits_per_second\"", at);
    return b == std::string::npos ? -1 : std::stod(r.out.substr(r.out.find(':', b) + 1));
  }

  // A throwaway sshd in the server namespace (10.77.0.5:2222) with its own keys; nullptr when
  // there is no sshd. ssh_opts: what an ssh or scp client in the client namespace needs.
  std::string ssh_opts;
  std::unique_ptr<NsProcess> start_sshd(const std::string& listen = "10.77.0.5") {
    if (!fs::exists("/usr/sbin/sshd") || !fs::exists("/usr/bin/scp")) return nullptr;
    fs::path sd = ws.tmp / "ssh";
    fs::create_directories(sd);
    EXPECT_EQ(sh("ssh-keygen -q -t ed25519 -N '' -f " + (sd / "host").string() +
                 " && ssh-keygen -q -t ed25519 -N '' -f " + (sd / "user").string() + " && cp " +
                 (sd / "user.pub").string() + " " + (sd / "authorized_keys").string())
                  .exit_code,
              0);
    fs::create_directories("/run/sshd");  // sshd's privilege separation directory
    auto sshd = std::make_unique<NsProcess>(
        ns_s,
        std::vector<std::string>{"/usr/sbin/sshd",
                                 "-D",
                                 "-e",
                                 "-p",
                                 "2222",
                                 "-o",
                                 "ListenAddress=" + listen,
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
        std::map<std::string, std::string>{}, sd / "sshd.log");
    for (int i = 0; i < 300 && read_text_file(sd / "sshd.log").find("listening") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ssh_opts = "-i " + (sd / "user").string() +
               " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
               " -c aes128-gcm@openssh.com";
    return sshd;
  }

  // ws.local/tree: dirs directories of per_dir files of 4 KiB each; tree_sums: their checksums.
  std::map<std::string, std::string> tree_sums;
  // A server of another build (the baseline binary) in the server's namespace, serving `root`;
  // null when it did not start (its log: base-server.log).
  std::unique_ptr<NsProcess> start_baseline(const std::string& binary, const fs::path& root,
                                            uint16_t* port_out) {
    fs::path pf = ws.tmp / "base-port";
    fs::create_directories(root);
    auto p = std::make_unique<NsProcess>(
        ns_s,
        std::vector<std::string>{binary, "serve", "-P", "0", "--root", root.string(), "--port-file",
                                 pf.string(), "-q", "--timeout", "60"},
        std::map<std::string, std::string>{{"AESXFER_HOME", ws.home.string()}}, ws.tmp / "base-server.log");
    for (int i = 0; i < 1000 && !fs::exists(pf); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!fs::exists(pf)) return nullptr;
    *port_out = uint16_t(std::stoi(read_text_file(pf)));
    return p;
  }
  // Issue 16 item 4, a resumed tree over the 50 ms path: `prepare(bin, port, base)` sets the
  // state up, then `resume(...)` is timed, three rounds, for this build and (with
  // AESXFER_BASELINE_BINARY) the baseline build on its own server (root base-root) beside it.
  // Prints the medians, min and max; returns this build's median.
  double resumed_rounds(const std::string& what,
                        const std::function<void(const std::string&, uint16_t, bool)>& prepare,
                        const std::function<ProcResult(const std::string&, uint16_t, bool)>& resume) {
    const char* base = std::getenv("AESXFER_BASELINE_BINARY");
    uint16_t base_port = 0;
    std::unique_ptr<NsProcess> base_server;
    if (base && *base) {
      base_server = start_baseline(base, ws.tmp / "base-root", &base_port);
      EXPECT_TRUE(base_server) << read_text_file(ws.tmp / "base-server.log");
      if (!base_server) return 0;
    }
    std::vector<double> after, before;
    for (int round = 0; round < 3; ++round)
      for (bool b : {false, true}) {
        if (b && !base_server) continue;
        const std::string bin = b ? std::string(base) : std::string(AESXFER_BINARY);
        const uint16_t p = b ? base_port : port;
        prepare(bin, p, b);
        if (HasFatalFailure()) return 0;
        ProcResult r;
        (b ? before : after).push_back(timed([&] { return resume(bin, p, b); }, &r));
        EXPECT_EQ(r.exit_code, 0) << r.describe();
      }
    std::sort(after.begin(), after.end());
    std::printf("[ netns   ] %s, 50 ms RTT: %.2f s (min %.2f, max %.2f)\n", what.c_str(), after[1], after[0],
                after[2]);
    if (base_server) {
      std::sort(before.begin(), before.end());
      std::printf("[ netns   ] the baseline build: %.2f s (min %.2f, max %.2f); after/before %.2f\n",
                  before[1], before[0], before[2], after[1] / before[1]);
      base_server->stop();
    }
    return after[1];
  }
  fs::path small_tree(int dirs, int per_dir) {
    fs::path src = ws.local / "tree";
    for (int d = 0; d < dirs; ++d)
      for (int i = 0; i < per_dir; ++i) {
        std::string rel = "d" + std::to_string(d) + "/f" + std::to_string(i);
        fs::create_directories(src / ("d" + std::to_string(d)));
        write_random_file(src / rel, 4096, uint64_t(d * 1000 + i));
        tree_sums[rel] = sha256_file(src / rel);
      }
    return src;
  }
  // Files of `want` missing or different under top.
  size_t check(const fs::path& top) {
    size_t bad = 0;
    for (const auto& [rel, sum] : tree_sums)
      if (!fs::is_regular_file(top / rel) || sha256_file(top / rel) != sum) ++bad;
    return bad;
  }
  static double timed(const std::function<ProcResult()>& f, ProcResult* out) {
    auto t0 = Clock::now();
    *out = f();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // tar | ssh both ways, run with `in_ns` ("ip netns exec NS "): ws.local/tree to root/tar_up, and
  // root/up/tree back to ws.local/tar_down, each checked against tree_sums; the times in seconds.
  void tar_both_ways(const std::string& in_ns, const std::string& ssh, double* up, double* down) {
    ProcResult r;
    fs::create_directories(ws.root / "tar_up");
    *up = timed(
        [&] {
          return sh(in_ns + "sh -c \"tar -C " + ws.local.string() + " -cf - tree | " + ssh + " 'tar -C " +
                        (ws.root / "tar_up").string() + " -xf -'\"",
                    300);
        },
        &r);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(check(ws.root / "tar_up" / "tree"), 0u);
    fs::path tar_down = ws.local / "tar_down";
    fs::create_directories(tar_down);
    *down = timed(
        [&] {
          return sh(in_ns + "sh -c \"" + ssh + " 'tar -C " + (ws.root / "up").string() +
                        " -cf - tree' | tar -C " + tar_down.string() + " -xf -\"",
                    300);
        },
        &r);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(check(tar_down / "tree"), 0u);
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
  auto delay_p = delay_path();
  ASSERT_TRUE(delay_p);
  TunRelay& delay = *delay_p;
  std::string q = "ip netns exec ";
  // The path's RTT is the least of three connects: a first SYN lost while the relay's path is new
  // (seen once: 797 ms, a SYN retransmission) is not the path's delay.
  double rtt_ms = connect_rtt_ms(ns_c, "10.77.0.5", port);
  for (int i = 0; i < 2; ++i) rtt_ms = std::min(rtt_ms, connect_rtt_ms(ns_c, "10.77.0.5", port));
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
  auto sshd_p = start_sshd();
  if (!sshd_p) {
    std::printf("[ netns   ] scp comparison skipped: no sshd/scp\n");
    return;
  }
  NsProcess& sshd = *sshd_p;
  std::string scp = q + ns_c + " scp -q -P 2222 " + ssh_opts + " " + f.string() + " root@10.77.0.5:/dev/null";
  auto t0 = Clock::now();
  auto s = sh(scp, 600);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(s.exit_code, 0) << scp << "\n" << s.describe() << read_text_file(ws.tmp / "ssh" / "sshd.log");
  double scp_mbps = double(size) / secs / 1e6;
  std::printf(
      "[ netns   ] 50 ms RTT, 1 Gbit/s: scp -c aes128-gcm@openssh.com %.1f MB/s (%.0f%%), aesxfer/scp %.2f\n",
      scp_mbps, 100 * scp_mbps / kLinkMBps, up / scp_mbps);
  RecordProperty("rtt50_scp_mb_per_s", std::to_string(scp_mbps));
  EXPECT_GT(scp_mbps, 1.0);
  sshd.stop();
}

// Issue 16: 400 files of 4 KiB in 4 directories over the 50 ms path, side by side in one run:
// aesxfer send -r and recv -r (pipelined), tar | ssh in both directions, and scp -r. Prints the
// times and ratios. The issue's targets (within 1.5x of tar | ssh, 30x faster than scp -r) are
// printed; the assertions are looser (3x and 10x) so that a shared 2-core machine does not flake.
TEST_F(Netns, ManySmallFilesOverFiftyMs) {
  auto delay = delay_path();
  ASSERT_TRUE(delay);
  // The path's RTT is the least of three connects: a first SYN lost while the relay's path is new
  // (seen once: 797 ms, a SYN retransmission) is not the path's delay.
  double rtt_ms = connect_rtt_ms(ns_c, "10.77.0.5", port);
  for (int i = 0; i < 2; ++i) rtt_ms = std::min(rtt_ms, connect_rtt_ms(ns_c, "10.77.0.5", port));
  std::printf("[ netns   ] delay path: TCP connect (one RTT) %.1f ms\n", rtt_ms);
  EXPECT_GE(rtt_ms, 49.0);

  fs::path src = small_tree(4, 100);

  // aesxfer both ways (the whole command: process start, handshake, the tree).
  ProcResult r;
  fs::create_directories(ws.root / "up");
  double t_send = timed([&] { return client({"send", "-r", src.string(), "10.77.0.5:up", "-q"}); }, &r);
  ASSERT_EQ(r.exit_code, 0) << r.describe() << read_text_file(ws.tmp / "server.log");
  EXPECT_EQ(check(ws.root / "up" / "tree"), 0u);
  fs::path down = ws.local / "down";
  double t_recv = timed([&] { return client({"recv", "-r", "10.77.0.5:up/tree", down.string(), "-q"}); }, &r);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(check(down), 0u);

  auto sshd = start_sshd();
  if (!sshd) {
    std::printf(
        "[ netns   ] 400 x 4 KiB over 50 ms: aesxfer send -r %.2f s, recv -r %.2f s (no sshd: no "
        "comparison)\n",
        t_send, t_recv);
    return;
  }
  std::string in_c = "ip netns exec " + ns_c + " ";
  std::string ssh = "ssh -p 2222 " + ssh_opts + " root@10.77.0.5";
  double t_tar_up = 0, t_tar_down = 0;
  tar_both_ways(in_c, ssh, &t_tar_up, &t_tar_down);
  if (HasFatalFailure()) return;
  fs::create_directories(ws.root / "scp_up");
  double t_scp = timed(
      [&] {
        return sh(in_c + "scp -q -r -P 2222 " + ssh_opts + " " + src.string() +
                      " root@10.77.0.5:" + (ws.root / "scp_up").string(),
                  900);
      },
      &r);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(check(ws.root / "scp_up" / "tree"), 0u);
  sshd->stop();

  std::printf(
      "[ netns   ] 400 x 4 KiB in 4 dirs, 50 ms RTT: aesxfer send -r %.2f s, recv -r %.2f s; "
      "tar|ssh up %.2f s, down %.2f s; scp -r up %.2f s\n",
      t_send, t_recv, t_tar_up, t_tar_down, t_scp);
  std::printf(
      "[ netns   ] ratios: send -r / tar|ssh up %.2f (target <= 1.5), recv -r / tar|ssh down %.2f (target <= "
      "1.5), scp -r / send -r %.1f (target >= 30), scp -r / recv -r %.1f\n",
      t_send / t_tar_up, t_recv / t_tar_down, t_scp / t_send, t_scp / t_recv);
  RecordProperty("small_files_send_s", std::to_string(t_send));
  RecordProperty("small_files_recv_s", std::to_string(t_recv));
  RecordProperty("small_files_tar_up_s", std::to_string(t_tar_up));
  RecordProperty("small_files_tar_down_s", std::to_string(t_tar_down));
  RecordProperty("small_files_scp_s", std::to_string(t_scp));
  EXPECT_LT(t_send, 3.0 * t_tar_up);
  EXPECT_LT(t_recv, 3.0 * t_tar_down);
  EXPECT_GT(t_scp, 10.0 * t_send);
  EXPECT_EQ(delay->dropped(), 0u);
}

// Issue 16: 2000 files of 4 KiB (20 directories) on loopback, inside the server's namespace:
// aesxfer send -r and recv -r against tar | ssh both ways, side by side. The issue's target (at
// least as fast as tar | ssh) is printed; the assertion allows 2x for a shared 2-core machine.
TEST_F(Netns, ManySmallFilesLoopback) {
  fs::path src = small_tree(20, 100);
  ProcResult r;
  fs::create_directories(ws.root / "up");
  double t_send = timed(
      [&] {
        return client({"send", "-r", src.string(), "127.0.0.1:up", "-q"}, 300, ns_s);
      },
      &r);
  ASSERT_EQ(r.exit_code, 0) << r.describe() << read_text_file(ws.tmp / "server.log");
  EXPECT_EQ(check(ws.root / "up" / "tree"), 0u);
  fs::path down = ws.local / "down";
  double t_recv = timed(
      [&] {
        return client({"recv", "-r", "127.0.0.1:up/tree", down.string(), "-q"}, 300, ns_s);
      },
      &r);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(check(down), 0u);
  auto sshd = start_sshd("127.0.0.1");
  if (!sshd) {
    std::printf("[ netns   ] 2000 x 4 KiB on loopback: aesxfer send -r %.2f s, recv -r %.2f s (no sshd)\n",
                t_send, t_recv);
    return;
  }
  std::string in_s = "ip netns exec " + ns_s + " ";
  std::string ssh = "ssh -p 2222 " + ssh_opts + " root@127.0.0.1";
  double t_tar_up = 0, t_tar_down = 0;
  tar_both_ways(in_s, ssh, &t_tar_up, &t_tar_down);
  if (HasFatalFailure()) return;
  sshd->stop();
  std::printf(
      "[ netns   ] 2000 x 4 KiB in 20 dirs, loopback: aesxfer send -r %.2f s, recv -r %.2f s; tar|ssh up "
      "%.2f s, down %.2f s; ratios send/tar %.2f, recv/tar %.2f (target <= 1.0)\n",
      t_send, t_recv, t_tar_up, t_tar_down, t_send / t_tar_up, t_recv / t_tar_down);
  RecordProperty("loopback_small_files_send_s", std::to_string(t_send));
  RecordProperty("loopback_small_files_recv_s", std::to_string(t_recv));
  EXPECT_LT(t_send, 2.0 * t_tar_up);
  EXPECT_LT(t_recv, 2.0 * t_tar_down);
}

// Issue 16: one 1 GiB file over the 50 ms path must be no slower with pipelining than before.
// Needs the binary of the version before (AESXFER_BASELINE_BINARY, e.g. built from the commit
// before issue 16): it runs its own server, and the two send the same file in turn, three times
// each; prints the medians, min and max. Skipped without a baseline binary: there is nothing to
// compare with (the other 50 ms tests cover the big-file path itself).
TEST_F(Netns, OneGiBOverFiftyMsBeforeAndAfter) {
  const char* base = std::getenv("AESXFER_BASELINE_BINARY");
  if (!base || !*base) GTEST_SKIP() << "set AESXFER_BASELINE_BINARY to the aesxfer binary to compare with";
  auto delay = delay_path();
  ASSERT_TRUE(delay);
  uint16_t base_port = 0;
  auto base_server = start_baseline(base, ws.tmp / "base-root", &base_port);
  ASSERT_TRUE(base_server) << read_text_file(ws.tmp / "base-server.log");
  fs::path f = source(uint64_t(1) << 30);
  std::vector<double> before, after;
  for (int run = 0; run < 3; ++run) {
    auto rb = client({"send", f.string(), "10.77.0.5:/dev/null"}, 600, "", base, base_port);
    ASSERT_EQ(rb.exit_code, 0) << rb.describe();
    before.push_back(json_mbps(rb.out));
    auto ra = client({"send", f.string(), "10.77.0.5:/dev/null"}, 600);
    ASSERT_EQ(ra.exit_code, 0) << ra.describe();
    after.push_back(json_mbps(ra.out));
  }
  std::sort(before.begin(), before.end());
  std::sort(after.begin(), after.end());
  std::printf(
      "[ netns   ] 1 GiB over 50 ms, send to /dev/null: before %.1f MB/s (min %.1f, max %.1f), after %.1f "
      "MB/s "
      "(min %.1f, max %.1f), after/before %.2f\n",
      before[1], before[0], before[2], after[1], after[0], after[2], after[1] / before[1]);
  RecordProperty("gib_before_mb_per_s", std::to_string(before[1]));
  RecordProperty("gib_after_mb_per_s", std::to_string(after[1]));
  EXPECT_GT(after[1], 0.8 * before[1]) << "the big-file path got slower";
  base_server->stop();
}

// Issue 16: the 2000-file loopback case, before and after, side by side: the baseline build
// (AESXFER_BASELINE_BINARY, its own server), this build and tar | ssh each send the tree into a
// fresh directory, in turn, five rounds (the order rotates each round, so that none always runs
// on a file system the one before just filled); then recv -r of the same tree the same way.
// Prints the median, min and max of each. Skipped without a baseline binary.
TEST_F(Netns, ManySmallFilesLoopbackBeforeAndAfter) {
  const char* base = std::getenv("AESXFER_BASELINE_BINARY");
  if (!base || !*base) GTEST_SKIP() << "set AESXFER_BASELINE_BINARY to the aesxfer binary to compare with";
  uint16_t base_port = 0;
  auto base_server = start_baseline(base, ws.root, &base_port);
  ASSERT_TRUE(base_server) << read_text_file(ws.tmp / "base-server.log");
  fs::path src = small_tree(20, 100);
  auto sshd = start_sshd("127.0.0.1");
  if (!sshd) GTEST_SKIP() << "no sshd: nothing to compare with";
  const std::string in_s = "ip netns exec " + ns_s + " ";
  const std::string ssh = "ssh -p 2222 " + ssh_opts + " root@127.0.0.1";
  constexpr int kRounds = 5;
  std::map<std::string, std::vector<double>> t;
  auto run = [&](const std::string& who, int round, bool up) {
    ProcResult r;
    const std::string dir = (up ? "up-" : "down-") + who + std::to_string(round);
    const fs::path there = (up ? ws.root : ws.local) / dir;
    fs::create_directories(there);
    double s = 0;
    if (who == "tar") {
      const std::string sdir = up ? ws.local.string() : ws.root.string() + "/up-tar0";
      s = timed(
          [&] {
            return sh(up ? in_s + "sh -c \"tar -C " + sdir + " -cf - tree | " + ssh + " 'tar -C " +
                               there.string() + " -xf -'\""
                         : in_s + "sh -c \"" + ssh + " 'tar -C " + sdir + " -cf - tree' | tar -C " +
                               there.string() + " -xf -\"",
                      300);
          },
          &r);
    } else {
      const std::string bin = who == "base" ? std::string(base) : std::string(AESXFER_BINARY);
      const uint16_t p = who == "base" ? base_port : port;
      std::vector<std::string> args =
          up ? std::vector<std::string>{"send", "-r", src.string(), "127.0.0.1:" + dir, "-q"}
             : std::vector<std::string>{"recv", "-r", "127.0.0.1:up-tar0/tree", there.string(), "-q"};
      s = timed([&] { return client(args, 300, ns_s, bin, p); }, &r);
    }
    ASSERT_EQ(r.exit_code, 0) << who << " " << dir << ": " << r.describe();
    EXPECT_EQ(check(there / "tree"), 0u) << who << " " << dir;
    t[(up ? "send " : "recv ") + who].push_back(s);
  };
  const std::vector<std::string> who{"base", "new", "tar"};
  for (bool up : {true, false})
    for (int round = 0; round < kRounds; ++round)
      for (size_t i = 0; i < who.size(); ++i) {
        run(who[(i + size_t(round)) % who.size()], round, up);
        if (HasFatalFailure()) return;
      }
  sshd->stop();
  base_server->stop();
  for (auto& [name, v] : t) {
    std::sort(v.begin(), v.end());
    std::printf("[ netns   ] 2000 x 4 KiB, loopback, %s: median %.3f s (min %.3f, max %.3f, %d runs)\n",
                name.c_str(), v[v.size() / 2], v.front(), v.back(), int(v.size()));
  }
  for (const char* dir : {"send", "recv"}) {
    const std::string d = dir;
    std::printf("[ netns   ] %s: new/base %.2f, new/tar %.2f, base/tar %.2f (medians)\n", dir,
                t[d + " new"][kRounds / 2] / t[d + " base"][kRounds / 2],
                t[d + " new"][kRounds / 2] / t[d + " tar"][kRounds / 2],
                t[d + " base"][kRounds / 2] / t[d + " tar"][kRounds / 2]);
  }
}

// Issue 16 item 4: send -r --resume of a 400-file tree (4 KiB each) over the 50 ms path when the
// server holds half of it already. Pipelined probes make it about one round trip plus the missing
// data; one exchange per file would be at least 400 + 200 round trips (30 s). The bound asserted
// (120 round trips) is structural, not a speed target. With AESXFER_BASELINE_BINARY the same resumed
// send by the baseline build (its own server, same state) is timed beside it, three rounds each.
TEST_F(Netns, ResumedTreeOverFiftyMs) {
  auto delay = delay_path();
  ASSERT_TRUE(delay);
  fs::path src = small_tree(4, 100);
  // The server gets the whole tree, then loses every other file.
  auto prepare = [&](const std::string& bin, uint16_t p, bool base) {
    const fs::path root = base ? ws.tmp / "base-root" : ws.root;
    fs::remove_all(root / "tree");
    auto r = client({"send", "-r", src.string(), "10.77.0.5:.", "-q"}, 300, "", bin, p);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    int i = 0;
    for (const auto& [rel, sum] : tree_sums)
      if (i++ % 2) fs::remove(root / "tree" / rel);
  };
  auto resume = [&](const std::string& bin, uint16_t p, bool) {
    return client({"send", "-r", "--resume", src.string(), "10.77.0.5:.", "-q"}, 300, "", bin, p);
  };
  double median = resumed_rounds("send -r --resume, 400 x 4 KiB, half on the server", prepare, resume);
  EXPECT_EQ(check(ws.root / "tree"), 0u);
  // One exchange per file would take at least 400 probes + 200 puts = 600 RTTs (30 s); pipelined,
  // a few RTTs plus the CPU: 1.56 s quiet, 2.4-2.7 s beside two busy loops, and more beside them
  // and a parallel ctest (one loaded run failed a 4 s bound). 120 RTTs (6 s) is still 5 x under
  // one exchange per file, which is what this bound tells apart.
  EXPECT_LT(median, 120 * 0.05);
  EXPECT_EQ(delay->dropped(), 0u);
}

// The same for recv -r --resume: the client holds half of the server's 400-file tree. Its small
// files go as pipelined gets that offer each complete destination (protocol 4).
TEST_F(Netns, ResumedTreeRecvOverFiftyMs) {
  auto delay = delay_path();
  ASSERT_TRUE(delay);
  fs::path src = small_tree(4, 100);
  // The server gets the tree; a local copy of it (in DIR/tree) loses every other file.
  auto here = [&](bool base) { return ws.tmp / (base ? "down-base" : "down"); };
  auto prepare = [&](const std::string& bin, uint16_t p, bool base) {
    auto r = client({"send", "-r", src.string(), "10.77.0.5:.", "-q"}, 300, "", bin, p);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    fs::remove_all(here(base));
    fs::create_directories(here(base));  // every recv then goes into DIR/tree
    r = client({"recv", "-r", "10.77.0.5:tree", here(base).string(), "-q"}, 300, "", bin, p);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    int i = 0;
    for (const auto& [rel, sum] : tree_sums)
      if (i++ % 2) fs::remove(here(base) / "tree" / rel);
  };
  auto resume = [&](const std::string& bin, uint16_t p, bool base) {
    return client({"recv", "-r", "--resume", "10.77.0.5:tree", here(base).string(), "-q"}, 300, "", bin, p);
  };
  double median = resumed_rounds("recv -r --resume, 400 x 4 KiB, half here", prepare, resume);
  EXPECT_EQ(check(here(false) / "tree"), 0u);
  EXPECT_LT(median, 120 * 0.05);  // as above: one exchange per file would be 600 RTTs
  EXPECT_EQ(delay->dropped(), 0u);
}

// Relay CPU as a share of one core over `secs`, and per GB carried (both directions' threads).
void print_relay_cost(const char* what, const TunRelay& r, double secs, double mbit) {
  double cpu = double(r.a_to_b().cpu_us + r.b_to_a().cpu_us) / 1e6;
  double gb = double(r.a_to_b().bytes + r.b_to_a().bytes) / 1e9;
  std::printf("[ netns   ] relay %s: iperf3 %.0f Mbit/s, relay CPU %.0f%% of a core (%.2f CPU-s/GB)\n", what,
              mbit, 100 * cpu / secs, gb > 0 ? cpu / gb : 0.0);
}

// Issue 25 item 6: the WAN lab's path does what it is asked. 20 ms RTT, a 200 Mbit/s bottleneck
// with a 256 KiB buffer, 1 % random loss each way, MTU 1500: the round trip is there, the loss
// rate is what was asked (within what chance allows over tens of thousands of packets), the queue
// never holds more than its bound, nothing passes the rate cap, and a file still arrives whole.
TEST_F(Netns, WanPathLossRateAndQueueAsAsked) {
  LinkParams p;
  p.delay = std::chrono::milliseconds(10);
  p.rate_bps = 200e6;
  p.loss = 0.01;
  p.queue_bytes = 256 << 10;
  auto relay = wan_path(p, 1500);
  ASSERT_TRUE(relay);
  double rtt_ms = connect_rtt_ms(ns_c, "10.77.0.5", port);
  EXPECT_GE(rtt_ms, 19.0);
  fs::path f = source(uint64_t(32) << 20);
  auto r = client({"send", f.string(), "10.77.0.5:copy.bin"});
  ASSERT_EQ(r.exit_code, 0) << r.describe() << read_text_file(ws.tmp / "server.log");
  EXPECT_EQ(sha256_file(ws.root / "copy.bin"), sha256_file(f));
  auto t0 = Clock::now();
  double bps = iperf3("-P 4 -C cubic", 3);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_GT(bps, 0) << read_text_file(ws.tmp / "iperf3.log");
  relay->stop();
  const LinkStats& up = relay->a_to_b();
  double lost = double(up.lost) / double(up.packets + up.lost + up.overflow);
  std::printf(
      "[ netns   ] wan path 20 ms, 200 Mbit/s, 1%% loss: RTT %.1f ms, iperf3 -P 4 cubic %.0f Mbit/s; %s\n",
      rtt_ms, bps / 1e6, relay->summary().c_str());
  print_relay_cost("at 200 Mbit/s, MTU 1500", *relay, secs, bps / 1e6);
  EXPECT_GT(up.packets, 20000u);
  EXPECT_GT(lost, 0.006);
  EXPECT_LT(lost, 0.014);
  EXPECT_GT(relay->b_to_a().lost, 0u);  // both ways
  EXPECT_LE(up.max_queue, p.queue_bytes);
  EXPECT_GT(up.max_queue, 0u);
  EXPECT_LT(bps, 1.02 * p.rate_bps);
}

// Issue 25 item 6: what the relay costs at 1 Gbit/s (no loss, 1 ms each way), MTU 9000 and 1500,
// with iperf3 -P 2 through it. Printed; the bound asserted (20 CPU-s per GB carried, both
// directions; the cost includes the kernel's receive path, which runs in the relay's write) is
// loose enough for a machine loaded 10 times over its cores (measured there: 5.3 at MTU 9000,
// 12.3 at 1500) and still fails a relay that spins.
TEST_F(Netns, WanRelayCostAtOneGbit) {
  for (int mtu : {9000, 1500}) {
    SCOPED_TRACE(mtu);
    LinkParams p;
    p.delay = std::chrono::milliseconds(1);
    p.rate_bps = 1e9;
    auto relay = wan_path(p, mtu);
    ASSERT_TRUE(relay);
    auto t0 = Clock::now();
    double bps = iperf3("-P 2", 3);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_GT(bps, 0) << read_text_file(ws.tmp / "iperf3.log");
    relay->stop();
    print_relay_cost(mtu == 9000 ? "at 1 Gbit/s, MTU 9000" : "at 1 Gbit/s, MTU 1500", *relay, secs,
                     bps / 1e6);
    double cpu = double(relay->a_to_b().cpu_us + relay->b_to_a().cpu_us) / 1e6;
    double gb = double(relay->a_to_b().bytes + relay->b_to_a().bytes) / 1e9;
    EXPECT_LT(bps, 1.02e9);
    EXPECT_GT(gb, 0.05);
    EXPECT_LT(cpu / gb, 20.0);
    close_wan(relay);
  }
}

// Issue 25 item 1: on a long path with 1 % random loss, the default (--congestion auto) sends with
// bbr and says so; cubic, what a host without bbr for its users runs, moves a fraction of it, and
// its summary says that loss limits the path and what would help. Both byte-exact. (cubic is
// forced with --congestion cubic: a namespace's default may only be a control the host allows to
// every user, and this host may not list cubic.)
TEST_F(Netns, LossyPathAutoCongestionAgainstCubic) {
  LinkParams p;
  p.delay = std::chrono::milliseconds(20);
  p.rate_bps = 200e6;
  p.loss = 0.01;
  auto relay = wan_path(p, 1500);
  ASSERT_TRUE(relay);
  fs::path f = source(uint64_t(16) << 20);
  const std::string want = sha256_file(f);
  auto a = client({"send", f.string(), "10.77.0.5:auto.bin"});
  ASSERT_EQ(a.exit_code, 0) << a.describe() << read_text_file(ws.tmp / "server.log");
  EXPECT_EQ(sha256_file(ws.root / "auto.bin"), want);
  EXPECT_EQ(json_field(a.out, "congestion"), "bbr") << a.out;
  EXPECT_NE(json_field(a.out, "congestion_why").find("auto"), std::string::npos) << a.out;
  // cubic, as a host without bbr for users would have it; no --json: the human summary.
  auto c = run_process({kIp, "netns", "exec", ns_c, AESXFER_BINARY, "send", f.string(), "10.77.0.5:cubic.bin",
                        "--congestion", "cubic", "-P", std::to_string(port), "--timeout", "60"},
                       {{"AESXFER_HOME", ws.home.string()}}, 300);
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  EXPECT_EQ(sha256_file(ws.root / "cubic.bin"), want);
  EXPECT_NE(c.out.find("aesxfer: note: packet loss limits this path: "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("cubic, loss-based"), std::string::npos) << c.out;
  auto cj = client({"send", f.string(), "10.77.0.5:/dev/null", "--congestion", "cubic"});
  ASSERT_EQ(cj.exit_code, 0) << cj.describe();
  double bbr = json_mbps(a.out), cubic = json_mbps(cj.out);
  std::printf(
      "[ netns   ] 40 ms, 200 Mbit/s, 1%% loss, hosts cubic: auto (bbr) %.1f MB/s, cubic %.1f MB/s (%s %% "
      "resent), "
      "%.1f x\n",
      bbr, cubic, json_field(cj.out, "resent_percent").c_str(), bbr / cubic);
  EXPECT_EQ(json_field(cj.out, "congestion"), "cubic");
  EXPECT_GT(std::stod(json_field(cj.out, "resent_percent")), 0.3);
  EXPECT_GT(bbr, 2 * cubic);
  // recv: the server's auto sends with bbr; the file comes back whole.
  fs::path back = ws.local / "back.bin";
  auto g = client({"recv", "10.77.0.5:auto.bin", back.string()});
  ASSERT_EQ(g.exit_code, 0) << g.describe();
  EXPECT_EQ(sha256_file(back), want);
}

// Issue 25 item 2: where cubic is all there is and the path loses packets at random, loss, not
// the window, limits each connection, and a put opens more while each added one pays
// (client/stream_growth.h). 40 ms, 1 % loss each way, MTU 9000: auto starts with 4 connections
// (the window rule) and grows; --streams 4 (fixed) never does. Both byte-exact.
TEST_F(Netns, LossyCubicPathGrowsTheConnections) {
  LinkParams p;
  p.delay = std::chrono::milliseconds(20);
  p.rate_bps = 1e9;
  p.loss = 0.01;
  p.realtime = true;  // the rule judges the round trip: a loaded relay must not look like a queue
  auto relay = wan_path(p, 9000);
  ASSERT_TRUE(relay);
  fs::path f = source(uint64_t(192) << 20);
  const std::string want = sha256_file(f);
  auto grown = client({"send", "-v", "--congestion", "cubic", f.string(), "10.77.0.5:grown.bin"});
  ASSERT_EQ(grown.exit_code, 0) << grown.describe() << read_text_file(ws.tmp / "server.log");
  EXPECT_EQ(sha256_file(ws.root / "grown.bin"), want);
  auto fixed = client({"send", "--streams", "4", "--congestion", "cubic", f.string(), "10.77.0.5:fixed.bin"});
  ASSERT_EQ(fixed.exit_code, 0) << fixed.describe();
  EXPECT_EQ(sha256_file(ws.root / "fixed.bin"), want);
  relay->stop();
  EXPECT_FALSE(relay->a_to_b().realtime_failed || relay->b_to_a().realtime_failed);
  std::printf(
      "[ netns   ] 40 ms, 1%% loss, cubic: auto %s streams %.1f MB/s (%s %% resent), --streams 4 %.1f MB/s\n",
      json_field(grown.out, "streams").c_str(), json_mbps(grown.out),
      json_field(grown.out, "resent_percent").c_str(), json_mbps(fixed.out));
  // The first phase has the connections decided from the base round trip (4 at an idle 40 ms;
  // a loaded relay measured 47.6 ms once and the rule chose 5), and growing doubles them.
  std::smatch first, grew;
  const std::regex decided(R"(streams: auto, (\d+) per large file, decided once)");
  ASSERT_TRUE(std::regex_search(grown.err, first, decided)) << grown.err;
  const int n = std::stoi(first[1]);
  const std::regex growth(
      R"(streams: (\d+) moved [^\n]* again: opening (\d+) more \(loss, not the window, limits each\))");
  ASSERT_TRUE(std::regex_search(grown.err, grew, growth)) << grown.err;
  EXPECT_EQ(std::stoi(grew[1]), n) << grown.err;
  EXPECT_EQ(std::stoi(grew[2]), n) << grown.err;
  EXPECT_GE(std::stoi(json_field(grown.out, "streams")), std::min(2 * n, 16)) << grown.out;
  EXPECT_EQ(json_field(fixed.out, "streams"), "4") << fixed.out;
}

// Issue 25 item 4: the number of connections is decided once per invocation from the path's base
// round trip. A 12 ms path with a 100 Mbit/s bottleneck and a deep (4 MB, 320 ms) buffer that
// cubic (forced) fills: the smoothed round trip during and after a file is many times the base
// one, and the old rule took its connections from it.
TEST_F(Netns, AutoStreamsDecidedOnceFromBaseRtt) {
  LinkParams p;
  p.delay = std::chrono::milliseconds(6);
  p.rate_bps = 100e6;
  p.queue_bytes = 4u << 20;
  auto relay = wan_path(p, 9000);
  ASSERT_TRUE(relay);
  fs::path f = source(uint64_t(48) << 20);
  fs::path g = ws.local / "second.bin";
  fs::copy_file(f, g);
  auto r = client({"send", "--congestion", "cubic", f.string(), g.string(), "10.77.0.5:"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::vector<std::string> streams;
  for (const auto& l : nonempty_lines(r.out))
    if (auto o = parse_flat_json(l); o && o->count("streams")) streams.push_back((*o)["streams"]);
  relay->stop();
  std::printf("[ netns   ] 12 ms base RTT, 4 MB queue: streams per file %s, %s; max queue %llu bytes\n",
              streams.size() > 0 ? streams[0].c_str() : "?", streams.size() > 1 ? streams[1].c_str() : "?",
              (unsigned long long)relay->a_to_b().max_queue.load());
  ASSERT_EQ(streams.size(), 2u) << r.out;
  EXPECT_EQ(streams[0], streams[1]);
  EXPECT_GE(std::stoi(streams[0]), 2);
  // From the base round trip (12 ms: 2 connections of a 3 MiB window for 400 MB/s; 4 leaves room
  // for a loaded relay). The old rule, on the smoothed round trip, took 6 for both files in a run
  // by hand with the host's reno filling the same queue.
  EXPECT_LE(std::stoi(streams[0]), 4);
  EXPECT_GT(relay->a_to_b().max_queue, 1u << 20);  // the queue did fill (the RTT was inflated)
}

}  // namespace
}  // namespace aesxfer::test
