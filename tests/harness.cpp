#include "tests/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "tests/proc_status.h"
#include "tests/test_util.h"

extern char** environ;

namespace aesxfer::test {

using Clock = std::chrono::steady_clock;

namespace {
// Every process a test starts reads names in UTF-8, whatever the machine's locale (a CI machine
// may set none, which the client takes for an 8-bit terminal): a test of another locale says so
// in the env it passes (LocaleOutput.*).
const bool kUtf8Children = [] { return ::setenv("LC_ALL", "C.UTF-8", 1) == 0; }();
// The signals tests send start at their default in every process a test starts: the client leaves
// a signal ignored at its start ignored (nohup), and a runner started as a background job of a
// script (SIGINT and SIGQUIT ignored) would otherwise make those tests fail.
const bool kDefaultSignals = [] {
  for (int sig : {SIGINT, SIGQUIT, SIGHUP, SIGTERM})
    if (::signal(sig, SIG_DFL) == SIG_ERR) return false;
  return true;
}();
}  // namespace

// ---------------------------------------------------------------------------------------------
// Files

TempDir::TempDir(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / (tag + "-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Make everything removable first (tests may chmod files).
  fs::remove_all(path_, ec);
}

Workspace::Workspace() : home(tmp / "home"), root(tmp / "root"), local(tmp / "local") {
  fs::create_directories(home);
  fs::create_directories(root);
  fs::create_directories(local);
}

void chown_tree(const fs::path& p, uid_t who) {
  if (::lchown(p.c_str(), who, who) != 0) throw std::runtime_error("lchown " + p.string());
  for (auto it = fs::recursive_directory_iterator(p); it != fs::recursive_directory_iterator(); ++it)
    if (::lchown(it->path().c_str(), who, who) != 0)
      throw std::runtime_error("lchown " + it->path().string());
}

StickyShare::StickyShare(const fs::path& base, const std::string& private_name)
    : shared(base / "shared"), priv(base / private_name) {
  fs::create_directories(shared);
  fs::create_directories(priv);
  fs::permissions(shared, fs::perms(01777));
  fs::permissions(priv, fs::perms(0700));
}

fs::path StickyShare::link(const std::string& name, const fs::path& target, uid_t who) const {
  const fs::path at = shared / name;
  fs::create_symlink(target, at);
  if (::lchown(at.c_str(), who, who) != 0) throw std::runtime_error("lchown " + at.string());
  return at;
}

fs::path plant_directory(const fs::path& at, uid_t who, gid_t gid) {
  fs::create_directories(at);
  if (::chown(at.c_str(), who, gid) != 0 || ::chmod(at.c_str(), 0777) != 0)
    throw std::runtime_error("plant_directory " + at.string());
  return at;
}

fs::path client_home(const Workspace& ws) {
  const fs::path own = ws.tmp / "client-home";
  return fs::exists(own) ? own : ws.home;
}

void hand_over(const Workspace& ws, uid_t who) {
  const fs::path own = ws.tmp / "client-home";
  if (run_aesxfer({"keygen"}, own).exit_code != 0) throw std::runtime_error("keygen");
  const std::string line = read_text_file(own / "id_ed25519.pub");
  if (run_aesxfer({"authorize", line.substr(0, line.size() - 1)}, ws.home).exit_code != 0)
    throw std::runtime_error("authorize");
  chown_tree(ws.home, who);
  chown_tree(ws.root, who);
  fs::permissions(ws.tmp.path(), fs::perms(0711));
}

std::vector<std::string> nonempty_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream is(s);
  for (std::string l; std::getline(is, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

namespace {

// One object's members as text into out, nested objects' members also as "key.member".
void flatten(const nlohmann::json& obj, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& [k, v] : obj.items()) {
    const std::string key = prefix + k;
    out[key] = v.is_string() ? v.get<std::string>() : v.dump();
    if (v.is_object()) flatten(v, key + ".", out);
  }
}

}  // namespace

std::optional<std::map<std::string, std::string>> parse_flat_json(const std::string& line) {
  auto j = parse_json_strict(line);
  if (!j || !j->is_object()) return std::nullopt;
  std::map<std::string, std::string> out;
  flatten(*j, "", out);
  return out;
}

namespace {

std::string json_key_problem(const std::string& key) {
  static const std::regex snake("[a-z][a-z0-9]*(_[a-z0-9]+)*");
  if (!std::regex_match(key, snake)) return "not snake_case";
  if (key.find("mb") != std::string::npos && key != "mb_per_s" && key.rfind("mb_per_s_", 0) != 0)
    return "a rate is mb_per_s or mb_per_s_*";
  std::vector<std::string> words;
  std::istringstream in(key.rfind("mb_per_s", 0) == 0 ? key.substr(8) : key);
  for (std::string w; std::getline(in, w, '_');) words.push_back(w);
  for (const auto& w : words)
    if (w == "s" || w == "sec" || w == "secs" || w == "ms" || w == "elapsed" || w == "kb" || w == "kib" ||
        w == "mib")
      return "abbreviated or old unit '" + w + "' (times are seconds, sizes bytes)";
  if (key == "total") return "total of what (total_bytes)";
  return "";
}

void scheme_walk(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (const std::string why = json_key_problem(k); !why.empty()) out.push_back(path + k + ": " + why);
      scheme_walk(v, path + k + ".", out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) scheme_walk(v, path, out);
  }
}

}  // namespace

std::vector<std::string> json_scheme_problems(const std::string& doc) {
  std::vector<std::string> out;
  scheme_walk(nlohmann::json::parse(doc), "", out);
  return out;
}

std::string sha256_file(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("sha256_file: cannot open " + p.string());
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  // One buffer per thread: a fresh 1 MiB per file cost more than the hashing for trees of small
  // files under the sanitizers (each large allocation is mapped and poisoned anew).
  static thread_local std::vector<uint8_t> buf(1 << 20);
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ::close(fd);
      throw std::runtime_error("sha256_file: read error on " + p.string());
    }
    if (r == 0) break;
    EVP_DigestUpdate(ctx.get(), buf.data(), size_t(r));
  }
  ::close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += d[md[i] >> 4];
    s += d[md[i] & 15];
  }
  return s;
}

