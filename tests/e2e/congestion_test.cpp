// Issue 25 item 1: --congestion auto|system|NAME (net/congestion.h). What each connection gets and
// why, privileged and not: an unprivileged case runs in a forked child that gives up root
// (setuid to nobody drops every capability), so the kernel's allow-list decides as it does for a
// user. The host's own settings are only read, never changed.
#include "net/congestion.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

std::vector<std::string> words(const char* file) {
  std::ifstream f(std::string("/proc/sys/net/ipv4/") + file);
  std::vector<std::string> w;
  for (std::string s; f >> s;) w.push_back(s);
  return w;
}
bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A control this kernel has but does not allow unprivileged users; "" when there is none.
std::string available_not_allowed() {
  auto allowed = words("tcp_allowed_congestion_control");
  for (const auto& n : words("tcp_available_congestion_control"))
    if (!has(allowed, n)) return n;
  return "";
}

// Runs f in a child that has given up root (uid and gid 65534: no capabilities left) and returns
// what it wrote to the pipe.
template <typename F>
std::string as_nobody(F f) {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    std::string out = f();
    ssize_t w = ::write(p[1], out.data(), out.size());
    ::_exit(w == ssize_t(out.size()) ? 0 : 4);
  }
  ::close(p[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  return got;
}

int tcp_socket() { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }

TEST(Congestion, PrivilegedAutoGetsBbrAndSaysWhy) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (CAP_NET_ADMIN)";
  if (!has(words("tcp_available_congestion_control"), "bbr") && ::system("modprobe -q tcp_bbr") != 0)
    GTEST_SKIP() << "no bbr in this kernel";
  int fd = tcp_socket();
  net::Congestion c = net::set_congestion(fd, "auto");
  ::close(fd);
  EXPECT_EQ(c.name, "bbr") << c.why;
  EXPECT_NE(c.why.find("auto"), std::string::npos) << c.why;
  // system leaves the host's default alone and says so.
  fd = tcp_socket();
  net::Congestion s = net::set_congestion(fd, "system");
  ::close(fd);
  auto def = words("tcp_congestion_control");
  ASSERT_FALSE(def.empty());
  EXPECT_EQ(s.name, def[0]);
  EXPECT_NE(s.why.find("system"), std::string::npos) << s.why;
}

// Unprivileged, auto falls back to the host's default when its pick is not allowed, and names the
// sysctl that stands in the way. bbr is allowed on some hosts (this one lists it), so the pick is
// made a control this kernel has but does not allow (the same code path as bbr refused).
TEST(Congestion, UnprivilegedAutoFallsBackAndNamesTheAllowList) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  std::string refused = available_not_allowed();
  if (refused.empty()) GTEST_SKIP() << "every available control is allowed to users here";
  std::string got = as_nobody([&] {
    int fd = tcp_socket();
    net::Congestion c = net::set_congestion(fd, "auto", refused);
    ::close(fd);
    return c.name + "|" + c.why + "|" + net::check_congestion(refused);
  });
  auto def = words("tcp_congestion_control");
  ASSERT_FALSE(def.empty());
  EXPECT_EQ(got.substr(0, got.find('|')), def[0]) << got;
  EXPECT_NE(got.find("the host default; " + refused +
                     " unavailable: not in net.ipv4.tcp_allowed_congestion_control"),
            std::string::npos)
      << got;
  EXPECT_NE(
      got.find("|--congestion " + refused + " unavailable: not in net.ipv4.tcp_allowed_congestion_control"),
      std::string::npos)
      << got;
  // What users are allowed is allowed to nobody as well, and said so.
  auto allowed = words("tcp_allowed_congestion_control");
  ASSERT_FALSE(allowed.empty());
  std::string ok = allowed.back();
  std::string got2 = as_nobody([&] {
    int fd = tcp_socket();
    net::Congestion c = net::set_congestion(fd, "auto", ok);
    ::close(fd);
    return c.name + "|" + c.why;
  });
  EXPECT_EQ(got2.substr(0, got2.find('|')), ok) << got2;
}

TEST(Congestion, UnknownNameIsRefusedWithTheKernelsList) {
  std::string why = net::check_congestion("nosuchcc");
  EXPECT_NE(
      why.find("--congestion nosuchcc unavailable: not in this kernel (tcp_available_congestion_control: "),
      std::string::npos)
      << why;
  EXPECT_NE(net::check_congestion("x y;z/../../etc"), "");
  EXPECT_EQ(net::check_congestion("auto"), "");
  EXPECT_EQ(net::check_congestion("system"), "");
}

class CongestionCli : public ServerTest {};

// -v and --json say which control the send's connection got and why; an unknown name is a
// one-line error before anything connects (send, recv and serve alike).
TEST_F(CongestionCli, JsonAndVerboseSayWhichControlAndWhy) {
  fs::path f = ws.local / "f.bin";
  write_random_file(f, 300000, 5);
  auto r = run({"send", "-v", "--json", f.string(), "127.0.0.1:f.bin", "--congestion", "system"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto def = words("tcp_congestion_control");
  ASSERT_FALSE(def.empty());
  auto j = parse_flat_json(nonempty_lines(r.out).back());
  ASSERT_TRUE(j) << r.out;
  EXPECT_EQ((*j)["congestion"], def[0]) << r.out;
  EXPECT_NE(r.err.find("debug1: congestion control " + def[0] + " (the host default (--congestion system))"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(j->count("resent_percent")) << r.out;
  // serve says what its connections get (auto: bbr or the host default, and why).
  EXPECT_TRUE(server->wait_for_log("congestion control ")) << server->log();

  for (const char* cmd : {"send", "recv"}) {
    auto bad =
        run({cmd, "--congestion", "nosuchcc", cmd == std::string("send") ? f.string() : "127.0.0.1:f.bin",
             cmd == std::string("send") ? "127.0.0.1:g.bin" : (ws.local / "g.bin").string()});
    EXPECT_EQ(bad.exit_code, 2) << bad.describe();  // as an unknown cipher
    EXPECT_EQ(nonempty_lines(bad.err).size(), 1u) << bad.err;
    EXPECT_NE(bad.err.find("nosuchcc unavailable: not in this kernel"), std::string::npos) << bad.err;
    EXPECT_FALSE(fs::exists(ws.root / "g.bin"));
    EXPECT_FALSE(fs::exists(ws.local / "g.bin"));
  }
  auto srv =
      run_aesxfer({"serve", "-P", "0", "--root", ws.root.string(), "--congestion", "nosuchcc"}, ws.home, 20);
  EXPECT_EQ(srv.exit_code, 2) << srv.describe();
  EXPECT_NE(srv.err.find("nosuchcc unavailable"), std::string::npos) << srv.err;
}

}  // namespace
}  // namespace aesxfer::test
