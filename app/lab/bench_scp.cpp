// `aesxfer bench --vs-scp`: scp next to aesxfer.
//
// What is measured, per scp run: `scp -v -c CIPHER -o MACs=MAC FILE HOST:/dev/null` runs on a
// pseudo-terminal, because scp shows its progress meter only on a terminal, and the meter is what
// the classic `for c in ...; do scp -c $c bigfile host:/dev/null; done` benchmarks read.
//
//   MB/s        the rate on scp's final meter line: scp's own bytes / (meter start to last byte
//               acknowledged), printed by scp in binary units with 4 digits and converted to
//               10^6 bytes/s. It leaves out the connection set-up (ssh's key exchange and
//               authentication, and sshd forking and re-executing itself) as aesxfer's figure
//               leaves out its handshake; that set-up time is reported apart (setup_s). Without a
//               meter (an -q in --ssh-opts, or a run too short or too starved for scp to draw one)
//               the rate is the file size over the whole scp run, and the set-up ends where ssh -v
//               says "Authenticated to" (unknown only when -q hides that too).
//   client CPU  user + system time of scp and its ssh child: wait4()'s rusage of scp (which reaps
//               its ssh) minus what /proc said the two had used when the meter appeared.
//   server CPU  with the throwaway sshd only: its listener's utime + stime + cutime + cstime plus
//               the same of every live descendant (the per-connection sshd, its privilege-
//               separated child, sftp-server) when the meter appeared, against the listener's
//               own figure once the connection's processes have exited and been reaped (waited
//               for up to 5 s after scp exits).
//   wait        run_delay of each process of either tree, sampled every 50 ms (proc::TreeWait).
//   CPU % (bench.cpp) divides these by the window from meter start to scp's exit.
//
// bench adds `-o BatchMode=yes -o ControlMaster=no -o ControlPath=none` after the user's
// --ssh-opts: scp must not wait for a password, and a shared connection would carry another
// cipher than the one asked for. ssh takes the first value it gets for an option, so --ssh-opts
// can still override them.
#include "app/lab/bench_scp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "app/lab/bench_proc.h"
#include "crypto/suite.h"
#include "files/unique_fd.h"

namespace aesxfer::app {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_all(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The last `n` lines of output that are not ssh -v debug lines or progress-meter updates.
std::string last_lines(const std::string& out, size_t n) {
  std::vector<std::string> lines;
  std::string cur;
  auto flush = [&] {
    while (!cur.empty() && (cur.back() == ' ' || cur.back() == '\t')) cur.pop_back();
    if (!cur.empty() && cur.rfind("debug", 0) != 0 && cur.find("B/s") == std::string::npos)
      lines.push_back(cur);
    cur.clear();
  };
  for (char c : out) {
    if (c == '\n' || c == '\r')
      flush();
    else
      cur += c;
  }
  flush();
  std::string s;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    s += (s.empty() ? "" : "; ") + lines[i];
  return s.empty() ? "(no message)" : s;
}

uint16_t free_loopback_port() {
  const files::UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int fd = sock.get();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error(std::string("bind 127.0.0.1:0: ") + std::strerror(errno));
  }
  return ntohs(a.sin_port);
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::trunc);
  f << text;
  if (!f.flush()) throw std::runtime_error(p.string() + ": write failed");
}

}  // namespace

std::optional<ScpCipher> scp_cipher_for(const std::string& cipher) {
  const crypto::CipherDesc* c = crypto::find_cipher(cipher);
  if (!c) return std::nullopt;
  const char* mac = c->openssh.name && !c->aead ? kScpMac : nullptr;
  return ScpCipher{c->name, c->openssh.name, mac, c->openssh.gone};
}

bool parse_scp_meter(const std::string& out, double& mb_s) {
  const size_t at = out.rfind("100%");
  if (at == std::string::npos) return false;
  // "100%  256MB 182.3MB/s   00:01": the first token after 100% that ends in "B/s".
  std::istringstream in(out.substr(at + 4, 200));
  for (std::string tok; in >> tok;) {
    if (tok.size() < 5 || tok.compare(tok.size() - 3, 3, "B/s") != 0) continue;
    const char unit = tok[tok.size() - 4];
    const char* units = "KMGT";
    const char* u = std::strchr(units, unit);
    if (!u || unit == '\0') return false;
    char* end = nullptr;
    const double v = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size() - 4 || !(v >= 0) || !std::isfinite(v)) return false;
    mb_s = v * std::pow(1024.0, double(u - units + 1)) / 1e6;
    return true;
  }
  return false;
}

