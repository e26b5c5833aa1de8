// `aesxfer bench`, the cipher lab.
//
// What is measured, per cipher and repeat: one connection (client::Client, handshake not timed), one
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
// of the same construction, app/lab/bench_scp.h), or a row saying why OpenSSH has none; scp's defaults
// as the last row. scp rows run in the same interleaved loop. How their figures are taken is at the
// top of app/lab/bench_scp.cpp; they go through the same verdict. vs_scp = median(aesxfer) /
// median(scp) for the same cipher, on rows with AES-NI on only (OpenSSH runs OpenSSL's code).
#include "app/lab/bench.h"

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

#include "app/cli_checks.h"
#include "app/json.h"
#include "app/lab/bench_proc.h"
#include "app/lab/bench_scp.h"
#include "app/lab/svg.h"
#include "client/client.h"
#include "crypto/aes.h"
#include "crypto/cpu.h"
#include "crypto/gcm.h"
#include "crypto/suite.h"
#include "files/atomic_file.h"
#include "files/keystore.h"
#include "files/unique_fd.h"
#include "proto/failure.h"
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

// Every signal that ends a bench run from outside: ^C, kill, a closed terminal (SIGHUP) and a
// reader that went away (SIGPIPE: `aesxfer bench | head`). The last two killed the process before
// it removed its data file, up to 1 GiB of RAM in /dev/shm, and its scratch directory with the
// run's keys (a twenty-eighth re-attack, N5). The client's list (files::stop_signals), one list;
// a signal ignored when the bench starts (nohup) stays ignored, as in the client.
class SignalCleanup {
 public:
  SignalCleanup() {
    struct sigaction sa {};
    sa.sa_handler = bench_on_signal;
    ::sigemptyset(&sa.sa_mask);
    for (int sig : files::stop_signals()) files::take_signal(sig, sa, &old_[sig]);
  }
  ~SignalCleanup() {
    for (int sig : files::stop_signals()) ::sigaction(sig, &old_[sig], nullptr);
    g_data_path[0] = 0;
    for (int i = 0; i < kChildSlots; ++i) g_child_pids[i] = -1;
    g_interrupted = 0;
  }
  SignalCleanup(const SignalCleanup&) = delete;
  SignalCleanup& operator=(const SignalCleanup&) = delete;

 private:
  struct sigaction old_[NSIG] {};  // by signal number (SIGRTMAX < NSIG)
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
    const files::UniqueFd out(::mkstemp(t.data()));
    if (!out) throw std::runtime_error(t + ": " + std::strerror(errno));
    path_ = t;
    if (t.size() < sizeof g_data_path) std::memcpy(g_data_path, t.c_str(), t.size() + 1);
    std::vector<uint64_t> buf(size_t(1) << 17);  // 1 MiB
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (uint64_t left = size; left > 0;) {
      if (g_interrupted) {
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
        const ssize_t w = ::write(out.get(), p + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          const int e = errno;
          ::unlink(path_.c_str());
          throw std::runtime_error(path_.string() + ": " + std::strerror(e));
        }
        off += size_t(w);
      }
      left -= n;
    }
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
  std::vector<double> setup;  // connection set-up of each run, seconds (scp: start to meter)
  bool metered = true;  // scp rows: every run's rate came from scp's progress meter (and set-up was timed)
  std::vector<double> mbps;
  double wall = 0, client_cpu = 0, server_cpu = 0, client_wait = 0, server_wait = 0;
  bool server_known = true;
  // Results.
  double median = 0, min = 0, max = 0, client_pct = 0, server_pct = -1, speedup = 0, vs_scp = 0;
  double client_wait_pct = 0, server_wait_pct = -1, cpu_per_gb = -1;
  std::string verdict;
  bool contended = false;                         // the verdict says the CPU was contended: "*"
  double setup_median = -1, transfer_median = 0;  // seconds; setup < 0: not measured
  bool setup_dominates = false;                   // set-up took longer than the transfer: "+"
  // The marks after the row's figures.
  std::string marks() const { return std::string(contended ? "*" : "") + (setup_dominates ? "+" : ""); }

