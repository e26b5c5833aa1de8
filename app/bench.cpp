// `aesxfer bench`, the cipher lab.
//
// What is measured, per cipher and repeat: one connection (net::Client, handshake not timed), one
// put of a temporary file of --size bytes (pseudo-random, written once to /dev/shm when it has
// room, else the temp directory) to HOST:/dev/null, then bye. So every run takes the real path of
// `aesxfer send FILE HOST:/dev/null`: read(2) from the page cache, encrypt + MAC, TCP, decrypt +
// verify, whole-file SHA-256 on both sides, discard.
//
//   MB/s        payload bytes / FileResult::seconds (the client's transfer time, first byte to the
//               receiver's verified result), 1 MB = 10^6 bytes; median, min and max over --repeat.
//   client CPU  getrusage(RUSAGE_SELF) user+system time of this process across the put, divided by
//               the wall time of the put: 100% = one core busy the whole time. The client is single
//               threaded, so this is the sender's CPU.
//   server CPU  utime+stime of the server child (/proc/PID/stat, all its threads, clock ticks,
//               10 ms resolution) across the same window, divided by the same wall time. Only for
//               the local server; for a remote HOST it is n/a.
//   wait        time each side was runnable but waiting for a core (run_delay, the second field
//               of /proc/PID/task/*/schedstat, summed over threads), divided by the same wall
//               time. Non-zero when other processes compete for the CPUs; reported so that a
//               CPU-bound side on a busy machine is not mistaken for an idle one.
//   All figures are summed over the repeats and divided by the summed wall time.
//
// Verdict. A side's demand = CPU % + wait %; it is "busy" at kBenchBusyPct = 85% of one core or
// more (a single TCP stream is processed by one thread per side, so a busy side could not go
// faster, with more CPU it would):
//   client busy, server busy       sender and receiver CPU
//   client busy                    sender cipher CPU
//   server busy                    receiver CPU
//   neither, waits summed >= 30%   CPU contention (other processes)  (each side kept waiting for
//                                  the other, which waited for a core: the machine is shared)
//   neither                        network   (socket copies, TCP, the link: nobody is CPU-bound)
//   remote HOST, client not busy   network or receiver (server CPU not measured)
// When a busy side spent kBenchContendedPct = 15% or more waiting for a core, the verdict adds
// " (CPU contended)": that side was CPU-bound but did not get a whole core.
//
// --no-aesni-too: every AES cipher runs twice, with the hardware code and with the portable code
// (crypto::set_no_aesni(true) in this process, and a second local server child started with
// --no-aesni; a remote server keeps whatever it runs). The speed-up is median(on) / median(off).
// Runs are interleaved (repeat 1 of every row, then repeat 2, ...) so that drift in the machine's
// state spreads over all rows instead of biasing one.
#include "app/bench.h"
#include "app/json.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app/svg.h"
#include "client/client.h"
#include "net/keystore.h"
#include "crypto/aes.h"
#include "crypto/cpu.h"
#include "crypto/suite.h"

extern char** environ;

namespace aesxfer::app {
namespace {

namespace fs = std::filesystem;
namespace cr = aesxfer::crypto;
using Clock = std::chrono::steady_clock;

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}


std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

double cpu_seconds_self() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// utime + stime of a process (all threads) in seconds, from /proc/PID/stat; -1 if unreadable.
double cpu_seconds_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return -1;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(line.substr(close + 1));
  std::vector<std::string> fields;  // fields[0] is field 3 (state)
  for (std::string w; in >> w;) fields.push_back(w);
  if (fields.size() < 13) return -1;
  const double ticks = double(::sysconf(_SC_CLK_TCK));
  return (std::strtod(fields[11].c_str(), nullptr) + std::strtod(fields[12].c_str(), nullptr)) / ticks;
}

// Seconds the threads of `pid` spent runnable but not running (schedstat run_delay); -1 if unknown.
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

std::string utc_now(const char* format) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[64];
  std::strftime(b, sizeof b, format, &tm);
  return b;
}

std::string human_bytes(uint64_t n) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(n);
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    ++i;
  }
  return fmt(v == std::floor(v) ? "%.0f" : "%.2f", v) + " " + u[i];
}