void write_random_file(const fs::path& p, uint64_t size, uint64_t seed) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot create " + p.string());
  std::mt19937_64 rng(seed);
  // 1 MiB at a time; a smaller file draws only the words it needs (the same bytes either way).
  std::vector<uint64_t> buf(size_t(std::clamp<uint64_t>((size + 7) / 8, 1, 1 << 17)));
  uint64_t left = size;
  while (left > 0) {
    for (auto& w : buf) w = rng();
    size_t n = size_t(std::min<uint64_t>(left, buf.size() * 8));
    f.write(reinterpret_cast<const char*>(buf.data()), std::streamsize(n));
    left -= n;
  }
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

void write_text_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

std::string read_text_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

std::vector<fs::path> temp_debris(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if (n.size() > 1 && n[0] == '.' && n.find(".aesxfer-") != std::string::npos) out.push_back(e.path());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Processes

std::string ProcResult::describe() const {
  std::ostringstream os;
  os << "exit " << exit_code << (timed_out ? " (timed out)" : "") << "\n--- stdout ---\n"
     << out << "--- stderr ---\n"
     << err;
  return os.str();
}

namespace {

// argv and envp prepared before fork(): the child only calls async-signal-safe functions.
struct ExecArgs {
  std::vector<std::string> args, envs;
  std::vector<char*> argv, envp;
  ExecArgs(const std::vector<std::string>& a, const std::map<std::string, std::string>& env) : args(a) {
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      std::string key = kv.substr(0, kv.find('='));
      if (!env.count(key)) envs.push_back(kv);
    }
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : envs) envp.push_back(s.data());
    envp.push_back(nullptr);
  }
};