  bool scp() const { return tool == Tool::scp; }
  bool measured() const { return not_offered.empty(); }
  std::string name() const { return cipher ? cipher->name : "default"; }
  const char* tool_name() const { return scp() ? "scp" : "aesxfer"; }
  std::string mac_name() const {
    if (scp()) return !ssh_mac.empty() ? ssh_mac : (!want_cipher.empty() && cipher->aead ? "aead" : "-");
    return crypto::mac_label(cipher, mac);
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
                               : "--sshd " + proto::printable(opt.sshd) + " is not an executable file") +
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

// The median rate of a row's runs with their set-up counted (bytes over set-up + transfer), as scp
// without a progress meter is timed.
double whole_run_median(const Row& r, uint64_t size) {
  std::vector<double> v;
  for (size_t i = 0; i < r.mbps.size() && i < r.setup.size(); ++i)
    if (r.mbps[i] > 0) v.push_back(double(size) / (r.setup[i] + double(size) / (r.mbps[i] * 1e6)) / 1e6);
  return v.empty() ? r.median : median_of(v);
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
    const BenchLoad load{r.client_pct, r.client_wait_pct, r.server_pct, r.server_wait_pct};
    r.verdict = bench_verdict(load);
    r.contended = bench_contended(load);
    if (!r.setup.empty() && std::all_of(r.setup.begin(), r.setup.end(), [](double v) { return v >= 0; }))
      r.setup_median = median_of(r.setup);
    // Without a meter scp's rate is over the whole run: its transfer is that less the set-up.
    r.transfer_median = r.median > 0 ? double(size) / (r.median * 1e6) : 0;
    if (!r.metered && r.setup_median > 0)
      r.transfer_median = std::max(0.0, r.transfer_median - r.setup_median);
    r.setup_dominates = r.setup_median > r.transfer_median;
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
        a.vs_scp = (s.metered ? a.median : whole_run_median(a, size)) / s.median;
  }
}

std::string num_or(double v, const char* f, const char* none, bool have) { return have ? fmt(f, v) : none; }

// A figure for --json: rounded to `decimals` places, or null where the row has none.
Json figure(double v, int decimals, bool have) { return have ? Json(rounded(v, decimals)) : Json(nullptr); }

// One row of --json (docs/aesxfer.1, JSON OUTPUT).
Json row_json(const Row& r) {
  const bool m = r.measured();
  Json j;
  j["tool"] = r.tool_name();
  j["cipher"] = r.name();
  if (r.scp()) {
    j["ssh_cipher"] = r.ssh_cipher.empty() ? Json(nullptr) : Json(r.ssh_cipher);
    j["offered"] = m;
  }
  j["mac"] = r.mac_name();
  j["impl"] = r.impl;
  j["no_aesni"] = r.no_aesni;
  j["mb_per_s_median"] = figure(r.median, 2, m);
  j["mb_per_s_min"] = figure(r.min, 2, m);
  j["mb_per_s_max"] = figure(r.max, 2, m);
  j["mb_per_s_runs"] = Json::array();
  for (double v : r.mbps) j["mb_per_s_runs"].push_back(rounded(v, 2));
  j["client_cpu_pct"] = figure(r.client_pct, 1, m);
  j["server_cpu_pct"] = figure(r.server_pct, 1, r.server_pct >= 0);
  j["client_wait_pct"] = figure(r.client_wait_pct, 1, m);
  j["server_wait_pct"] = figure(r.server_wait_pct, 1, r.server_wait_pct >= 0);
  j["cpu_seconds_per_gb"] = figure(r.cpu_per_gb, 3, r.cpu_per_gb >= 0);
  j["speedup"] = figure(r.speedup, 2, r.speedup > 0);
  j["vs_scp"] = figure(r.vs_scp, 2, r.vs_scp > 0);
  j["record_size"] = !r.scp() && m ? Json(r.record_agreed) : Json(nullptr);
  j["setup_seconds_median"] = figure(r.setup_median, 3, m && r.setup_median >= 0);
  j["setup_dominates"] = m && r.setup_dominates;
  if (r.scp()) j["metered"] = m && r.metered;
  j["contended"] = m && r.contended;
  j["verdict"] = r.verdict;
  return j;
}

// The whole --json document; `scp` is the --vs-scp object or null.
Json bench_json(const BenchOptions& opt, bool local, const std::string& date, const std::string& cpu,
                Json scp, const std::vector<Row>& rows) {
  Json j;
  j["tool"] = "aesxfer bench";
  j["date"] = date;
  j["cpu"] = cpu;
  j["host"] = local ? "127.0.0.1" : opt.host;
  j["local_server"] = local;
  j["bytes"] = opt.size;
  j["repeat"] = opt.repeat;
  j["busy_threshold_pct"] = kBenchBusyPct;
  j["unit"] = "MB/s (10^6 bytes per second)";
  j["scp"] = std::move(scp);
  j["rows"] = Json::array();
  for (const Row& r : rows) j["rows"].push_back(row_json(r));
  return j;
}

// What a run needs besides the options, resolved before anything starts.
struct BenchPlan {
  bool global_no_aesni = false;       // --no-aesni or AESXFER_NO_AESNI: every row portable
  bool pairs = false;                 // --no-aesni-too takes effect: AES rows twice
  bool sweep = false;                 // --record-size: one row per record size
  bool local = false;                 // no HOST: local server children
  bool need_portable_server = false;  // a second local server child with --no-aesni
  const cr::MacDesc* mac = nullptr;   // for non-AEAD ciphers
  ScpSetup ssh;                       // --vs-scp
  std::vector<Row> rows;
  std::string date, cpu;
  std::string where;  // the table's header: where the data went
};