// SIGINT/SIGTERM while a bench runs: remove the (large) data file at once, so an interrupted run
// leaves no 1 GiB file in /dev/shm behind. With local server children they are sent SIGTERM: the
// transfer in progress then fails, the stack unwinds through the destructors (temporary
// directory removed) and run_bench returns 130. Against a remote HOST the process dies of the
// signal. Only async-signal-safe calls in the handler; the state is plain static storage.
char g_data_path[4096];
volatile pid_t g_server_pids[2] = {-1, -1};
volatile sig_atomic_t g_interrupted = 0;

extern "C" void bench_on_signal(int sig) {
  if (g_data_path[0]) ::unlink(g_data_path);
  bool any = false;
  for (int i = 0; i < 2; ++i)
    if (g_server_pids[i] > 0) {
      ::kill(g_server_pids[i], SIGTERM);
      any = true;
    }
  g_interrupted = 1;
  if (!any) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

class SignalCleanup {
 public:
  SignalCleanup() {
    struct sigaction sa {};
    sa.sa_handler = bench_on_signal;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalCleanup() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    g_data_path[0] = 0;
    g_server_pids[0] = -1;
    g_server_pids[1] = -1;
    g_interrupted = 0;
  }
  SignalCleanup(const SignalCleanup&) = delete;
  SignalCleanup& operator=(const SignalCleanup&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// A directory under the temp directory, removed with everything in it on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string t = (fs::temp_directory_path() / "aesxfer-bench-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
    path_ = t;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The data file: --size bytes of xorshift output, in /dev/shm when it has room for it with a
// margin, else in the temp directory. Removed on destruction.
class DataFile {
 public:
  explicit DataFile(uint64_t size) {
    fs::path dir = fs::temp_directory_path();
    struct statvfs sv {};
    if (::statvfs("/dev/shm", &sv) == 0 && uint64_t(sv.f_bavail) * sv.f_frsize > size + (uint64_t(256) << 20))
      dir = "/dev/shm";
    std::string t = (dir / "aesxfer-bench-data-XXXXXX").string();
    int fd = ::mkstemp(t.data());
    if (fd < 0) throw std::runtime_error(t + ": " + std::strerror(errno));
    path_ = t;
    if (t.size() < sizeof g_data_path) std::memcpy(g_data_path, t.c_str(), t.size() + 1);
    std::vector<uint64_t> buf(size_t(1) << 17);  // 1 MiB
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t left = size; left > 0;) {
      if (g_interrupted) {
        ::close(fd);
        throw std::runtime_error("interrupted");
      }
      for (auto& w : buf) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w = x;
      }
      const size_t n = size_t(std::min<uint64_t>(left, buf.size() * 8));
      const auto* p = reinterpret_cast<const char*>(buf.data());
      for (size_t off = 0; off < n;) {
        const ssize_t w = ::write(fd, p + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          const int e = errno;
          ::close(fd);
          ::unlink(path_.c_str());
          throw std::runtime_error(path_.string() + ": " + std::strerror(e));
        }
        off += size_t(w);
      }
      left -= n;
    }
    ::close(fd);
  }
  ~DataFile() { ::unlink(path_.c_str()); }
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// `aesxfer serve` as a child process on 127.0.0.1, port 0, its own root and $AESXFER_HOME.
// Stopped by its PID: SIGTERM, then SIGKILL after 5 s. The child also gets SIGTERM if we die.
class LocalServer {
 public:
  LocalServer(const std::string& exe, const fs::path& dir, const fs::path& home, bool no_aesni) {
    const fs::path root = dir / "root";
    fs::create_directories(root);
    const fs::path port_file = dir / "port";
    log_ = dir / "server.log";
    std::vector<std::string> args = {exe, "serve", "--listen", "127.0.0.1", "-p", "0", "--root", root.string(),
                                     "--port-file", port_file.string(), "-q", "--timeout", "120"};
    if (no_aesni) args.push_back("--no-aesni");
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) {
      std::string_view v(*e);
      if (v.starts_with("AESXFER_HOME=") || v.starts_with("AESXFER_NO_AESNI=")) continue;
      env.emplace_back(v);
    }
    env.push_back("AESXFER_HOME=" + home.string());
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string log = log_.string();
    const pid_t parent = ::getpid();

    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(127);
      int in = ::open("/dev/null", O_RDONLY);
      int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (in < 0 || out < 0) ::_exit(127);
      ::dup2(in, 0);
      ::dup2(out, 1);
      ::dup2(out, 2);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      std::ifstream f(port_file);
      unsigned p = 0;
      if (f >> p && p > 0 && p < 65536) {
        port_ = uint16_t(p);
        break;
      }
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("the local server exited at start-up: " + log_tail());
      }
      if (Clock::now() > deadline) {
        stop();
        throw std::runtime_error("the local server did not start within 10 s: " + log_tail());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~LocalServer() { stop(); }
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  double cpu_seconds() const { return pid_ > 0 ? cpu_seconds_of(pid_) : -1; }
  double wait_seconds() const { return pid_ > 0 ? run_delay_seconds(pid_) : -1; }
  std::string log_tail() const {
    std::ifstream f(log_);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (s.size() > 400) s = "..." + s.substr(s.size() - 400);
    return s.empty() ? "(no log)" : s;
  }

  // SIGTERM, SIGKILL after 5 s; returns the exit status (128 + signal when killed), -1 if not running.
  int stop() noexcept {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    int st = 0;
    while (::waitpid(pid_, &st, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  fs::path log_;
};

struct Row {
  const cr::CipherDesc* cipher = nullptr;
  const cr::MacDesc* mac = nullptr;
  bool no_aesni = false;
  std::string impl;
  std::vector<double> mbps;
  double wall = 0, client_cpu = 0, server_cpu = 0, client_wait = 0, server_wait = 0;
  bool server_known = true;
  // Results.
  double median = 0, min = 0, max = 0, client_pct = 0, server_pct = -1, speedup = 0;
  double client_wait_pct = 0, server_wait_pct = -1;
  std::string verdict;

  std::string mac_name() const { return cipher->aead ? "aead" : mac->name; }
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string pct_text(double p) { return p < 0 ? "n/a" : fmt("%.0f%%", p); }

}  // namespace

std::string bench_verdict(const BenchLoad& l) {
  const bool known = l.server_cpu >= 0;
  const double sw = known ? std::max(0.0, l.server_wait) : 0;
  const bool c = l.client_cpu + l.client_wait >= kBenchBusyPct;
  const bool s = known && l.server_cpu + sw >= kBenchBusyPct;
  const bool contended = (c && l.client_wait >= kBenchContendedPct) || (s && sw >= kBenchContendedPct);
  const std::string suffix = contended ? " (CPU contended)" : "";
  if (c && s) return "sender and receiver CPU" + suffix;
  if (c) return "sender cipher CPU" + suffix;
  if (s) return "receiver CPU" + suffix;
  if (l.client_wait + sw >= 2 * kBenchContendedPct) return "CPU contention (other processes)";
  if (!known) return "network or receiver (server CPU not measured)";
  return "network";
}

bool parse_size(const std::string& text, uint64_t& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno != 0 || !(v > 0) || !std::isfinite(v)) return false;
  std::string unit(end);
  for (auto& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
  else if (unit.size() > 1 && unit.ends_with("B")) unit.pop_back();
  else if (unit == "B") unit.clear();
  double mult = 1;
  if (unit == "K") mult = 1024.0;
  else if (unit == "M") mult = 1024.0 * 1024;
  else if (unit == "G") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T") mult = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty()) return false;
  const double bytes = std::floor(v * mult);
  if (bytes < 1 || bytes > 1099511627776.0 * 16) return false;
  out = uint64_t(bytes);
  return true;
}

int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  if (opt.json && opt.csv) {
    err << "aesxfer bench: --json and --csv exclude each other\n";
    return 2;
  }
  if (opt.repeat < 1 || opt.repeat > 1000) {
    err << "aesxfer bench: --repeat must be in [1, 1000], got " << opt.repeat << "\n";
    return 2;
  }
  if (opt.size == 0) {
    err << "aesxfer bench: --size must be at least 1 byte\n";
    return 2;
  }
  const bool global_no_aesni = opt.no_aesni || cr::no_aesni();
  const cr::MacDesc* mac = cr::find_mac(opt.mac.empty() ? "hmac-sha256" : opt.mac);
  if (!mac) {
    err << "aesxfer bench: unknown MAC '" << opt.mac << "' (known: " << cr::mac_names() << ")\n";
    return 2;
  }
  const cr::MacDesc* no_mac = cr::find_mac("none");

  // Rows: the selected ciphers in table order of the selection; AES ones twice with --no-aesni-too.
  std::vector<const cr::CipherDesc*> sel;
  if (opt.ciphers.empty()) {
    for (const auto& c : cr::ciphers()) sel.push_back(&c);
  } else {
    for (const auto& name : opt.ciphers) {
      const auto* c = cr::find_cipher(name);
      if (!c) {
        err << "aesxfer bench: unknown cipher '" << name << "' (known: " << cr::cipher_names() << ")\n";
        return 2;
      }
      if (std::find(sel.begin(), sel.end(), c) == sel.end()) sel.push_back(c);
    }
  }
  const bool pairs = opt.no_aesni_too && !global_no_aesni;
  if (opt.no_aesni_too && global_no_aesni && !opt.quiet)
    err << "aesxfer bench: note: --no-aesni is set, so --no-aesni-too adds nothing\n";
  std::vector<Row> rows;
  bool need_portable_server = false;
  for (const auto* c : sel) {
    Row r;
    r.cipher = c;
    r.mac = c->aead ? no_mac : mac;
    r.no_aesni = global_no_aesni;
    rows.push_back(r);
    if (pairs && c->alg == cr::CipherAlg::aes128) {
      r.no_aesni = true;
      rows.push_back(r);
      need_portable_server = true;
    }
  }

  const bool local = opt.host.empty();
  const std::string date = utc_now("%Y-%m-%d %H:%M UTC");
  const std::string cpu = cr::cpu_model();
  try {
    SignalCleanup on_signal;
    std::unique_ptr<ScratchDir> scratch;
    std::unique_ptr<LocalServer> server_hw, server_sw;
    fs::path home = net::aesxfer_home();
    if (local) {
      scratch = std::make_unique<ScratchDir>();
      home = scratch->path() / "home";
      fs::create_directories(home);
      fs::permissions(home, fs::perms::owner_all, fs::perm_options::replace);
      // The client's identity exists before the server starts, which accepts it by default.
      net::load_or_create_identity(home / "id_ed25519");
      fs::create_directories(scratch->path() / "hw");
      server_hw = std::make_unique<LocalServer>(opt.server_binary, scratch->path() / "hw", home, global_no_aesni);
      g_server_pids[0] = server_hw->pid();
      if (need_portable_server) {
        fs::create_directories(scratch->path() / "sw");
        server_sw = std::make_unique<LocalServer>(opt.server_binary, scratch->path() / "sw", home, true);
        g_server_pids[1] = server_sw->pid();
      }
    }
    if (!opt.quiet)
      err << "aesxfer bench: writing " << human_bytes(opt.size) << " of test data...\n" << std::flush;
    DataFile data(opt.size);
    const std::string where = local ? "127.0.0.1 (local server child, pid " + std::to_string(server_hw->pid()) + ")"
                                    : opt.host + ":" + std::to_string(opt.port);

    for (int rep = 0; rep < opt.repeat; ++rep) {
      for (auto& r : rows) {
        if (g_interrupted) {
          cr::set_no_aesni(global_no_aesni);
          err << "aesxfer bench: interrupted\n";
          return 130;
        }
        cr::set_no_aesni(r.no_aesni);
        r.impl = cr::cipher_impl_name(*r.cipher);
        const LocalServer* srv = !local ? nullptr : (r.no_aesni && !global_no_aesni ? server_sw.get() : server_hw.get());
        net::ClientOptions co;
        co.host = local ? "127.0.0.1" : opt.host;
        co.port = local ? srv->port() : opt.port;
        co.cipher = r.cipher;
        co.mac = r.mac;
        co.home = home;
        co.timeout = std::chrono::milliseconds(int64_t(opt.timeout * 1000));
        net::FileResult fr;
        double cpu0 = 0, cpu1 = 0, s0 = -1, s1 = -1, w0 = 0, w1 = 0, sw0 = -1, sw1 = -1;
        Clock::time_point t0, t1;
        try {
          net::Client client(co);
          s0 = srv ? srv->cpu_seconds() : -1;
          sw0 = srv ? srv->wait_seconds() : -1;
          w0 = run_delay_seconds(::getpid());
          cpu0 = cpu_seconds_self();
          t0 = Clock::now();
          fr = client.put(data.path(), "/dev/null", {}, {});
          t1 = Clock::now();
          cpu1 = cpu_seconds_self();
          w1 = run_delay_seconds(::getpid());
          s1 = srv ? srv->cpu_seconds() : -1;
          sw1 = srv ? srv->wait_seconds() : -1;
          client.bye();
        } catch (const std::exception& e) {
          cr::set_no_aesni(global_no_aesni);
          if (g_interrupted) {
            err << "aesxfer bench: interrupted\n";
            return 130;
          }
          err << "aesxfer bench: " << r.cipher->name << (r.no_aesni ? " (--no-aesni)" : "") << ": " << e.what()
              << "\n";
          if (srv) err << "aesxfer bench: server log: " << srv->log_tail() << "\n";
          return 1;
        }
        const double wall = std::chrono::duration<double>(t1 - t0).count();
        const double mbps = fr.seconds > 0 ? double(fr.bytes) / fr.seconds / 1e6 : 0;
        r.mbps.push_back(mbps);
        r.wall += wall;
        r.client_cpu += cpu1 - cpu0;
        if (w0 >= 0 && w1 >= w0) r.client_wait += w1 - w0;
        if (s0 >= 0 && s1 >= 0) {
          r.server_cpu += s1 - s0;
          if (sw0 >= 0 && sw1 >= sw0) r.server_wait += sw1 - sw0;
        } else
          r.server_known = false;
        if (!opt.quiet)
          err << "  run " << rep + 1 << "/" << opt.repeat << "  " << r.cipher->name
              << (r.no_aesni ? " (no AES-NI)" : "") << "  " << fmt("%.1f", mbps) << " MB/s\n"
              << std::flush;
      }
    }
    cr::set_no_aesni(global_no_aesni);
    // A server that does not exit 0 on SIGTERM (a crash, a sanitizer report) is worth a warning.
    for (auto* srv : {server_hw.get(), server_sw.get()}) {
      if (!srv) continue;
      const int st = srv->stop();
      if (st != 0) err << "aesxfer bench: warning: the local server exited with status " << st << ": " << srv->log_tail() << "\n";
    }

    // Figures.
    for (auto& r : rows) {
      r.median = median_of(r.mbps);
      r.min = *std::min_element(r.mbps.begin(), r.mbps.end());
      r.max = *std::max_element(r.mbps.begin(), r.mbps.end());
      r.client_pct = r.wall > 0 ? 100 * r.client_cpu / r.wall : 0;
      r.server_pct = r.server_known && r.wall > 0 ? 100 * r.server_cpu / r.wall : -1;
      r.client_wait_pct = r.wall > 0 ? 100 * r.client_wait / r.wall : 0;
      r.server_wait_pct = r.server_pct < 0 ? -1 : (r.wall > 0 ? 100 * r.server_wait / r.wall : 0);
      r.verdict = bench_verdict(BenchLoad{r.client_pct, r.client_wait_pct, r.server_pct, r.server_wait_pct});
    }
    for (size_t i = 0; i + 1 < rows.size(); ++i)
      if (rows[i].cipher == rows[i + 1].cipher && !rows[i].no_aesni && rows[i + 1].no_aesni && rows[i + 1].median > 0)
        rows[i].speedup = rows[i].median / rows[i + 1].median;

    // Output.
    if (opt.json) {
      out << "{\"tool\":\"aesxfer bench\",\"date\":" << json_quote(date) << ",\"cpu\":" << json_quote(cpu)
          << ",\"host\":" << json_quote(local ? "127.0.0.1" : opt.host) << ",\"local_server\":" << (local ? "true" : "false")
          << ",\"bytes\":" << opt.size << ",\"repeat\":" << opt.repeat
          << ",\"busy_threshold_pct\":" << fmt("%g", kBenchBusyPct)
          << ",\"unit\":\"MB/s (10^6 bytes per second)\",\n  \"rows\":[";
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << (i ? ",\n    " : "\n    ") << "{\"cipher\":" << json_quote(r.cipher->name) << ",\"mac\":"
            << json_quote(r.mac_name()) << ",\"impl\":" << json_quote(r.impl)
            << ",\"no_aesni\":" << (r.no_aesni ? "true" : "false") << ",\"mb_s_median\":" << fmt("%.2f", r.median)
            << ",\"mb_s_min\":" << fmt("%.2f", r.min) << ",\"mb_s_max\":" << fmt("%.2f", r.max) << ",\"mb_s_runs\":[";
        for (size_t k = 0; k < r.mbps.size(); ++k) out << (k ? "," : "") << fmt("%.2f", r.mbps[k]);
        out << "],\"client_cpu_pct\":" << fmt("%.1f", r.client_pct)
            << ",\"server_cpu_pct\":" << (r.server_pct < 0 ? "null" : fmt("%.1f", r.server_pct))
            << ",\"client_wait_pct\":" << fmt("%.1f", r.client_wait_pct)
            << ",\"server_wait_pct\":" << (r.server_wait_pct < 0 ? "null" : fmt("%.1f", r.server_wait_pct))
            << ",\"speedup\":" << (r.speedup > 0 ? fmt("%.2f", r.speedup) : "null")
            << ",\"verdict\":" << json_quote(r.verdict) << "}";
      }
      out << "\n  ]}\n";
    } else if (opt.csv) {
      out << kBenchCsvHeader << "\n";
      for (const Row& r : rows)
        out << csv_field(r.cipher->name) << "," << csv_field(r.mac_name()) << "," << csv_field(r.impl) << ","
            << (r.no_aesni ? "true" : "false") << "," << fmt("%.2f", r.median) << "," << fmt("%.2f", r.min) << ","
            << fmt("%.2f", r.max) << "," << fmt("%.1f", r.client_pct) << ","
            << (r.server_pct < 0 ? "n/a" : fmt("%.1f", r.server_pct)) << "," << csv_field(r.verdict) << "\n";
    } else {
      out << "aesxfer bench: " << human_bytes(opt.size) << " x " << opt.repeat << " per cipher to " << where
          << ":/dev/null\n";
      out << "CPU:  " << cpu << " (" << std::thread::hardware_concurrency() << " logical CPUs), " << date << "\n";
      out << "MB/s = 10^6 bytes/s (median, min, max of " << opt.repeat
          << " runs); CPU % of one core over the transfers\n";
      char line[256];
      std::snprintf(line, sizeof line, "%-13s %-12s %-9s %-6s %9s %9s %9s %7s %7s %8s\n", "cipher", "mac", "impl",
                    "AES-NI", "median", "min", "max", "client", "server", "speed-up");
      out << line;
      for (const Row& r : rows) {
        std::snprintf(line, sizeof line, "%-13s %-12s %-9s %-6s %9.1f %9.1f %9.1f %7s %7s %8s\n", r.cipher->name,
                      r.mac_name().c_str(), r.impl.c_str(), r.no_aesni ? "off" : "on", r.median, r.min, r.max,
                      pct_text(r.client_pct).c_str(), pct_text(r.server_pct).c_str(),
                      r.speedup > 0 ? fmt("x%.2f", r.speedup).c_str() : "");
        out << line;
      }
      out << "verdicts (a side is busy at " << fmt("%g", kBenchBusyPct)
          << "% of one core or more, counting CPU time + time waiting for a core):\n";
      for (const Row& r : rows) {
        out << "  " << r.cipher->name << (r.no_aesni ? " (no AES-NI)" : "") << ": limited by: " << r.verdict
            << " (client " << pct_text(r.client_pct) << " CPU + " << pct_text(r.client_wait_pct) << " wait, server "
            << pct_text(r.server_pct);
        if (r.server_pct >= 0) out << " CPU + " << pct_text(r.server_wait_pct) << " wait";
        out << ")\n";
      }
    }
    out.flush();

    if (!opt.plot.empty()) {
      svg::BarChart c;
      c.title = "aesxfer bench: " + human_bytes(opt.size) + " to " + (local ? "localhost" : opt.host) +
                ":/dev/null, median of " + std::to_string(opt.repeat);
      c.subtitle = cpu + "  \u00b7  " + date;
      c.y_label = "MB/s (10^6 bytes/s)";
      c.x_label = "cipher (MAC: " + std::string(mac->name) + " for non-AEAD ciphers)";
      c.whisker_legend = opt.repeat > 1 ? "min\u2013max of " + std::to_string(opt.repeat) + " runs" : "";
      for (const Row& r : rows) {
        svg::Bar b;
        b.label = r.cipher->name;
        b.series = r.no_aesni ? "portable code (--no-aesni)" : "hardware crypto (AES-NI etc.)";
        b.value = r.median;
        if (opt.repeat > 1) {
          b.lo = r.min;
          b.hi = r.max;
        }
        b.note = r.impl;
        if (r.speedup > 0) b.group_note = fmt("AES-NI: x%.1f", r.speedup);
        c.bars.push_back(std::move(b));
      }
      std::string why;
      if (!svg::write_file(opt.plot, svg::bar_chart(c), why)) {
        err << "aesxfer bench: --plot: " << why << "\n";
        return 1;
      }
    }
  } catch (const std::exception& e) {
    cr::set_no_aesni(global_no_aesni);
    err << "aesxfer bench: " << (g_interrupted ? std::string("interrupted") : e.what()) << "\n";
    return g_interrupted ? 130 : 1;
  }
  return 0;
}

}  // namespace aesxfer::app