bool parse_ssh_kex(const std::string& out, std::string& cipher, std::string& mac) {
  const std::string key = "kex: client->server cipher: ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return false;
  std::istringstream in(out.substr(at + key.size(), 300));
  std::string word;
  if (!(in >> cipher >> word) || word != "MAC:" || !(in >> mac)) return false;
  if (mac == "<implicit>") mac = "aead";
  return true;
}

ThrowawaySshd::ThrowawaySshd(const fs::path& dir, const std::string& sshd, const std::string& ssh_keygen) {
  fs::create_directories(dir);
  const fs::path host = dir / "host_ed25519", user = dir / "user_ed25519";
  for (const auto& key : {host, user}) {
    std::string out;
    if (proc::run_capture(
            {ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", "aesxfer-bench", "-f", key.string()}, out) !=
        0)
      throw std::runtime_error("ssh-keygen failed: " + last_lines(out, 2));
  }
  fs::copy_file(user.string() + ".pub", dir / "authorized_keys", fs::copy_options::overwrite_existing);
  if (::geteuid() == 0 && !fs::exists("/run/sshd")) {
    fs::create_directories("/run/sshd");
    fs::permissions("/run/sshd", fs::perms(0755), fs::perm_options::replace);
  }
  std::string sftp = "internal-sftp";
  for (const char* p : {"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                        "/usr/libexec/sftp-server", "/usr/lib/ssh/sftp-server"})
    if (::access(p, X_OK) == 0) {
      sftp = p;
      break;
    }
  log_ = dir / "sshd.log";
  const fs::path config = dir / "sshd_config";
  for (int attempt = 0;; ++attempt) {
    port_ = free_loopback_port();
    write_file(config,
               "# aesxfer bench --vs-scp: a throwaway sshd, stopped by its PID when the bench ends\n"
               "ListenAddress 127.0.0.1:" +
                   std::to_string(port_) + "\n" + "HostKey " + host.string() + "\n" + "AuthorizedKeysFile " +
                   (dir / "authorized_keys").string() + "\n" +
                   "PidFile none\nStrictModes no\nUsePAM no\nPubkeyAuthentication yes\n"
                   "PasswordAuthentication no\nAllowTcpForwarding no\nX11Forwarding no\nPrintMotd no\n"
                   "UseDNS no\n"
                   "# OpenSSH 7.4 left CBC out of the server's defaults; the comparison needs it.\n"
                   "Ciphers +aes128-cbc\n"
                   "Subsystem sftp " +
                   sftp + "\n");
    proc::SpawnOptions so;
    so.argv = {sshd, "-D", "-e", "-f", config.string()};
    so.log = log_.string();
    pid_ = proc::spawn(so);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    bool retry = false;
    for (;;) {
      if (read_all(log_).find("Server listening on") != std::string::npos) break;
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        if (attempt < 4 && read_all(log_).find("already in use") != std::string::npos) {
          retry = true;  // another process took the port between our probe and sshd's bind
          break;
        }
        throw std::runtime_error("sshd exited at start-up: " + log_tail());
      }
      if (Clock::now() > deadline) {
        stop();
        throw std::runtime_error("sshd did not start within 10 s: " + log_tail());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!retry) break;
  }
  std::istringstream pub(read_all(host.string() + ".pub"));
  std::string type, blob;
  pub >> type >> blob;
  write_file(dir / "known_hosts", "[127.0.0.1]:" + std::to_string(port_) + " " + type + " " + blob + "\n");
  client_config_ = dir / "ssh_config";
  write_file(client_config_, "Host 127.0.0.1\n  Port " + std::to_string(port_) + "\n  IdentityFile " +
                                 user.string() +
                                 "\n  IdentitiesOnly yes\n  IdentityAgent none\n  UserKnownHostsFile " +
                                 (dir / "known_hosts").string() +
                                 "\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
                                 "  PasswordAuthentication no\n  BatchMode yes\n");
}

ThrowawaySshd::~ThrowawaySshd() { stop(); }

int ThrowawaySshd::stop() noexcept {
  const int st = proc::stop(pid_);
  pid_ = -1;
  return st;
}

std::string ThrowawaySshd::log_tail() const { return proc::log_tail(log_); }

namespace {

// scp -v [opts] -o BatchMode=yes -o ControlMaster=no -o ControlPath=none [-c C] [-o MACs=M] FILE TARGET
std::vector<std::string> scp_argv(const ScpJob& j) {
  std::vector<std::string> argv = {j.scp};
  argv.insert(argv.end(), j.opts.begin(), j.opts.end());
  for (const char* a : {"-v", "-o", "BatchMode=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none"})
    argv.emplace_back(a);
  if (!j.ssh_cipher.empty()) argv.insert(argv.end(), {"-c", j.ssh_cipher});
  if (!j.ssh_mac.empty()) argv.insert(argv.end(), {"-o", "MACs=" + j.ssh_mac});
  argv.insert(argv.end(), {j.file.string(), j.target});
  return argv;
}

// The slave side of the pseudo-terminal `master` (160 columns, so the meter fits), opened; throws.
int open_pty_slave(int master) {
  char name[256];
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0 ||
      ::ptsname_r(master, name, sizeof name) != 0)
    throw std::runtime_error(std::string("pseudo-terminal: ") + std::strerror(errno));
  winsize ws{};
  ws.ws_row = 24;
  ws.ws_col = 160;
  ::ioctl(master, TIOCSWINSZ, &ws);
  const int slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) throw std::runtime_error(std::string(name) + ": " + std::strerror(errno));
  return slave;
}

struct Pty {
  files::UniqueFd master{::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)};
  files::UniqueFd slave{open_pty_slave(master.get())};
};

// What watching one scp run saw: its output, when its meter started and when it ended, the CPU
// figures at the meter's start, and how it exited.
struct ScpWatch {
  std::string out;
  bool metered = false, exited = false, eof = false, timed_out = false, authed = false;
  Clock::time_point t_start, t0, t1, t_auth, last_output, last_sample, t_exit;
  double s_start = 0, s0 = 0, c0 = 0;  // server tree CPU at the start and at the meter; scp's at the meter
  int status = 0;
  rusage ru{};
  proc::TreeWait client_wait, server_wait;
};

// Output from the terminal: kept (up to 4 MiB); the meter's first line starts the measured window.
void read_scp_output(int master, pid_t pid, pid_t server, Clock::time_point now, ScpWatch& w) {
  char buf[8192];
  const ssize_t n = ::read(master, buf, sizeof buf);
  if (n > 0) {
    if (w.out.size() < (size_t(4) << 20)) w.out.append(buf, size_t(n));
    w.last_output = now;
    // ssh -v's "Authenticated to HOST" ends the set-up (connect, key exchange, authentication)
    // whether or not a meter follows; the meter's start is the later, closer mark when there is one.
    if (!w.authed && w.out.find("Authenticated to ") != std::string::npos) {
      w.authed = true;
      w.t_auth = now;
    }
    if (!w.metered && w.out.find("B/s") != std::string::npos) {  // the meter's first line
      w.metered = true;
      w.t0 = now;
      w.c0 = proc::tree_cpu_seconds(pid);
      w.client_wait.start(pid);
      if (server > 0) {
        w.s0 = proc::tree_cpu_seconds(server);
        w.server_wait.start(server);
      }
    }
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    w.eof = true;  // EIO: every descriptor of the terminal's slave side is closed
    if (!w.exited) w.t1 = now;
  }
}

// Reads scp's terminal until scp has exited and its output is drained, sampling the wait times
// every 50 ms; stops scp after j.timeout seconds without output.
void watch_scp(int master, pid_t pid, const ScpJob& j, ScpWatch& w) {
  const bool server = j.server > 0;
  w.t0 = w.t1 = w.last_output = w.last_sample = w.t_start;
  for (;;) {
    pollfd p{master, POLLIN, 0};
    const int pr = ::poll(&p, 1, 50);
    const auto now = Clock::now();
    if (pr > 0 && !w.eof) read_scp_output(master, pid, j.server, now, w);
    if (!w.exited && now - w.last_sample >= std::chrono::milliseconds(50)) {
      if (w.metered) w.client_wait.sample(pid);
      if (server) w.server_wait.sample(j.server);
      w.last_sample = now;
    }
    if (!w.exited && ::wait4(pid, &w.status, w.eof ? 0 : WNOHANG, &w.ru) == pid) {
      w.exited = true;
      w.t_exit = now;
      if (!w.eof) w.t1 = now;
    }
    // Output drained: the end of the terminal (EIO), or, when a daemonized child holds it open,
    // quiet for a while after scp's exit. Not the first quiet 50 ms: the kernel moves a pty's
    // output to the reader asynchronously, and on a loaded machine scp's last meter line ("100%")
    // arrived later than that after its exit (the row was then taken for unmetered).
    if (w.exited && (w.eof || (pr == 0 && now - w.t_exit > std::chrono::seconds(2)))) break;
    if (!w.exited && !w.timed_out && now - w.last_output > std::chrono::duration<double>(j.timeout)) {
      w.timed_out = true;
      ::kill(pid, SIGTERM);
    }
  }
}

// Throws when scp did not succeed: ScpNotOffered when a side refused the cipher or MAC.
void check_scp_exit(const ScpWatch& w, const ScpJob& j) {
  const int status = WIFEXITED(w.status) ? WEXITSTATUS(w.status) : 128 + WTERMSIG(w.status);
  if (w.timed_out)
    throw std::runtime_error("scp: no output for " + std::to_string(int(j.timeout)) + " s, stopped");
  if (status != 0) {
    for (const char* refusal : {"no matching cipher found", "no matching MAC found"})
      if (w.out.find(refusal) != std::string::npos) throw ScpNotOffered(last_lines(w.out, 1));
    throw std::runtime_error("scp exited with status " + std::to_string(status) + ": " +
                             last_lines(w.out, 2));
  }
}

// The figures of a successful run: the meter's rate (or the whole run's), CPU and waits.
void scp_figures(ScpWatch& w, const ScpJob& j, ScpRun& r) {
  double mb = 0;
  r.metered = w.metered && parse_scp_meter(w.out, mb);
  if (!r.metered) {  // the whole run, set-up included
    w.t0 = w.t_start;
    w.c0 = 0;
    w.s0 = w.s_start;
  }
  r.window = std::chrono::duration<double>(w.t1 - w.t0).count();
  r.mb_s = r.metered ? mb : (r.window > 0 ? double(j.bytes) / r.window / 1e6 : 0);
  r.setup_s = r.metered  ? std::chrono::duration<double>(w.t0 - w.t_start).count()
              : w.authed ? std::chrono::duration<double>(w.t_auth - w.t_start).count()
                         : -1;
  const double cpu = double(w.ru.ru_utime.tv_sec + w.ru.ru_stime.tv_sec) +
                     double(w.ru.ru_utime.tv_usec + w.ru.ru_stime.tv_usec) / 1e6;
  r.client_cpu = std::max(0.0, cpu - w.c0);
  r.client_wait = w.client_wait.seconds();
  if (j.server > 0) {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!proc::children_of(j.server).empty() && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    r.server_cpu = std::max(0.0, proc::cpu_seconds_of(j.server, true) - w.s0);
    r.server_wait = w.server_wait.seconds();
  }
}

}  // namespace

ScpRun run_scp(const ScpJob& j, volatile pid_t* running) {
  const std::vector<std::string> argv = scp_argv(j);
  Pty pty;
  ScpWatch w;
  w.s_start = j.server > 0 ? proc::tree_cpu_seconds(j.server) : 0;
  w.s0 = w.s_start;
  if (j.server > 0) w.server_wait.start(j.server);
  w.t_start = Clock::now();
  proc::SpawnOptions so;
  so.argv = argv;
  so.tty = pty.slave.get();
  const pid_t pid = proc::spawn(so);
  *running = pid;
  pty.slave.reset();
  watch_scp(pty.master.get(), pid, j, w);
  *running = -1;

  ScpRun r;
  parse_ssh_kex(w.out, r.ssh_cipher, r.ssh_mac);
  check_scp_exit(w, j);
  scp_figures(w, j, r);
  return r;
}

}  // namespace aesxfer::app