// The processes and files of a run. Members are destroyed in reverse order: the sshd and the
// servers are stopped before the scratch directory is removed.
struct BenchChildren {
  std::unique_ptr<ScratchDir> scratch;
  std::unique_ptr<LocalServer> server_hw, server_sw;
  std::unique_ptr<ThrowawaySshd> sshd;
  fs::path home = files::aesxfer_home();
  pid_t sshd_pid = -1;  // kept for the JSON after the sshd is stopped
};

// Options that cannot go together or are out of range; false after a one-line error (exit 2).
bool bench_options_ok(const BenchOptions& opt, std::ostream& err) {
  if (const std::string why = opt.plot.empty() ? "" : unwritable(opt.plot); !why.empty()) {
    err << "aesxfer bench: --plot " << why << "\n";
    return false;
  }
  if (opt.json && opt.csv) {
    err << "aesxfer bench: --json and --csv exclude each other\n";
    return false;
  }
  if (opt.repeat < 1 || opt.repeat > 1000) {
    err << "aesxfer bench: --repeat must be in [1, 1000], got " << opt.repeat << "\n";
    return false;
  }
  if (opt.size == 0) {
    err << "aesxfer bench: --size must be at least 1 byte\n";
    return false;
  }
  if (!opt.vs_scp && (!opt.ssh_opts.empty() || !opt.sshd.empty())) {
    err << "aesxfer bench: --ssh-opts and --sshd go with --vs-scp\n";
    return false;
  }
  return true;
}

// The selected ciphers in the order given (every cipher of the table without -c), duplicates
// dropped; false after a one-line error for an unknown name.
bool select_ciphers(const BenchOptions& opt, std::vector<const cr::CipherDesc*>& sel, std::ostream& err) {
  if (opt.ciphers.empty()) {
    for (const auto& c : cr::ciphers()) sel.push_back(&c);
    return true;
  }
  for (const auto& name : opt.ciphers) {
    const auto* c = cr::find_cipher(name);
    if (!c) {
      err << "aesxfer bench: unknown cipher '" << proto::printable(name) << "' (known: " << cr::cipher_names()
          << ")\n";
      return false;
    }
    if (std::find(sel.begin(), sel.end(), c) == sel.end()) sel.push_back(c);
  }
  return true;
}

// The scp row of cipher c (nullptr: scp's defaults), or one saying why OpenSSH cannot have it.
Row scp_row(const cr::CipherDesc* c, const ScpSetup& ssh, const std::vector<std::string>& ssh_ciphers,
            const std::vector<std::string>& ssh_macs) {
  Row s;
  s.tool = Tool::scp;
  s.cipher = c;
  s.impl = "openssh";
  if (!c) return s;  // scp's defaults: no -c, no MACs
  const std::optional<ScpCipher> m = scp_cipher_for(c->name);
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
  return s;
}

// The rows in the order they run: per cipher one row per record size (AES twice with
// --no-aesni-too), then its scp row; scp's defaults last.
void make_rows(const BenchOptions& opt, const std::vector<const cr::CipherDesc*>& sel, BenchPlan& p) {
  const std::vector<std::string> ssh_ciphers =
      opt.vs_scp ? ssh_query(p.ssh.ssh, "cipher") : std::vector<std::string>{};
  const std::vector<std::string> ssh_macs =
      opt.vs_scp ? ssh_query(p.ssh.ssh, "mac") : std::vector<std::string>{};
  const std::vector<uint64_t> sizes = opt.record_sizes.empty() ? std::vector<uint64_t>{0} : opt.record_sizes;
  const cr::MacDesc* no_mac = cr::find_mac("none");
  for (const auto* c : sel) {
    Row r;
    r.cipher = c;
    r.mac = c->aead ? no_mac : p.mac;
    for (uint64_t rs : sizes) {
      r.record_size = rs;
      r.no_aesni = p.global_no_aesni;
      p.rows.push_back(r);
      if (p.pairs && cr::has_portable_twin(*c)) {
        r.no_aesni = true;
        p.rows.push_back(r);
        p.need_portable_server = true;
      }
    }
    if (opt.vs_scp) p.rows.push_back(scp_row(c, p.ssh, ssh_ciphers, ssh_macs));
  }
  if (opt.vs_scp) p.rows.push_back(scp_row(nullptr, p.ssh, ssh_ciphers, ssh_macs));
}