int status_to_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// In the child: stdin from /dev/null, stdout/stderr to the given fds, no other descriptor, then exec.
[[noreturn]] void child_exec(const ExecArgs& ea, int out_fd, int err_fd, bool die_with_parent) {
  if (die_with_parent) ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  // Nothing else, whatever the test process itself inherited (as a login shell gives a command).
  ::close_range(3, ~0U, 0);
  ::execve(ea.argv[0], ea.argv.data(), ea.envp.data());
  static const char msg[] = "harness: execve failed\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

ProcResult run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                       double timeout_s) {
  ExecArgs ea(argv, env);
  int po[2], pe[2];
  if (::pipe2(po, O_CLOEXEC) != 0 || ::pipe2(pe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) child_exec(ea, po[1], pe[1], true);
  ::close(po[1]);
  ::close(pe[1]);
  ProcResult r;
  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 && !r.timed_out) {
      ::kill(pid, SIGKILL);
      r.timed_out = true;
    }
    int pr = ::poll(fds, 2, r.timed_out ? 1000 : int(std::min<int64_t>(left, 1000)));
    if (pr < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? r.out : r.err).append(buf, size_t(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = status_to_code(status);
  return r;
}

ProcResult run_aesxfer(const std::vector<std::string>& args, const fs::path& home, double timeout_s) {
  std::vector<std::string> argv{AESXFER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, {{"AESXFER_HOME", home.string()}}, timeout_s);
}

NobodyClient::NobodyClient(const Workspace& ws) : home(ws.tmp / "nobody-home") {
  fs::create_directories(home);
  chown_tree(home, kNobody);
  fs::permissions(ws.tmp.path(), fs::perms(0711));
  if (run({"keygen"}).exit_code != 0) throw std::runtime_error("keygen as nobody");
  const std::string line = read_text_file(home / "id_ed25519.pub");
  if (run_aesxfer({"authorize", line.substr(0, line.size() - 1)}, ws.home).exit_code != 0)
    throw std::runtime_error("authorize nobody's key");
}

ProcResult NobodyClient::run(const std::vector<std::string>& args, double timeout_s) const {
  std::vector<std::string> argv{"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                AESXFER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, {{"AESXFER_HOME", home.string()}}, timeout_s);
}

ServerProcess::ServerProcess(const fs::path& home, const fs::path& root,
                             const std::vector<std::string>& extra_args, uid_t as_user,
                             const std::map<std::string, std::string>& extra_env, const fs::path& log_path)
    : err_path_(log_path.empty() ? dir_.path() / "stderr" : log_path) {
  fs::path port_file = dir_.path() / "port";
  std::vector<std::string> argv{AESXFER_BINARY, "serve",       "--listen",    "127.0.0.1",       "-P", "0",
                                "--root",       root.string(), "--port-file", port_file.string()};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  std::map<std::string, std::string> env = extra_env;
  env["AESXFER_HOME"] = home.string();
  ExecArgs ea(argv, env);
  int out_fd = ::open((dir_.path() / "stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err_fd = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0 || err_fd < 0) throw std::runtime_error("ServerProcess: cannot create log files");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    if (as_user != 0 && (::chown(dir_.path().c_str(), as_user, as_user) != 0 ||
                         ::setgroups(0, nullptr) != 0 || ::setgid(as_user) != 0 || ::setuid(as_user) != 0))
      ::_exit(126);
    child_exec(ea, out_fd, err_fd, true);
  }
  ::close(out_fd);
  ::close(err_fd);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    std::error_code ec;
    if (fs::exists(port_file, ec)) {
      std::ifstream f(port_file);
      unsigned p = 0;
      if (f >> p && p > 0 && p < 65536) {
        port_ = uint16_t(p);
        return;
      }
    }
    if (!running()) {
      std::string l = log();
      throw std::runtime_error("aesxfer serve exited with " + std::to_string(exit_code_) + ": " + l);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop();
  throw std::runtime_error("aesxfer serve did not write its port file within 10 s: " + log());
}

ServerProcess::~ServerProcess() { stop(); }

bool ServerProcess::running() {
  if (pid_ < 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = status_to_code(status);
    pid_ = -1;
    return false;
  }
  return true;
}

int ServerProcess::stop() {
  if (pid_ < 0) return exit_code_;
  ::kill(pid_, SIGTERM);
  // 20 s: a server built with TSan on a loaded machine once took more than 5 s to stop
  // (ServerLimitsStart.OpenFileLimitRaisedForMaxSessions; 0.15 s when the machine is idle).
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    if (!running()) return exit_code_;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  exit_code_ = status_to_code(status);
  pid_ = -1;
  return exit_code_;
}

std::string ServerProcess::log() const { return read_text_file(err_path_); }

bool ServerProcess::wait_for_log(const std::string& needle, double timeout_s, size_t times) const {
  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  for (;;) {
    const std::string l = log();
    size_t seen = 0;
    for (size_t at = 0; seen < times && (at = l.find(needle, at)) != std::string::npos; at += needle.size())
      ++seen;
    if (seen >= times) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string sanitizer_findings(const std::string& log) {
  std::string out;
  std::istringstream is(log);
  for (std::string l; std::getline(is, l);)
    if (l.find("ERROR: AddressSanitizer") != std::string::npos ||
        l.find("ERROR: LeakSanitizer") != std::string::npos ||
        l.find("runtime error:") != std::string::npos ||
        l.find("WARNING: ThreadSanitizer") != std::string::npos)
      out += l + "\n";
  return out;
}

// ---------------------------------------------------------------------------------------------
// TCP helpers

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

bool write_all_fd(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= size_t(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

}  // namespace

long proc_status(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

uint16_t unused_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(0);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error("unused_port: bind failed");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int connect_loopback_from(uint16_t port, const std::string& from) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  sockaddr_in a = loopback(port);
  if (::inet_pton(AF_INET, from.c_str(), &src.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

IdleFlood::IdleFlood(uint16_t port, int n, const std::string& from) : port_(port), n_(n), from_(from) {
  thread_ = std::thread([this] { run(); });
}

IdleFlood::~IdleFlood() {
  stop_ = true;
  thread_.join();
}

bool IdleFlood::wait_held(double timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (held_.load() < n_) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void IdleFlood::run() {
  std::vector<int> fds;
  bool first = true;
  while (!stop_) {
    while (int(fds.size()) < n_ && !stop_) {
      const int fd = connect_loopback_from(port_, from_);
      if (fd < 0) break;  // try again after the poll below
      fds.push_back(fd);
      if (!first) ++renewed_;
    }
    if (int(fds.size()) >= n_) first = false;
    held_ = int(fds.size());
    std::vector<pollfd> pf;
    for (int fd : fds) pf.push_back(pollfd{fd, POLLIN, 0});
    if (::poll(pf.data(), pf.size(), 20) <= 0) continue;
    std::vector<int> open;
    for (const auto& p : pf) {
      char buf[512];
      ssize_t got = 1;
      if (p.revents) got = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);  // a busy ServerHello, EOF or reset
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
        ::close(p.fd);
      else
        open.push_back(p.fd);
    }
    fds.swap(open);
    held_ = int(fds.size());
  }
  for (int fd : fds) ::close(fd);
  held_ = 0;
}

// ---------------------------------------------------------------------------------------------
// Relay

Relay::Relay(uint16_t server_port, const FaultSpec& spec) : server_port_(server_port), spec_(spec) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(0);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 4) != 0)
    throw std::runtime_error("Relay: cannot listen on 127.0.0.1");
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { run(); });
}

Relay::~Relay() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

bool Relay::wait_done(double timeout_s) const {
  auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  while (!done_) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::vector<uint8_t> Relay::captured_c2s() const {
  std::lock_guard<std::mutex> lock(captured_mu_);
  return captured_;
}

void Relay::run() {
  int cfd = -1, sfd = -1;
  // Accept one client, checking stop_ every 100 ms.
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    int r = ::poll(&p, 1, 100);
    if (r > 0) {
      cfd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (cfd >= 0) break;
    }
  }
  if (cfd < 0) {
    done_ = true;
    return;
  }
  sfd = connect_loopback(server_port_);
  if (sfd < 0) {
    ::close(cfd);
    done_ = true;
    return;
  }
  int one = 1;
  ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{10, 0};  // a blocked write never hangs the relay for good
  ::setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ::setsockopt(sfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  std::vector<uint8_t> pending;  // client->server bytes not yet forwarded (incomplete unit)
  std::vector<uint8_t> held;     // swap: record K waiting for K+1
  size_t frames = 0;             // handshake frames forwarded
  size_t rec_idx = 0;            // next record index
  uint64_t rec_bytes = 0;        // record bytes forwarded (for cut)
  uint64_t s2c_bytes = 0;        // server->client bytes forwarded (for cut_s2c_after)
  bool passthrough = false;      // framing lost (garbage length): forward raw
  bool closing = false;

  auto send_server = [&](const uint8_t* p, size_t n, bool is_record) -> bool {
    if (is_record && spec_.kind == FaultKind::cut) {
      uint64_t room = spec_.cut_after > rec_bytes ? spec_.cut_after - rec_bytes : 0;
      if (n >= room) {
        write_all_fd(sfd, p, size_t(room));
        rec_bytes += room;
        applied_ = true;
        closing = true;
        return false;
      }
      rec_bytes += n;
    }
    return write_all_fd(sfd, p, n);
  };

  // Forwards whatever complete units `pending` holds; false when the connection must end.
  auto process = [&]() -> bool {
    size_t off = 0;
    bool ok = true;
    while (ok) {
      size_t avail = pending.size() - off;
      const uint8_t* p = pending.data() + off;
      if (passthrough) {
        if (avail) ok = send_server(p, avail, false);
        off += avail;
        break;
      }
      if (frames < 2) {
        if (avail < 4) break;
        size_t need = 4 + size_t(be32(p));
        if (need > 65536) {
          passthrough = true;
          continue;
        }
        if (avail < need) break;
        ok = send_server(p, need, false);
        off += need;
        ++frames;
        continue;
      }
      if (avail < 8) break;
      size_t body = be32(p);
      if (body > (size_t(2) << 20)) {
        passthrough = true;
        continue;
      }
      size_t need = 8 + body + spec_.tag_len;
      if (avail < need) break;
      std::vector<uint8_t> unit(p, p + need);
      off += need;
      size_t idx = rec_idx++;
      records_ = rec_idx;
      bool target = idx == spec_.record;
      switch (spec_.kind) {
        case FaultKind::flip:
          if (target) {
            size_t pos = 0;
            if (spec_.part == RecordPart::header)
              pos = spec_.offset % 8;
            else if (spec_.part == RecordPart::body)
              pos = 8 + (body ? spec_.offset % body : 0);
            else
              pos = 8 + body + (spec_.tag_len ? spec_.offset % spec_.tag_len : 0);
            if (pos < unit.size()) unit[pos] ^= spec_.mask;
            applied_ = true;
          }
          ok = send_server(unit.data(), unit.size(), true);
          break;
        case FaultKind::drop:
          if (target)
            applied_ = true;
          else
            ok = send_server(unit.data(), unit.size(), true);
          break;
        case FaultKind::replay:
          ok = send_server(unit.data(), unit.size(), true);
          if (ok && target) {
            ok = send_server(unit.data(), unit.size(), true);
            applied_ = true;
          }
          break;
        case FaultKind::swap:
          if (target) {
            held = unit;
          } else if (idx == spec_.record + 1 && !held.empty()) {
            ok = send_server(unit.data(), unit.size(), true) && send_server(held.data(), held.size(), true);
            held.clear();
            applied_ = true;
          } else {
            ok = send_server(unit.data(), unit.size(), true);
          }
          break;
        case FaultKind::none:
        case FaultKind::cut:
          ok = send_server(unit.data(), unit.size(), true);
          break;
      }
    }
    pending.erase(pending.begin(), pending.begin() + std::ptrdiff_t(std::min(off, pending.size())));
    return ok && !closing;
  };

  std::vector<uint8_t> buf(1 << 16);
  bool client_open = true, server_open = true;
  while (!stop_ && client_open && server_open) {
    pollfd fds[2] = {{cfd, POLLIN, 0}, {sfd, POLLIN, 0}};
    int r = ::poll(fds, 2, 100);
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::recv(cfd, buf.data(), buf.size(), 0);
      if (n <= 0) {
        // Forward what is left, then half-close toward the server.
        if (!held.empty()) write_all_fd(sfd, held.data(), held.size());
        if (!pending.empty()) write_all_fd(sfd, pending.data(), pending.size());
        client_open = false;
        ::shutdown(sfd, SHUT_WR);
      } else {
        if (spec_.capture_c2s) {
          std::lock_guard<std::mutex> lock(captured_mu_);
          captured_.insert(captured_.end(), buf.data(), buf.data() + n);
        }
        pending.insert(pending.end(), buf.data(), buf.data() + n);
        if (!process()) break;
      }
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::recv(sfd, buf.data(), buf.size(), 0);
      if (n > 0 && spec_.flip_s2c_at > s2c_bytes && spec_.flip_s2c_at <= s2c_bytes + uint64_t(n)) {
        buf[size_t(spec_.flip_s2c_at - s2c_bytes - 1)] ^= 0x01;
        applied_ = true;
      }
      if (n <= 0) {
        server_open = false;
      } else if (spec_.cut_s2c_after && s2c_bytes + uint64_t(n) >= spec_.cut_s2c_after) {
        write_all_fd(cfd, buf.data(), size_t(spec_.cut_s2c_after - s2c_bytes));
        s2c_bytes = spec_.cut_s2c_after;
        applied_ = true;
        break;
      } else if (!write_all_fd(cfd, buf.data(), size_t(n))) {
        break;
      } else {
        s2c_bytes += uint64_t(n);
        s2c_total_ = s2c_bytes;
      }
    }
  }
  // After the client half-closed, let the server finish talking (its last result) briefly.
  if (!client_open && server_open && !stop_) {
    auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!stop_ && Clock::now() < deadline) {
      pollfd p{sfd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::recv(sfd, buf.data(), buf.size(), 0);
      if (n <= 0 || !write_all_fd(cfd, buf.data(), size_t(n))) break;
    }
  }
  ::shutdown(cfd, SHUT_RDWR);
  ::shutdown(sfd, SHUT_RDWR);
  ::close(cfd);
  ::close(sfd);
  done_ = true;
}

void make_old(const fs::path& p, long days) {
  timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = std::time(nullptr) - days * 86400 - 60;
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  if (::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0)
    throw std::runtime_error("make_old: cannot set the times of " + p.string());
}

std::string tool_hex(const std::string& tool, const fs::path& file) {
  ProcResult r = run_process({"/usr/bin/" + tool, file.string()}, {}, 60);
  if (r.exit_code != 0) return "(" + tool + " failed: " + r.describe() + ")";
  return r.out.substr(0, r.out.find(' '));
}

std::vector<std::string> chart_encoding_problems(const std::vector<std::string>& docs) {
  std::vector<std::string> problems;
  std::map<std::string, std::string> colour_of;  // family -> colour
  std::map<std::string, std::string> family_of;  // colour -> family
  const std::regex tag("<(rect|polyline|line)\\b([^>]*)data-family=\"([^\"]*)\"([^>]*)>(<title>([^<]*))?");
  auto attr = [](const std::string& t, const std::string& name) {
    const std::regex a("\\b" + name + "=\"([^\"]*)\"");
    std::smatch m;
    return std::regex_search(t, m, a) ? m[1].str() : std::string();
  };
  for (size_t d = 0; d < docs.size(); ++d)
    for (auto it = std::sregex_iterator(docs[d].begin(), docs[d].end(), tag); it != std::sregex_iterator();
         ++it) {
      const std::string kind = (*it)[1], family = (*it)[3], title = (*it)[6];
      const std::string attrs = (*it)[2].str() + " " + (*it)[4].str();
      const bool portable = attr(attrs, "data-portable") == "1";
      const std::string where = "chart " + std::to_string(d) + " " + kind + " '" + family + "' " + title;
      const std::string colour = kind == "rect" ? attr(attrs, "fill") : attr(attrs, "stroke");
      if (!attr(attrs, "stroke-dasharray").empty() && !portable)
        problems.push_back(where + ": dashed, not portable");
      if (portable && !family.empty() && family.rfind("aes", 0) != 0)
        problems.push_back(where + ": portable, not AES");
      if (!portable && title.find("(no AES-NI)") != std::string::npos)
        problems.push_back(where + ": titled (no AES-NI) but not dashed");
      if (family.empty()) continue;  // the legend's generic "dashed: portable code" swatch
      auto [c, fresh] = colour_of.emplace(family, colour);
      if (!fresh && c->second != colour)
        problems.push_back(where + ": colour " + colour + ", elsewhere " + c->second);
      auto [f, fresh2] = family_of.emplace(colour, family);
      if (!fresh2 && f->second != family)
        problems.push_back(where + ": colour " + colour + " is also " + f->second + "'s");
    }
  if (colour_of.empty()) problems.push_back("no element carries data-family");
  return problems;
}

BusyCore::BusyCore() {
  cpu_set_t old;
  CPU_ZERO(&old);
  ::sched_getaffinity(0, sizeof old, &old);
  old_set_.assign(reinterpret_cast<unsigned char*>(&old),
                  reinterpret_cast<unsigned char*>(&old) + sizeof old);
  cpu_ = std::max(0, ::sched_getcpu());
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu_, &one);
  if (::sched_setaffinity(0, sizeof one, &one) != 0) throw std::runtime_error("sched_setaffinity failed");
  spinner_ = std::thread([this, one] {
    ::sched_setaffinity(0, sizeof one, &one);
    volatile uint64_t n = 0;
    while (!stop_.load(std::memory_order_relaxed)) n = n + 1;
  });
}

BusyCore::~BusyCore() {
  stop_ = true;
  spinner_.join();
  cpu_set_t old;
  std::memcpy(&old, old_set_.data(), sizeof old);
  ::sched_setaffinity(0, sizeof old, &old);
}

}  // namespace aesxfer::test
