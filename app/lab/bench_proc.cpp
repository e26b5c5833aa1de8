#include "app/lab/bench_proc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "files/unique_fd.h"

extern char** environ;

namespace aesxfer::app::proc {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool executable(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

int exit_status(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

}  // namespace

double cpu_seconds_of(pid_t pid, bool with_children) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return -1;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(line.substr(close + 1));
  std::vector<std::string> fields;  // fields[0] is field 3 (state)
  for (std::string w; in >> w;) fields.push_back(w);
  if (fields.size() < 15) return -1;
  double ticks = 0;
  for (size_t i = 11; i < (with_children ? 15u : 13u); ++i) ticks += std::strtod(fields[i].c_str(), nullptr);
  return ticks / double(::sysconf(_SC_CLK_TCK));
}

double run_delay_seconds(pid_t pid) {
  std::error_code ec;
  double total = 0;
  bool any = false;
  for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream f(t.path() / "schedstat");
    unsigned long long run = 0, wait = 0;
    if (f >> run >> wait) {
      total += double(wait) / 1e9;
      any = true;
    }
  }
  return any ? total : -1;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream f(t.path() / "children");
    for (long c; f >> c;) out.push_back(pid_t(c));
  }
  return out;
}

std::vector<pid_t> tree_of(pid_t pid) {
  std::vector<pid_t> out = {pid};
  for (size_t i = 0; i < out.size() && out.size() < 4096; ++i)
    for (pid_t c : children_of(out[i])) out.push_back(c);
  return out;
}

double tree_cpu_seconds(pid_t root) {
  double total = 0;
  for (pid_t p : tree_of(root)) total += std::max(0.0, cpu_seconds_of(p, true));
  return total;
}

std::string log_tail(const std::string& path) {
  std::ifstream f(path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.size() > 400) s = "..." + s.substr(s.size() - 400);
  return s.empty() ? "(no log)" : s;
}

std::string find_program(const std::string& name, const std::vector<std::string>& dirs) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return executable(name) ? fs::absolute(name).string() : "";
  std::vector<std::string> all = dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) all.push_back(d);
  }
  for (const auto& d : all) {
    const std::string p = d + "/" + name;
    if (executable(p)) return fs::absolute(p).string();
  }
  return "";
}

pid_t spawn(const SpawnOptions& o) {
  if (o.argv.empty()) throw std::runtime_error("spawn: no program");
  std::vector<std::string> env = o.env;
  if (env.empty())
    for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  std::vector<std::string> args = o.argv;
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log = o.log;
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    if (o.tty >= 0) {
      if (::setsid() < 0 || ::ioctl(o.tty, TIOCSCTTY, 0) < 0) ::_exit(127);
      ::dup2(o.tty, 0);
      ::dup2(o.tty, 1);
      ::dup2(o.tty, 2);
    } else {
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = o.out_fd >= 0 ? o.out_fd
                      : log.empty() ? ::open("/dev/null", O_WRONLY)
                                    : ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (in < 0 || out < 0) ::_exit(127);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

int stop(pid_t pid, double grace_s) noexcept {
  if (pid <= 0) return -1;
  ::kill(pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::duration<double>(grace_s);
  int st = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0) return -1;  // not our child (any more)
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exit_status(st);
}

int run_capture(const std::vector<std::string>& argv, std::string& out, double timeout_s) {
  out.clear();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  files::UniqueFd in(fds[0]);
  files::UniqueFd child_out(fds[1]);
  SpawnOptions so;
  so.argv = argv;
  so.out_fd = child_out.get();  // dup2'd to 1 and 2 in the child, which clears close-on-exec
  const pid_t pid = spawn(so);
  child_out.reset();
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  for (;;) {
    pollfd p{in.get(), POLLIN, 0};
    const int left =
        int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) break;
    if (::poll(&p, 1, left) < 0 && errno != EINTR) break;
    const ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < (size_t(1) << 20)) out.append(buf, size_t(n));
  }
  in.reset();  // a child still writing gets EPIPE rather than blocking
  int st = 0;
  if (::waitpid(pid, &st, WNOHANG) == pid) return exit_status(st);
  if (Clock::now() < deadline) {  // output closed: the child is exiting
    ::waitpid(pid, &st, 0);
    return exit_status(st);
  }
  return stop(pid, 1);
}

void TreeWait::start(pid_t root) {
  seen_.clear();
  for (pid_t p : tree_of(root)) {
    const double d = run_delay_seconds(p);
    if (d >= 0) seen_[p] = {d, d};
  }
}

void TreeWait::sample(pid_t root) {
  for (pid_t p : tree_of(root)) {
    const double d = run_delay_seconds(p);
    if (d < 0) continue;
    auto it = seen_.find(p);
    if (it == seen_.end())
      seen_[p] = {0, d};
    else
      it->second.second = std::max(it->second.second, d);
  }
}

double TreeWait::seconds() const {
  if (seen_.empty()) return -1;
  double total = 0;
  for (const auto& [pid, v] : seen_) total += std::max(0.0, v.second - v.first);
  return total;
}

}  // namespace aesxfer::app::proc