// Everything decided before the run: MAC, ciphers, scp's programs, record sizes, the rows.
// 0, or the exit code after a one-line error.
int plan_bench(const BenchOptions& opt, BenchPlan& p, std::ostream& err) {
  if (!bench_options_ok(opt, err)) return 2;
  p.global_no_aesni = opt.no_aesni || cr::no_aesni();
  p.mac = cr::find_mac(opt.mac.empty() ? "hmac-sha256" : opt.mac);
  if (!p.mac) {
    err << "aesxfer bench: unknown MAC '" << proto::printable(opt.mac) << "' (known: " << cr::mac_names()
        << ")\n";
    return 2;
  }
  std::vector<const cr::CipherDesc*> sel;
  if (!select_ciphers(opt, sel, err)) return 2;
  if (opt.vs_scp) {
    if (const std::string why = find_scp_setup(opt, p.ssh); !why.empty()) {
      err << "aesxfer bench: " << why << "\n";
      return 1;
    }
  }
  p.pairs = opt.no_aesni_too && !p.global_no_aesni;
  if (opt.no_aesni_too && p.global_no_aesni && !opt.quiet)
    err << "aesxfer bench: note: --no-aesni is set, so --no-aesni-too adds nothing\n";
  for (uint64_t rs : opt.record_sizes)
    if (rs < proto::kMinRecordSize || rs > proto::kMaxRecordSize) {
      err << "aesxfer bench: --record-size " << rs << " is outside 4K..1M\n";
      return 2;
    }
  p.sweep = !opt.record_sizes.empty();
  make_rows(opt, sel, p);
  p.local = opt.host.empty();
  p.date = utc_now("%Y-%m-%d %H:%M UTC");
  p.cpu = cr::cpu_model();
  return 0;
}

// Without HOST: a scratch $AESXFER_HOME with the client's identity, the local server child (two
// with --no-aesni-too) and, with --vs-scp, the throwaway sshd. Throws when one cannot start.
void start_children(const BenchOptions& opt, BenchPlan& p, BenchChildren& k) {
  if (!p.local) {
    if (opt.vs_scp)
      p.ssh.where =
          opt.host + " (your ssh setup" + (p.ssh.opts.empty() ? std::string() : ", --ssh-opts") + ")";
    p.where = opt.host + ":" + std::to_string(opt.port);
    return;
  }
  k.scratch = std::make_unique<ScratchDir>();
  const fs::path& dir = k.scratch->path();
  k.home = dir / "home";
  fs::create_directories(k.home);
  fs::permissions(k.home, fs::perms::owner_all, fs::perm_options::replace);
  // The client's identity exists before the server starts, which accepts it by default.
  files::load_or_create_identity(k.home / "id_ed25519");
  fs::create_directories(dir / "hw");
  k.server_hw = std::make_unique<LocalServer>(opt.server_binary, dir / "hw", k.home, p.global_no_aesni);
  g_child_pids[kServerHw] = k.server_hw->pid();
  if (p.need_portable_server) {
    fs::create_directories(dir / "sw");
    k.server_sw = std::make_unique<LocalServer>(opt.server_binary, dir / "sw", k.home, true);
    g_child_pids[kServerSw] = k.server_sw->pid();
  }
  if (opt.vs_scp) {
    k.sshd = std::make_unique<ThrowawaySshd>(dir / "ssh", p.ssh.sshd, p.ssh.keygen);
    g_child_pids[kSshd] = k.sshd->pid();
    p.ssh.opts.insert(p.ssh.opts.end(), {"-F", k.sshd->client_config().string()});
    p.ssh.where = "127.0.0.1:" + std::to_string(k.sshd->port()) + " (throwaway sshd, pid " +
                  std::to_string(k.sshd->pid()) + ")";
  }
  p.where = "127.0.0.1 (local server child, pid " + std::to_string(k.server_hw->pid()) + ")";
}

// measure_*: one transfer of one row. kRunOk with the sample in s; kRunSkipped when the row
// turned out to have no figures (or an interrupt is pending: the loop reports it); else the exit
// code after the error lines.
constexpr int kRunOk = 0, kRunSkipped = -1;

int measure_scp(Row& r, const BenchOptions& opt, const BenchPlan& p, const BenchChildren& k,
                const fs::path& data, RunSample& s, std::ostream& err) {
  ScpJob job;
  job.scp = p.ssh.scp;
  job.opts = p.ssh.opts;
  job.target = p.ssh.target;
  job.ssh_cipher = r.want_cipher;
  job.ssh_mac = r.want_mac;
  job.file = data;
  job.bytes = opt.size;
  job.server = k.sshd ? k.sshd->pid() : -1;
  job.timeout = opt.timeout;
  ScpRun run;
  try {
    run = run_scp(job, &g_child_pids[kScp]);
  } catch (const ScpNotOffered& e) {
    if (g_interrupted) return kRunSkipped;
    r.not_offered =
        "refused by " + (p.local ? std::string("the throwaway sshd") : opt.host) + ": " + e.what();
    r.mbps.clear();
    if (!opt.quiet) err << "  " << r.label() << ": " << r.not_offered << "\n";
    return kRunSkipped;
  } catch (const std::exception& e) {
    if (g_interrupted) return kRunSkipped;  // reported at the top of the loop
    err << "aesxfer bench: " << r.label() << ": " << e.what() << "\n";
    if (k.sshd) err << "aesxfer bench: sshd log: " << k.sshd->log_tail() << "\n";
    return 1;
  }
  if (!run.ssh_cipher.empty()) r.ssh_cipher = run.ssh_cipher;
  if (!run.ssh_mac.empty()) r.ssh_mac = run.ssh_mac;
  r.setup.push_back(run.setup_s);
  r.metered = r.metered && run.metered;
  s = RunSample{run.mb_s, run.window, run.client_cpu, run.client_wait, run.server_cpu, run.server_wait};
  return kRunOk;
}

