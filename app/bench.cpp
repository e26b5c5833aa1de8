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
// (this process's client asks for the portable dispatch table, ClientOptions::impl, and a second
// local server child is started with --no-aesni; a remote server keeps whatever it runs). The speed-up is
// median(on) / median(off). Runs are interleaved (repeat 1 of every row, then repeat 2, ...) so that drift in
// the machine's state spreads over all rows instead of biasing one.
//
// --vs-scp: after each cipher's aesxfer row(s) an scp row (`scp -c` with OpenSSH's cipher and MAC
// of the same construction, app/bench_scp.h), or a row saying why OpenSSH has none; scp's defaults
// as the last row. scp rows run in the same interleaved loop. How their figures are taken is at the
// top of app/bench_scp.cpp; they go through the same verdict. vs_scp = median(aesxfer) /
// median(scp) for the same cipher, on rows with AES-NI on only (OpenSSH runs OpenSSL's code).
#include "app/bench.h"

#include <fcntl.h>
#include <signal.h>
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

#include "app/bench_proc.h"
#include "app/bench_scp.h"
#include "app/json.h"
#include "app/svg.h"
#include "client/client.h"
#include "crypto/aes.h"
#include "crypto/cpu.h"
#include "crypto/suite.h"
#include "net/keystore.h"
#include "proto/handshake.h"

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
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
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
// leaves no 1 GiB file in /dev/shm behind. Children (local servers, the throwaway sshd, a running
// scp) are sent SIGTERM: the transfer in progress then fails, the stack unwinds through the
// destructors (temporary directory removed) and run_bench returns 130. Against a remote HOST with
// no child the process dies of the signal. Only async-signal-safe calls in the handler; the state
// is plain static storage.
char g_data_path[4096];
enum ChildSlot { kServerHw, kServerSw, kSshd, kScp, kChildSlots };
volatile pid_t g_child_pids[kChildSlots] = {-1, -1, -1, -1};
volatile sig_atomic_t g_interrupted = 0;