// CPU and wait figures of both sides, read just before and just after a put.
struct LoadReading {
  double client_cpu = 0, client_wait = 0, server_cpu = -1, server_wait = -1;
  Clock::time_point t;
  static LoadReading now(const LocalServer* srv) {
    LoadReading l;
    l.server_cpu = srv ? srv->cpu_seconds() : -1;
    l.server_wait = srv ? srv->wait_seconds() : -1;
    l.client_wait = proc::run_delay_seconds(::getpid());
    l.client_cpu = cpu_seconds_self();
    l.t = Clock::now();
    return l;
  }
};

int measure_aesxfer(Row& r, const BenchOptions& opt, const BenchPlan& p, const BenchChildren& k,
                    const fs::path& data, RunSample& s, std::ostream& err) {
  const cr::Impl impl = r.no_aesni ? cr::Impl::portable : cr::Impl::best;
  r.impl = cr::cipher_impl_name(*r.cipher, cr::dispatch(impl));
  const LocalServer* srv =
      !p.local ? nullptr : (r.no_aesni && !p.global_no_aesni ? k.server_sw.get() : k.server_hw.get());
  client::ClientOptions co;
  co.host = p.local ? "127.0.0.1" : (opt.address.empty() ? opt.host : opt.address);
  co.port = p.local ? srv->port() : opt.port;
  co.cipher = r.cipher;
  co.mac = r.mac;
  co.impl = impl;
  co.home = k.home;
  co.timeout = std::chrono::milliseconds(int64_t(opt.timeout * 1000));
  if (r.record_size) co.record_size = uint32_t(r.record_size);
  client::FileResult fr;
  LoadReading a, b;
  try {
    const auto connect = Clock::now();  // set-up: TCP connect and the handshake, as scp's start to meter
    client::Client client(co);
    a = LoadReading::now(srv);
    r.setup.push_back(std::chrono::duration<double>(a.t - connect).count());
    fr = client.put(data, "/dev/null", {}, {});
    // The end in the order of the start, the clock first: each figure covers the same window.
    b.t = Clock::now();
    b.client_cpu = cpu_seconds_self();
    b.client_wait = proc::run_delay_seconds(::getpid());
    b.server_cpu = srv ? srv->cpu_seconds() : -1;
    b.server_wait = srv ? srv->wait_seconds() : -1;
    client.bye();
  } catch (const std::exception& e) {
    if (g_interrupted) {
      err << "aesxfer bench: interrupted\n";
      return 130;
    }
    err << "aesxfer bench: " << r.cipher->name << (r.no_aesni ? " (--no-aesni)" : "") << ": " << e.what()
        << "\n";
    if (srv) err << "aesxfer bench: server log: " << srv->log_tail() << "\n";
    return 1;
  }
  s.mbps = fr.seconds > 0 ? double(fr.bytes) / fr.seconds / 1e6 : 0;
  r.record_agreed = fr.record_size;
  s.wall = std::chrono::duration<double>(b.t - a.t).count();
  s.client_cpu = b.client_cpu - a.client_cpu;
  if (a.client_wait >= 0 && b.client_wait >= a.client_wait) s.client_wait = b.client_wait - a.client_wait;
  if (a.server_cpu >= 0 && b.server_cpu >= 0) {
    s.server_cpu = b.server_cpu - a.server_cpu;
    if (a.server_wait >= 0 && b.server_wait >= a.server_wait) s.server_wait = b.server_wait - a.server_wait;
  }
  return kRunOk;
}

// Every row --repeat times, interleaved (repeat 1 of every row, then repeat 2, ...). 0, or the
// exit code after the error lines (130 when interrupted).
int run_rows(const BenchOptions& opt, BenchPlan& p, const BenchChildren& k, const fs::path& data,
             std::ostream& err) {
  for (int rep = 0; rep < opt.repeat; ++rep) {
    for (auto& r : p.rows) {
      if (g_interrupted) {
        err << "aesxfer bench: interrupted\n";
        return 130;
      }
      if (!r.measured()) continue;
      RunSample s;
      const int st =
          r.scp() ? measure_scp(r, opt, p, k, data, s, err) : measure_aesxfer(r, opt, p, k, data, s, err);
      if (st == kRunSkipped) continue;
      if (st != kRunOk) return st;
      add_sample(r, s);
      if (!opt.quiet)
        err << "  run " << rep + 1 << "/" << opt.repeat << "  " << r.label() << "  " << fmt("%.1f", s.mbps)
            << " MB/s\n"
            << std::flush;
    }
  }
  return 0;
}

// Stops the children by their PIDs. A server that does not exit 0 on SIGTERM (a crash, a
// sanitizer report) is worth a warning.
void stop_children(BenchChildren& k, std::ostream& err) {
  for (auto* srv : {k.server_hw.get(), k.server_sw.get()}) {
    if (!srv) continue;
    const int st = srv->stop();
    if (st != 0)
      err << "aesxfer bench: warning: the local server exited with status " << st << ": " << srv->log_tail()
          << "\n";
  }
  k.sshd_pid = k.sshd ? k.sshd->pid() : -1;
  if (k.sshd) k.sshd->stop();
  for (int i = 0; i < kChildSlots; ++i) g_child_pids[i] = -1;  // stopped: their PIDs may be reused
}

// What the scp rows' notes need: every set-up time, and whether every rate came from the meter.
struct ScpTiming {
  std::vector<double> setups, aesxfer_setups;
  bool all_metered = true;
  explicit ScpTiming(const std::vector<Row>& rows) {
    for (const Row& r : rows) {
      auto& to = r.scp() ? setups : aesxfer_setups;
      to.insert(to.end(), r.setup.begin(), r.setup.end());
      if (r.scp() && r.measured()) all_metered = all_metered && r.metered;
    }
  }
};

void print_csv(const std::vector<Row>& rows, std::ostream& out) {
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
        << num_or(double(r.record_agreed), "%.0f", "n/a", !r.scp() && m) << ","
        << (m && r.contended ? "true" : "false") << "," << (m && r.setup_dominates ? "true" : "false")
        << "\n";
  }
}

// One line of the table (header_row: the column names), without trailing blanks.
std::string table_line(const Row* r, bool vs, bool sweep) {
  const int mw = vs ? 17 : 12;
  char line[320];
  if (!r) {
    std::snprintf(line, sizeof line, "%-13s %s%-*s %-9s %-6s %s%9s%-2s %9s %9s %7s %7s %8s%s\n", "cipher",
                  vs ? "tool    " : "", mw, "mac", "impl", "AES-NI", sweep ? " record " : "", "median", "",
                  "min", "max", "client", "server", "speed-up", vs ? "  vs scp" : "");
    return line;
  }
  const std::string tool = vs ? (r->scp() ? "scp     " : "aesxfer ") : "";
  const std::string speed = r->speedup > 0 ? fmt("x%.2f", r->speedup) : "";
  const std::string x = r->vs_scp > 0 ? fmt("x%.2f", r->vs_scp) : "";
  const std::string ratio = vs ? "  " + std::string(x.size() < 6 ? 6 - x.size() : 0, ' ') + x : "";
  std::string rec;
  if (sweep) {
    rec = r->scp() ? "-" : svg::bytes_label(double(r->record_agreed));
    rec = std::string(rec.size() < 7 ? 7 - rec.size() : 0, ' ') + rec + " ";
  }
  if (r->measured())
    std::snprintf(line, sizeof line, "%-13s %s%-*s %-9s %-6s %s%9.1f%-2s %9.1f %9.1f %7s %7s %8s%s\n",
                  r->name().c_str(), tool.c_str(), mw, short_ssh_name(r->mac_name()).c_str(), r->impl.c_str(),
                  r->scp() ? "-" : (r->no_aesni ? "off" : "on"), rec.c_str(), r->median, r->marks().c_str(),
                  r->min, r->max, pct_text(r->client_pct).c_str(), pct_text(r->server_pct).c_str(),
                  speed.c_str(), ratio.c_str());
  else
    std::snprintf(line, sizeof line, "%-13s %s%-*s %-9s %-6s %s\n", r->name().c_str(), tool.c_str(), mw,
                  short_ssh_name(r->mac_name()).c_str(), "-", "-",
                  ("   not offered: " + (r->history.empty() ? r->not_offered : r->history)).c_str());
  std::string l = line;
  while (l.size() > 1 && l[l.size() - 2] == ' ') l.erase(l.size() - 2, 1);  // no trailing blanks
  return l;
}

// What "*" and "+" mean, under the table and in the charts.
constexpr const char* kBenchContendedLegend =
    "* CPU contended: a side waited for a core 15% of the time or more (other processes had it; see the "
    "verdicts)";
constexpr const char* kBenchSetupLegend =
    "+ set-up (connect, key exchange, authentication) took longer than the transfer: too small to compare";

void print_marks_legend(const std::vector<Row>& rows, std::ostream& out) {
  const bool star =
      std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.measured() && r.contended; });
  const bool plus =
      std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.measured() && r.setup_dominates; });
  if (star) out << kBenchContendedLegend << "\n";
  if (plus) out << kBenchSetupLegend << "; try --size 1G or more\n";
}

void print_verdicts(const std::vector<Row>& rows, std::ostream& out) {
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
    out << ")";
    if (r.setup_dominates)
      out << "; + set-up " << fmt("%.3f", r.setup_median) << " s > transfer "
          << fmt("%.3f", r.transfer_median) << " s: too small to compare";
    out << "\n";
  }
}