extern "C" void bench_on_signal(int sig) {
  if (g_data_path[0]) ::unlink(g_data_path);
  bool any = false;
  for (int i = 0; i < kChildSlots; ++i)
    if (g_child_pids[i] > 0) {
      ::kill(g_child_pids[i], SIGTERM);
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
    for (int i = 0; i < kChildSlots; ++i) g_child_pids[i] = -1;
    g_interrupted = 0;
  }
  SignalCleanup(const SignalCleanup&) = delete;
  SignalCleanup& operator=(const SignalCleanup&) = delete;

 private:
  struct sigaction old_int_ {
  }, old_term_{};
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
    std::vector<std::string> args = {exe,  "serve",     "--listen",    "127.0.0.1",   "-P",
                                     "0",  "--root",    root.string(), "--port-file", port_file.string(),
                                     "-q", "--timeout", "120"};
    if (no_aesni) args.push_back("--no-aesni");
    proc::SpawnOptions so;
    so.argv = args;
    for (char** e = environ; e && *e; ++e) {
      std::string_view v(*e);
      if (v.starts_with("AESXFER_HOME=") || v.starts_with("AESXFER_NO_AESNI=")) continue;
      so.env.emplace_back(v);
    }
    so.env.push_back("AESXFER_HOME=" + home.string());
    so.log = log_.string();
    pid_ = proc::spawn(so);
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
  double cpu_seconds() const { return pid_ > 0 ? proc::cpu_seconds_of(pid_) : -1; }
  double wait_seconds() const { return pid_ > 0 ? proc::run_delay_seconds(pid_) : -1; }
  std::string log_tail() const { return proc::log_tail(log_); }

  // SIGTERM, SIGKILL after 5 s; returns the exit status (128 + signal when killed), -1 if not running.
  int stop() noexcept {
    const int st = proc::stop(pid_);
    pid_ = -1;
    return st;
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  fs::path log_;
};

enum class Tool { aesxfer, scp };

struct Row {
  Tool tool = Tool::aesxfer;
  // aesxfer rows: the cipher sent; scp rows: the aesxfer cipher the row is compared with
  // (nullptr: scp's defaults, the extra row).
  const cr::CipherDesc* cipher = nullptr;
  const cr::MacDesc* mac = nullptr;
  bool no_aesni = false;
  uint64_t record_size = 0;    // aesxfer rows: what the client asks for (0: its default) ...
  uint64_t record_agreed = 0;  // ... and what the server agreed
  std::string impl;
  // scp rows: what -c and -o MACs= ask for (empty: defaults), and what ssh said it negotiated
  // (the asked-for names until a run has said).
  std::string want_cipher, want_mac, ssh_cipher, ssh_mac;
  std::string not_offered;    // scp rows that have no figures: why
  std::string history;        // scp rows: when OpenSSH dropped the cipher, if it did
  std::vector<double> setup;  // scp rows: connection set-up of each run, seconds
  bool metered = true;        // scp rows: every run's rate came from scp's progress meter
  std::vector<double> mbps;
  double wall = 0, client_cpu = 0, server_cpu = 0, client_wait = 0, server_wait = 0;
  bool server_known = true;
  // Results.
  double median = 0, min = 0, max = 0, client_pct = 0, server_pct = -1, speedup = 0, vs_scp = 0;
  double client_wait_pct = 0, server_wait_pct = -1, cpu_per_gb = -1;
  std::string verdict;

  bool scp() const { return tool == Tool::scp; }
  bool measured() const { return not_offered.empty(); }
  std::string name() const { return cipher ? cipher->name : "default"; }
  const char* tool_name() const { return scp() ? "scp" : "aesxfer"; }
  std::string mac_name() const {
    if (scp()) return !ssh_mac.empty() ? ssh_mac : (!want_cipher.empty() && cipher->aead ? "aead" : "-");
    return cipher->aead ? "aead" : mac->name;
  }
  // How the verdict lines and the chart name the row.
  std::string label() const {
    if (!scp())
      return name() + (no_aesni ? " (no AES-NI)" : "") +
             (record_size ? " record " + svg::bytes_label(double(record_size)) : "");
    if (!cipher)
      return "default (scp, negotiated " + (ssh_cipher.empty() ? std::string("?") : ssh_cipher) + ")";
    if (ssh_cipher.empty()) return name() + " (scp)";
    return name() + " (scp -c " + ssh_cipher + (ssh_mac.empty() || ssh_mac == "aead" ? "" : " + " + ssh_mac) +
           ")";
  }
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string pct_text(double p) { return p < 0 ? "n/a" : fmt("%.0f%%", p); }

// "hmac-sha2-256-etm@openssh.com" -> "hmac-sha2-256-etm" (the table's column is narrow).
std::string short_ssh_name(std::string s) {
  const size_t at = s.find("@openssh.com");
  if (at != std::string::npos) s.erase(at);
  return s;
}

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  while (!l.empty() && (l.back() == '\r' || l.back() == ' ')) l.pop_back();
  return l;
}

// The names `ssh -Q what` lists.
std::vector<std::string> ssh_query(const std::string& ssh, const char* what) {
  std::string out;
  if (proc::run_capture({ssh, "-Q", what}, out) != 0) return {};
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string w; in >> w;) v.push_back(w);
  return v;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// --vs-scp: the programs, the OpenSSH version and what it offers.
struct ScpSetup {
  std::string scp, ssh, keygen, sshd;
  std::string version;        // `ssh -V`, first line
  std::string version_short;  // "OpenSSH_9.2p1"
  std::vector<std::string> opts;
  std::string target;  // HOST:/dev/null
  std::string where;   // for the table's header
};

// Finds what --vs-scp needs; "" or a one-line reason (naming the package to install).
std::string find_scp_setup(const BenchOptions& opt, ScpSetup& s) {
  s.scp = proc::find_program("scp");
  s.ssh = proc::find_program("ssh");
  if (s.scp.empty() || s.ssh.empty())
    return "--vs-scp needs scp and ssh, and they are not in $PATH: install the openssh-client package";
  if (opt.host.empty()) {
    s.keygen = proc::find_program("ssh-keygen");
    if (s.keygen.empty())
      return "--vs-scp needs ssh-keygen for its throwaway sshd: install the openssh-client package";
    s.sshd = opt.sshd.empty() ? proc::find_program("sshd", {"/usr/sbin", "/usr/local/sbin", "/sbin"})
                              : proc::find_program(opt.sshd);
    if (s.sshd.empty())
      return "--vs-scp without HOST starts a throwaway sshd on 127.0.0.1, and there is no sshd (" +
             (opt.sshd.empty() ? std::string("looked in /usr/sbin, /usr/local/sbin, /sbin and $PATH")
                               : "--sshd " + opt.sshd + " is not an executable file") +
             "): install the openssh-server package (apt-get install openssh-server), or name a HOST";
  }
  std::string out;
  proc::run_capture({s.ssh, "-V"}, out);
  s.version = first_line(out);
  s.version_short = s.version.substr(0, s.version.find_first_of(", "));
  if (s.version_short.empty()) s.version_short = "this OpenSSH";
  for (const auto& o : opt.ssh_opts) {
    std::istringstream in(o);
    for (std::string w; in >> w;) s.opts.push_back(w);
  }
  const std::string host = opt.host.empty() ? "127.0.0.1" : opt.host;
  s.target = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":/dev/null";
  return "";
}

struct RunSample {
  double mbps = 0, wall = 0, client_cpu = 0, client_wait = -1, server_cpu = -1, server_wait = -1;
};

void add_sample(Row& r, const RunSample& s) {
  r.mbps.push_back(s.mbps);
  r.wall += s.wall;
  r.client_cpu += s.client_cpu;
  if (s.client_wait > 0) r.client_wait += s.client_wait;
  if (s.server_cpu >= 0) {
    r.server_cpu += s.server_cpu;
    if (s.server_wait > 0) r.server_wait += s.server_wait;
  } else {
    r.server_known = false;
  }
}

void compute_figures(std::vector<Row>& rows, uint64_t size) {
  for (auto& r : rows) {
    if (!r.measured()) {
      r.server_known = false;
      r.server_pct = r.server_wait_pct = -1;
      r.client_pct = r.client_wait_pct = -1;
      r.verdict = "not offered: " + r.not_offered;
      continue;
    }
    r.median = median_of(r.mbps);
    r.min = *std::min_element(r.mbps.begin(), r.mbps.end());
    r.max = *std::max_element(r.mbps.begin(), r.mbps.end());
    r.client_pct = r.wall > 0 ? 100 * r.client_cpu / r.wall : 0;
    r.server_pct = r.server_known && r.wall > 0 ? 100 * r.server_cpu / r.wall : -1;
    r.client_wait_pct = r.wall > 0 ? 100 * r.client_wait / r.wall : 0;
    r.server_wait_pct = r.server_pct < 0 ? -1 : (r.wall > 0 ? 100 * r.server_wait / r.wall : 0);
    if (r.server_known)
      r.cpu_per_gb = (r.client_cpu + r.server_cpu) / (double(size) * double(r.mbps.size()) / 1e9);
    r.verdict = bench_verdict(BenchLoad{r.client_pct, r.client_wait_pct, r.server_pct, r.server_wait_pct});
  }
  for (size_t i = 0; i + 1 < rows.size(); ++i)
    if (!rows[i].scp() && !rows[i + 1].scp() && rows[i].cipher == rows[i + 1].cipher && !rows[i].no_aesni &&
        rows[i + 1].no_aesni && rows[i].record_size == rows[i + 1].record_size && rows[i + 1].median > 0)
      rows[i].speedup = rows[i].median / rows[i + 1].median;
  // aesxfer against scp with the same cipher; OpenSSH uses its own (OpenSSL's) code, AES-NI
  // included, so only the rows that use the hardware code too are compared.
  for (auto& a : rows) {
    if (a.scp() || a.no_aesni) continue;
    for (const auto& s : rows)
      if (s.scp() && s.cipher == a.cipher && s.measured() && s.median > 0 &&
          (a.record_size == 0 || a.record_size == proto::kDefaultPayload))
        a.vs_scp = a.median / s.median;
  }
}

std::string num_or(double v, const char* f, const char* none, bool have) { return have ? fmt(f, v) : none; }

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
  if (!opt.vs_scp && (!opt.ssh_opts.empty() || !opt.sshd.empty())) {
    err << "aesxfer bench: --ssh-opts and --sshd go with --vs-scp\n";
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
  ScpSetup ssh;
  if (opt.vs_scp) {
    if (const std::string why = find_scp_setup(opt, ssh); !why.empty()) {
      err << "aesxfer bench: " << why << "\n";
      return 1;
    }
  }
  const std::vector<std::string> ssh_ciphers =
      opt.vs_scp ? ssh_query(ssh.ssh, "cipher") : std::vector<std::string>{};
  const std::vector<std::string> ssh_macs =
      opt.vs_scp ? ssh_query(ssh.ssh, "mac") : std::vector<std::string>{};
  const bool pairs = opt.no_aesni_too && !global_no_aesni;
  if (opt.no_aesni_too && global_no_aesni && !opt.quiet)
    err << "aesxfer bench: note: --no-aesni is set, so --no-aesni-too adds nothing\n";
  std::vector<Row> rows;
  bool need_portable_server = false;
  for (uint64_t rs : opt.record_sizes)
    if (rs < proto::kMinRecordSize || rs > proto::kMaxRecordSize) {
      err << "aesxfer bench: --record-size " << rs << " is outside 4K..1M\n";
      return 2;
    }
  const std::vector<uint64_t> sizes = opt.record_sizes.empty() ? std::vector<uint64_t>{0} : opt.record_sizes;
  const bool sweep = !opt.record_sizes.empty();
  for (const auto* c : sel) {
    Row r;
    r.cipher = c;
    r.mac = c->aead ? no_mac : mac;
    for (uint64_t rs : sizes) {
      r.record_size = rs;
      r.no_aesni = global_no_aesni;
      rows.push_back(r);
      if (pairs && cr::has_portable_twin(*c)) {
        r.no_aesni = true;
        rows.push_back(r);
        need_portable_server = true;
      }
    }
    r.record_size = 0;
    if (!opt.vs_scp) continue;
    Row s;
    s.tool = Tool::scp;
    s.cipher = c;
    s.impl = "openssh";
    const ScpCipher* m = scp_cipher_for(c->name);
    if (m && m->ssh_cipher) {
      s.want_cipher = s.ssh_cipher = m->ssh_cipher;
      if (m->ssh_mac) s.want_mac = s.ssh_mac = m->ssh_mac;
    }
    const std::string history = m && m->history ? std::string(m->history) : "";
    s.history = history;
    if (!m || !m->ssh_cipher)
      s.not_offered = history.empty() ? "OpenSSH has no such cipher" : history;
    else if (!contains(ssh_ciphers, s.want_cipher))
      s.not_offered = (history.empty() ? "" : history + " (") + "not in `ssh -Q cipher` of " +
                      ssh.version_short + (history.empty() ? "" : ")");
    else if (!s.want_mac.empty() && !contains(ssh_macs, s.want_mac))
      s.not_offered = s.want_mac + " not in `ssh -Q mac` of " + ssh.version_short;
    rows.push_back(s);
  }
  if (opt.vs_scp) {  // scp's defaults: no -c, no MACs
    Row s;
    s.tool = Tool::scp;
    s.impl = "openssh";
    rows.push_back(s);
  }

  const bool local = opt.host.empty();
  const std::string date = utc_now("%Y-%m-%d %H:%M UTC");
  const std::string cpu = cr::cpu_model();
  try {
    SignalCleanup on_signal;
    std::unique_ptr<ScratchDir> scratch;
    std::unique_ptr<LocalServer> server_hw, server_sw;
    std::unique_ptr<ThrowawaySshd> sshd;
    fs::path home = net::aesxfer_home();
    if (local) {
      scratch = std::make_unique<ScratchDir>();
      home = scratch->path() / "home";
      fs::create_directories(home);
      fs::permissions(home, fs::perms::owner_all, fs::perm_options::replace);
      // The client's identity exists before the server starts, which accepts it by default.
      net::load_or_create_identity(home / "id_ed25519");
      fs::create_directories(scratch->path() / "hw");
      server_hw =
          std::make_unique<LocalServer>(opt.server_binary, scratch->path() / "hw", home, global_no_aesni);
      g_child_pids[kServerHw] = server_hw->pid();
      if (need_portable_server) {
        fs::create_directories(scratch->path() / "sw");
        server_sw = std::make_unique<LocalServer>(opt.server_binary, scratch->path() / "sw", home, true);
        g_child_pids[kServerSw] = server_sw->pid();
      }
      if (opt.vs_scp) {
        sshd = std::make_unique<ThrowawaySshd>(scratch->path() / "ssh", ssh.sshd, ssh.keygen);
        g_child_pids[kSshd] = sshd->pid();
        ssh.opts.insert(ssh.opts.end(), {"-F", sshd->client_config().string()});
        ssh.where = "127.0.0.1:" + std::to_string(sshd->port()) + " (throwaway sshd, pid " +
                    std::to_string(sshd->pid()) + ")";
      }
    } else if (opt.vs_scp) {
      ssh.where = opt.host + " (your ssh setup" + (ssh.opts.empty() ? std::string() : ", --ssh-opts") + ")";
    }
    if (!opt.quiet)
      err << "aesxfer bench: writing " << human_bytes(opt.size) << " of test data...\n" << std::flush;
    DataFile data(opt.size);
    const std::string where =
        local ? "127.0.0.1 (local server child, pid " + std::to_string(server_hw->pid()) + ")"
              : opt.host + ":" + std::to_string(opt.port);

    for (int rep = 0; rep < opt.repeat; ++rep) {
      for (auto& r : rows) {
        if (g_interrupted) {
          err << "aesxfer bench: interrupted\n";
          return 130;
        }
        if (!r.measured()) continue;
        RunSample s;
        if (r.scp()) {
          ScpJob job;
          job.scp = ssh.scp;
          job.opts = ssh.opts;
          job.target = ssh.target;
          job.ssh_cipher = r.want_cipher;
          job.ssh_mac = r.want_mac;
          job.file = data.path();
          job.bytes = opt.size;
          job.server = sshd ? sshd->pid() : -1;
          job.timeout = opt.timeout;
          ScpRun run;
          try {
            run = run_scp(job, &g_child_pids[kScp]);
          } catch (const ScpNotOffered& e) {
            if (g_interrupted) continue;
            r.not_offered =
                "refused by " + (local ? std::string("the throwaway sshd") : opt.host) + ": " + e.what();
            r.mbps.clear();
            if (!opt.quiet) err << "  " << r.label() << ": " << r.not_offered << "\n";
            continue;
          } catch (const std::exception& e) {
            if (g_interrupted) continue;  // reported at the top of the loop
            err << "aesxfer bench: " << r.label() << ": " << e.what() << "\n";
            if (sshd) err << "aesxfer bench: sshd log: " << sshd->log_tail() << "\n";
            return 1;
          }
          if (!run.ssh_cipher.empty()) r.ssh_cipher = run.ssh_cipher;
          if (!run.ssh_mac.empty()) r.ssh_mac = run.ssh_mac;
          r.setup.push_back(run.setup_s);
          r.metered = r.metered && run.metered;
          s = RunSample{run.mb_s,        run.window,     run.client_cpu,
                        run.client_wait, run.server_cpu, run.server_wait};
        } else {
          const cr::Impl impl = r.no_aesni ? cr::Impl::portable : cr::Impl::best;
          r.impl = cr::cipher_impl_name(*r.cipher, cr::dispatch(impl));
          const LocalServer* srv =
              !local ? nullptr : (r.no_aesni && !global_no_aesni ? server_sw.get() : server_hw.get());
          net::ClientOptions co;
          co.host = local ? "127.0.0.1" : opt.host;
          co.port = local ? srv->port() : opt.port;
          co.cipher = r.cipher;
          co.mac = r.mac;
          co.impl = impl;
          co.home = home;
          co.timeout = std::chrono::milliseconds(int64_t(opt.timeout * 1000));
          if (r.record_size) co.record_size = uint32_t(r.record_size);
          net::FileResult fr;
          double cpu0 = 0, cpu1 = 0, s0 = -1, s1 = -1, w0 = 0, w1 = 0, sw0 = -1, sw1 = -1;
          Clock::time_point t0, t1;
          try {
            net::Client client(co);
            s0 = srv ? srv->cpu_seconds() : -1;
            sw0 = srv ? srv->wait_seconds() : -1;
            w0 = proc::run_delay_seconds(::getpid());
            cpu0 = cpu_seconds_self();
            t0 = Clock::now();
            fr = client.put(data.path(), "/dev/null", {}, {});
            t1 = Clock::now();
            cpu1 = cpu_seconds_self();
            w1 = proc::run_delay_seconds(::getpid());
            s1 = srv ? srv->cpu_seconds() : -1;
            sw1 = srv ? srv->wait_seconds() : -1;
            client.bye();
          } catch (const std::exception& e) {
            if (g_interrupted) {
              err << "aesxfer bench: interrupted\n";
              return 130;
            }
            err << "aesxfer bench: " << r.cipher->name << (r.no_aesni ? " (--no-aesni)" : "") << ": "
                << e.what() << "\n";
            if (srv) err << "aesxfer bench: server log: " << srv->log_tail() << "\n";
            return 1;
          }
          s.mbps = fr.seconds > 0 ? double(fr.bytes) / fr.seconds / 1e6 : 0;
          r.record_agreed = fr.record_size;
          s.wall = std::chrono::duration<double>(t1 - t0).count();
          s.client_cpu = cpu1 - cpu0;
          if (w0 >= 0 && w1 >= w0) s.client_wait = w1 - w0;
          if (s0 >= 0 && s1 >= 0) {
            s.server_cpu = s1 - s0;
            if (sw0 >= 0 && sw1 >= sw0) s.server_wait = sw1 - sw0;
          }
        }
        add_sample(r, s);
        if (!opt.quiet)
          err << "  run " << rep + 1 << "/" << opt.repeat << "  " << r.label() << "  " << fmt("%.1f", s.mbps)
              << " MB/s\n"
              << std::flush;
      }
    }
    // A server that does not exit 0 on SIGTERM (a crash, a sanitizer report) is worth a warning.
    for (auto* srv : {server_hw.get(), server_sw.get()}) {
      if (!srv) continue;
      const int st = srv->stop();
      if (st != 0)
        err << "aesxfer bench: warning: the local server exited with status " << st << ": " << srv->log_tail()
            << "\n";
    }
    const pid_t sshd_pid = sshd ? sshd->pid() : -1;
    if (sshd) sshd->stop();
    for (int i = 0; i < kChildSlots; ++i) g_child_pids[i] = -1;  // stopped: their PIDs may be reused

    compute_figures(rows, opt.size);
    std::vector<double> setups;
    bool all_metered = true;
    for (const Row& r : rows) {
      setups.insert(setups.end(), r.setup.begin(), r.setup.end());
      if (r.scp() && r.measured()) all_metered = all_metered && r.metered;
    }

    // Output.
    if (opt.json) {
      out << "{\"tool\":\"aesxfer bench\",\"date\":" << json_quote(date) << ",\"cpu\":" << json_quote(cpu)
          << ",\"host\":" << json_quote(local ? "127.0.0.1" : opt.host)
          << ",\"local_server\":" << (local ? "true" : "false") << ",\"bytes\":" << opt.size
          << ",\"repeat\":" << opt.repeat << ",\"busy_threshold_pct\":" << fmt("%g", kBenchBusyPct)
          << ",\"unit\":\"MB/s (10^6 bytes per second)\",\n  \"scp\":";
      if (opt.vs_scp)
        out << "{\"version\":" << json_quote(ssh.version) << ",\"target\":" << json_quote(ssh.target)
            << ",\"local_sshd\":" << (sshd ? "true" : "false")
            << ",\"sshd_pid\":" << (sshd_pid > 0 ? std::to_string(sshd_pid) : "null")
            << ",\"timed_by\":" << json_quote(all_metered ? "progress meter" : "whole scp run") << "}";
      else
        out << "null";
      out << ",\n  \"rows\":[";
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        const bool m = r.measured();
        out << (i ? ",\n    " : "\n    ") << "{\"tool\":\"" << r.tool_name()
            << "\",\"cipher\":" << json_quote(r.name());
        if (r.scp())
          out << ",\"ssh_cipher\":" << (r.ssh_cipher.empty() ? "null" : json_quote(r.ssh_cipher))
              << ",\"offered\":" << (m ? "true" : "false");
        out << ",\"mac\":" << json_quote(r.mac_name()) << ",\"impl\":" << json_quote(r.impl)
            << ",\"no_aesni\":" << (r.no_aesni ? "true" : "false")
            << ",\"mb_s_median\":" << num_or(r.median, "%.2f", "null", m)
            << ",\"mb_s_min\":" << num_or(r.min, "%.2f", "null", m)
            << ",\"mb_s_max\":" << num_or(r.max, "%.2f", "null", m) << ",\"mb_s_runs\":[";
        for (size_t k = 0; k < r.mbps.size(); ++k) out << (k ? "," : "") << fmt("%.2f", r.mbps[k]);
        out << "],\"client_cpu_pct\":" << num_or(r.client_pct, "%.1f", "null", m)
            << ",\"server_cpu_pct\":" << num_or(r.server_pct, "%.1f", "null", r.server_pct >= 0)
            << ",\"client_wait_pct\":" << num_or(r.client_wait_pct, "%.1f", "null", m)
            << ",\"server_wait_pct\":" << num_or(r.server_wait_pct, "%.1f", "null", r.server_wait_pct >= 0)
            << ",\"cpu_s_per_gb\":" << num_or(r.cpu_per_gb, "%.3f", "null", r.cpu_per_gb >= 0)
            << ",\"speedup\":" << num_or(r.speedup, "%.2f", "null", r.speedup > 0)
            << ",\"vs_scp\":" << num_or(r.vs_scp, "%.2f", "null", r.vs_scp > 0);
        out << ",\"record_size\":" << num_or(double(r.record_agreed), "%.0f", "null", !r.scp() && m);
        if (r.scp())
          out << ",\"setup_s_median\":" << num_or(median_of(r.setup), "%.3f", "null", m && r.metered)
              << ",\"metered\":" << (m && r.metered ? "true" : "false");
        out << ",\"verdict\":" << json_quote(r.verdict) << "}";
      }
      out << "\n  ]}\n";
    } else if (opt.csv) {
      out << kBenchCsvHeader << "\n";
      for (const Row& r : rows) {
        const bool m = r.measured();
        out << csv_field(r.name()) << "," << csv_field(r.mac_name()) << "," << csv_field(r.impl) << ","
            << (r.no_aesni ? "true" : "false") << "," << num_or(r.median, "%.2f", "n/a", m) << ","
            << num_or(r.min, "%.2f", "n/a", m) << "," << num_or(r.max, "%.2f", "n/a", m) << ","
            << num_or(r.client_pct, "%.1f", "n/a", m) << ","
            << num_or(r.server_pct, "%.1f", "n/a", r.server_pct >= 0) << "," << csv_field(r.verdict) << ","
            << r.tool_name() << "," << csv_field(r.ssh_cipher) << ","
            << num_or(r.vs_scp, "%.2f", "n/a", r.vs_scp > 0) << ","
            << num_or(double(r.record_agreed), "%.0f", "n/a", !r.scp() && m) << "\n";
      }
    } else {
      const bool vs = opt.vs_scp;
      out << "aesxfer bench: " << human_bytes(opt.size) << " x " << opt.repeat << " per cipher to " << where
          << ":/dev/null\n";
      if (vs) out << "scp:  " << ssh.version << ", to " << ssh.where << ":/dev/null\n";
      out << "CPU:  " << cpu << " (" << std::thread::hardware_concurrency() << " logical CPUs), " << date
          << "\n";
      out << "MB/s = 10^6 bytes/s (median, min, max of " << opt.repeat
          << " runs); CPU % of one core over the transfers\n";
      const int mw = vs ? 17 : 12;
      char line[320];
      std::snprintf(line, sizeof line, "%-13s %s%-*s %-9s %-6s %s%9s %9s %9s %7s %7s %8s%s\n", "cipher",
                    vs ? "tool    " : "", mw, "mac", "impl", "AES-NI", sweep ? " record " : "", "median",
                    "min", "max", "client", "server", "speed-up", vs ? "  vs scp" : "");
      out << line;
      for (const Row& r : rows) {
        const std::string tool = vs ? (r.scp() ? "scp     " : "aesxfer ") : "";
        const std::string speed = r.speedup > 0 ? fmt("x%.2f", r.speedup) : "";
        const std::string x = r.vs_scp > 0 ? fmt("x%.2f", r.vs_scp) : "";
        const std::string ratio = vs ? "  " + std::string(x.size() < 6 ? 6 - x.size() : 0, ' ') + x : "";
        std::string rec;
        if (sweep) {
          rec = r.scp() ? "-" : svg::bytes_label(double(r.record_agreed));
          rec = std::string(rec.size() < 7 ? 7 - rec.size() : 0, ' ') + rec + " ";
        }
        if (r.measured())
          std::snprintf(line, sizeof line, "%-13s %s%-*s %-9s %-6s %s%9.1f %9.1f %9.1f %7s %7s %8s%s\n",
                        r.name().c_str(), tool.c_str(), mw, short_ssh_name(r.mac_name()).c_str(),
                        r.impl.c_str(), r.scp() ? "-" : (r.no_aesni ? "off" : "on"), rec.c_str(), r.median,
                        r.min, r.max, pct_text(r.client_pct).c_str(), pct_text(r.server_pct).c_str(),
                        speed.c_str(), ratio.c_str());
        else
          std::snprintf(line, sizeof line, "%-13s %s%-*s %-9s %-6s %s\n", r.name().c_str(), tool.c_str(), mw,
                        short_ssh_name(r.mac_name()).c_str(), "-", "-",
                        ("   not offered: " + (r.history.empty() ? r.not_offered : r.history)).c_str());
        std::string l = line;
        while (l.size() > 1 && l[l.size() - 2] == ' ') l.erase(l.size() - 2, 1);  // no trailing blanks
        out << l;
      }
      out << "verdicts (a side is busy at " << fmt("%g", kBenchBusyPct)
          << "% of one core or more, counting CPU time + time waiting for a core):\n";
      for (const Row& r : rows) {
        if (!r.measured()) {
          out << "  " << r.label() << ": " << r.verdict << "\n";
          continue;
        }
        out << "  " << r.label() << ": limited by: " << r.verdict << " (client " << pct_text(r.client_pct)
            << " CPU + " << pct_text(r.client_wait_pct) << " wait, server " << pct_text(r.server_pct);
        if (r.server_pct >= 0) out << " CPU + " << pct_text(r.server_wait_pct) << " wait";
        out << ")\n";
      }
      if (vs) {
        if (all_metered)
          out << "scp: MB/s is the rate on scp's own progress meter, which leaves out the connection set-up "
                 "as "
                 "aesxfer's figure leaves out its handshake (set-up: median "
              << fmt("%.2f", median_of(setups))
              << " s per scp run); its CPU is scp + ssh, and sshd + sftp-server "
              << (local ? "for the server" : "not measured (remote)") << ".\n";
        else
          out << "scp: no progress meter (--ssh-opts -q?): MB/s is the file size over the whole scp run, "
                 "connection "
                 "set-up included.\n";
        if (global_no_aesni || pairs)
          out << "vs scp: only for rows with AES-NI on (OpenSSH uses OpenSSL's code, with AES-NI where the "
                 "CPU has "
                 "it).\n";
      }
    }
    out.flush();

    if (!opt.plot.empty() && sweep) {
      // The sweep: MB/s against record size, one line per cipher (and AES-NI setting).
      svg::LineChart c;
      c.title = "aesxfer bench: MB/s by record size, " + human_bytes(opt.size) + " to " +
                (local ? "localhost" : opt.host) + ":/dev/null, median of " + std::to_string(opt.repeat);
      c.subtitle = cpu + "  \u00b7  " + date;
      c.x_label = "record size (payload bytes per record)";
      c.y_label = "MB/s (10^6 bytes/s)";
      c.log2_x = true;
      for (const Row& r : rows) {
        if (r.scp() || !r.measured()) continue;
        const std::string name = r.name() + (r.no_aesni ? " (no AES-NI)" : "");
        auto it = std::find_if(c.series.begin(), c.series.end(),
                               [&](const svg::Series& s) { return s.label == name; });
        if (it == c.series.end()) {
          c.series.push_back({name, {}, r.name()});  // one colour per cipher, dashed without AES-NI
          it = c.series.end() - 1;
        }
        it->points.emplace_back(double(r.record_agreed), r.median);
      }
      std::string why;
      if (!svg::write_file(opt.plot, svg::line_chart(c), why)) {
        err << "aesxfer bench: --plot: " << why << "\n";
        return 1;
      }
    } else if (!opt.plot.empty()) {
      svg::BarChart c;
      c.title = "aesxfer bench: " + human_bytes(opt.size) + " to " + (local ? "localhost" : opt.host) +
                ":/dev/null, median of " + std::to_string(opt.repeat);
      c.subtitle = cpu + "  \u00b7  " + date;
      c.y_label = "MB/s (10^6 bytes/s)";
      c.x_label = "cipher (MAC: " + std::string(mac->name) + " for non-AEAD ciphers" +
                  (opt.vs_scp ? "; scp: hmac-sha2-256-etm" : "") + ")";
      c.whisker_legend = opt.repeat > 1 ? "min\u2013max of " + std::to_string(opt.repeat) + " runs" : "";
      for (const Row& r : rows) {
        svg::Bar b;
        b.label = r.scp() && !r.cipher ? "scp defaults" : r.name();
        // The colour says what did the work: AES in hardware, portable code (AES with
        // --no-aesni, and Blowfish and RC4, which have no hardware), no cipher at all, or scp.
        if (r.scp())
          b.series = "scp (" + ssh.version_short + ")";
        else if (r.cipher->mode == cr::CipherMode::none)
          b.series = "no cipher";
        else if (cr::has_portable_twin(*r.cipher) && !r.no_aesni)
          b.series = "AES in hardware (AES-NI, VAES)";
        else
          b.series = "portable code";
        b.contended = r.measured() && (r.verdict.find("contention") != std::string::npos ||
                                       r.verdict.find("contended") != std::string::npos);
        if (opt.vs_scp && !r.scp()) b.series = "aesxfer, " + b.series;
        b.value = r.median;
        if (opt.repeat > 1 && r.measured()) {
          b.lo = r.min;
          b.hi = r.max;
        }
        b.note = r.scp() ? (r.cipher ? "" : short_ssh_name(r.ssh_cipher)) : r.impl;
        if (!r.measured()) b.absent = "scp: not offered" + (r.history.empty() ? "" : " (" + r.history + ")");
        if (r.speedup > 0) b.group_note = fmt("AES-NI: x%.1f", r.speedup);
        for (const Row& a : rows)  // the scp bar carries its pair's ratio
          if (r.scp() && r.cipher && !a.scp() && a.cipher == r.cipher && a.vs_scp > 0)
            b.group_note = fmt("aesxfer/scp: x%.2f", a.vs_scp);
        c.bars.push_back(std::move(b));
      }
      std::string why;
      if (!svg::write_file(opt.plot, svg::bar_chart(c), why)) {
        err << "aesxfer bench: --plot: " << why << "\n";
        return 1;
      }
    }
  } catch (const std::exception& e) {
    err << "aesxfer bench: " << (g_interrupted ? std::string("interrupted") : e.what()) << "\n";
    return g_interrupted ? 130 : 1;
  }
  return 0;
}

}  // namespace aesxfer::app