// --vs-scp: how scp's figures were taken, under the verdicts.
void print_scp_notes(const BenchPlan& p, const ScpTiming& timing, std::ostream& out) {
  if (timing.all_metered)
    out << "scp: MB/s is the rate on scp's own progress meter, which leaves out the connection set-up as "
           "aesxfer's figure leaves out its connect and handshake (set-up: median "
        << fmt("%.3f", median_of(timing.setups)) << " s per scp run, "
        << fmt("%.3f", median_of(timing.aesxfer_setups))
        << " s per aesxfer connection); its CPU is scp + ssh, and sshd + sftp-server "
        << (p.local ? "for the server" : "not measured (remote)") << ".\n";
  else
    out << "scp: no progress meter (--ssh-opts -q?): MB/s is the file size over the whole scp run, "
           "connection set-up included; vs scp divides aesxfer's whole run (set-up included) by it.\n";
  if (p.global_no_aesni || p.pairs)
    out << "vs scp: only for rows with AES-NI on (OpenSSH uses OpenSSL's code, with AES-NI where the CPU has "
           "it).\n";
}

void print_table(const BenchOptions& opt, const BenchPlan& p, const ScpTiming& timing, std::ostream& out) {
  const bool vs = opt.vs_scp;
  out << "aesxfer bench: " << human_bytes(opt.size) << " x " << opt.repeat << " per cipher to " << p.where
      << ":/dev/null\n";
  if (vs) out << "scp:  " << p.ssh.version << ", to " << p.ssh.where << ":/dev/null\n";
  out << "CPU:  " << p.cpu << " (" << std::thread::hardware_concurrency() << " logical CPUs), " << p.date
      << "\n";
  out << "MB/s = 10^6 bytes/s (median, min, max of " << opt.repeat
      << " runs); CPU % of one core over the transfers\n";
  out << table_line(nullptr, vs, p.sweep);
  for (const Row& r : p.rows) out << table_line(&r, vs, p.sweep);
  print_marks_legend(p.rows, out);
  print_verdicts(p.rows, out);
  if (vs) print_scp_notes(p, timing, out);
}

// --record-size with --plot: MB/s against record size, one line per cipher (and AES-NI setting).
svg::LineChart sweep_chart(const BenchOptions& opt, const BenchPlan& p) {
  svg::LineChart c;
  c.title = "aesxfer bench: MB/s by record size, " + human_bytes(opt.size) + " to " +
            (p.local ? "localhost" : opt.host) + ":/dev/null, median of " + std::to_string(opt.repeat);
  c.subtitle = p.cpu + "  \u00b7  " + p.date;
  c.x_label =
      "record size (payload bytes per record); MAC: " + std::string(p.mac->name) + " for non-AEAD ciphers";
  c.y_label = "MB/s (10^6 bytes/s)";
  c.log2_x = true;
  c.mark_legend = {kBenchContendedLegend, kBenchSetupLegend};
  for (const Row& r : p.rows) {
    if (r.scp() || !r.measured()) continue;
    const std::string name = r.name() + (r.no_aesni ? " (no AES-NI)" : "") + " [" + r.impl + "]";
    auto it =
        std::find_if(c.series.begin(), c.series.end(), [&](const svg::Series& s) { return s.label == name; });
    if (it == c.series.end()) {
      svg::Series se;
      se.label = name;
      se.family = r.name();
      se.portable = aes_without_aesni(*r.cipher, r.impl);
      c.series.push_back(se);
      it = c.series.end() - 1;
    }
    it->points.emplace_back(double(r.record_agreed), r.median);
    it->marks.push_back(r.marks());
  }
  return c;
}

// One bar of the --plot bar chart.
svg::Bar bar_of(const Row& r, const BenchOptions& opt, const BenchPlan& p) {
  svg::Bar b;
  b.label = r.scp() && !r.cipher ? "scp defaults" : r.name();
  // The colour is the family (the cipher, or scp), the dashed outline AES without AES-NI (svg.h).
  if (r.scp()) {
    b.family = "scp";
    b.legend = "scp (" + p.ssh.version_short + ")";
  } else {
    b.family = r.name();
    b.legend = r.cipher->mode == cr::CipherMode::none ? "none (no cipher)" : r.name();
    if (opt.vs_scp) b.legend = "aesxfer " + b.legend;
    b.portable = aes_without_aesni(*r.cipher, r.impl);
  }
  b.contended = r.measured() && r.contended;
  b.setup = r.measured() && r.setup_dominates;
  b.value = r.median;
  if (opt.repeat > 1 && r.measured()) {
    b.lo = r.min;
    b.hi = r.max;
  }
  b.note = r.scp() ? (r.cipher ? "" : short_ssh_name(r.ssh_cipher)) : r.impl;
  if (!r.measured()) b.absent = "scp: not offered" + (r.history.empty() ? "" : " (" + r.history + ")");
  if (r.speedup > 0) b.group_note = fmt("AES-NI: x%.1f", r.speedup);
  for (const Row& a : p.rows)  // the scp bar carries its pair's ratio
    if (r.scp() && r.cipher && !a.scp() && a.cipher == r.cipher && a.vs_scp > 0)
      b.group_note = fmt("aesxfer/scp: x%.2f", a.vs_scp);
  return b;
}

svg::BarChart bar_chart_of(const BenchOptions& opt, const BenchPlan& p) {
  svg::BarChart c;
  c.title = "aesxfer bench: " + human_bytes(opt.size) + " to " + (p.local ? "localhost" : opt.host) +
            ":/dev/null, median of " + std::to_string(opt.repeat);
  c.subtitle = p.cpu + "  \u00b7  " + p.date;
  c.y_label = "MB/s (10^6 bytes/s)";
  c.x_label = "cipher (MAC: " + std::string(p.mac->name) + " for non-AEAD ciphers" +
              (opt.vs_scp ? "; scp: hmac-sha2-256-etm" : "") + ")";
  c.whisker_legend = opt.repeat > 1 ? "min\u2013max of " + std::to_string(opt.repeat) + " runs" : "";
  c.contended_legend = kBenchContendedLegend;
  c.setup_legend = kBenchSetupLegend;
  for (const Row& r : p.rows) c.bars.push_back(bar_of(r, opt, p));
  return c;
}

// The table, JSON or CSV on out, and the --plot chart. 0, or 1 when the chart cannot be written.
int report_bench(const BenchOptions& opt, const BenchPlan& p, const BenchChildren& k, std::ostream& out,
                 std::ostream& err) {
  const ScpTiming timing(p.rows);
  if (opt.json) {
    Json scp = nullptr;
    if (opt.vs_scp)
      scp = Json{{"version", p.ssh.version},
                 {"target", p.ssh.target},
                 {"local_sshd", k.sshd != nullptr},
                 {"sshd_pid", k.sshd_pid > 0 ? Json(k.sshd_pid) : Json(nullptr)},
                 {"timed_by", timing.all_metered ? "progress meter" : "whole scp run"}};
    out << json_line(bench_json(opt, p.local, p.date, p.cpu, std::move(scp), p.rows));
  } else if (opt.csv) {
    print_csv(p.rows, out);
  } else {
    print_table(opt, p, timing, out);
  }
  out.flush();
  if (opt.plot.empty()) return 0;
  std::string why;
  const std::string doc =
      p.sweep ? svg::line_chart(sweep_chart(opt, p)) : svg::bar_chart(bar_chart_of(opt, p));
  if (!svg::write_file(opt.plot, doc, why)) {
    err << "aesxfer bench: --plot: " << why << "\n";
    return 1;
  }
  return 0;
}
}  // namespace

namespace {
// Which side was busy, and how long each waited for a core (bench.h, bench_verdict).
struct Busy {
  bool known, client, server;
  double server_wait;
  explicit Busy(const BenchLoad& l)
      : known(l.server_cpu >= 0), server_wait(known ? std::max(0.0, l.server_wait) : 0) {
    client = l.client_cpu + l.client_wait >= kBenchBusyPct;
    server = known && l.server_cpu + server_wait >= kBenchBusyPct;
  }
};
}  // namespace

bool bench_contended(const BenchLoad& l) {
  const Busy b(l);
  if (b.client || b.server)
    return (b.client && l.client_wait >= kBenchContendedPct) ||
           (b.server && b.server_wait >= kBenchContendedPct);
  return l.client_wait + b.server_wait >= 2 * kBenchContendedPct;
}

std::string bench_verdict(const BenchLoad& l) {
  const Busy b(l);
  const std::string suffix = bench_contended(l) ? " (CPU contended)" : "";
  if (b.client && b.server) return "sender and receiver CPU" + suffix;
  if (b.client) return "sender cipher CPU" + suffix;
  if (b.server) return "receiver CPU" + suffix;
  if (bench_contended(l)) return "CPU contention (other processes)";
  if (!b.known) return "network or receiver (server CPU not measured)";
  return "network";
}

bool aes_without_aesni(const crypto::CipherDesc& c, const std::string& impl) {
  const bool aes = c.make_block == crypto::make_aes128_block || c.make_aead == crypto::make_aes128_gcm_aead;
  return aes && impl.rfind("aesni", 0) != 0 && impl.rfind("vaes", 0) != 0;
}

int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  BenchPlan plan;
  if (const int st = plan_bench(opt, plan, err); st != 0) return st;
  try {
    SignalCleanup on_signal;
    BenchChildren children;
    start_children(opt, plan, children);
    if (!opt.quiet)
      err << "aesxfer bench: writing " << human_bytes(opt.size) << " of test data...\n" << std::flush;
    DataFile data(opt.size);
    if (const int st = run_rows(opt, plan, children, data.path(), err); st != 0) return st;
    stop_children(children, err);
    compute_figures(plan.rows, opt.size);
    return report_bench(opt, plan, children, out, err);
  } catch (const std::exception& e) {
    err << "aesxfer bench: " << (g_interrupted ? std::string("interrupted") : e.what()) << "\n";
    return g_interrupted ? 130 : 1;
  }
}

}  // namespace aesxfer::app
