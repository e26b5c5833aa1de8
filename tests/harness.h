// Process and relay harness for the end-to-end and fault tests: runs the aesxfer binary as a
// child process (stdout/stderr captured, environment overridden, killed on timeout), keeps an
// `aesxfer serve` running for the length of a test, and relays a TCP connection on 127.0.0.1
// while tampering with the client->server record stream.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace aesxfer::test {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Files and directories

// A fresh directory under the system temp directory, removed (recursively) on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "aesxfer");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }

 private:
  fs::path path_;
};

// A test's directories: home/ ($AESXFER_HOME shared by client and server), root/ (the server's
// --root) and local/ (the client's files), inside one TempDir.
struct Workspace {
  TempDir tmp{"aesxfer-test"};
  fs::path home, root, local;
  Workspace();
};

// "Another local user" for the tests, which run as root: uid and gid 65534 (nobody).
constexpr uid_t kNobody = 65534;
// Gives `p` and everything below it to uid/gid `who`, without following a symbolic link (throws).
void chown_tree(const fs::path& p, uid_t who);
// Before a server runs as `who` (ServerProcess's as_user): the client gets a home and key of its
// own, authorized in ws.home, and ws.home and ws.root become who's (throws).
void hand_over(const Workspace& ws, uid_t who);
// The client's home: ws.home, or after hand_over the client's own.
fs::path client_home(const Workspace& ws);

// Another local user's ground in a directory shared with this one, as /tmp is: base/shared
// (sticky, world-writable) beside base/PRIVATE (this user's, 0700), where the other user plants
// symbolic links (made by the constructor's directories; throws).
struct StickyShare {
  fs::path shared, priv;
  explicit StickyShare(const fs::path& base, const std::string& private_name = "private");
  // A symbolic link shared/name -> target, owned by uid and gid `who`; returns its path.
  fs::path link(const std::string& name, const fs::path& target, uid_t who = kNobody) const;
};

// A directory `at` that another user made (theirs, mode 0777, group `gid`), in a sticky directory the
// caller made: what the planted-directory rules refuse (files::planted_by). Returns `at`; throws
// when it cannot be made so.
fs::path plant_directory(const fs::path& at, uid_t who = kNobody, gid_t gid = kNobody);

// Lower-case hex SHA-256 of a file's contents (OpenSSL); throws when it cannot be read.
std::string sha256_file(const fs::path& p);
// The first word a reference tool (/usr/bin/xxh128sum, sha256sum) prints for a file.
std::string tool_hex(const std::string& tool, const fs::path& file);
// Deterministic pseudo-random contents (seeded), written in chunks.
void write_random_file(const fs::path& p, uint64_t size, uint64_t seed);
void write_text_file(const fs::path& p, const std::string& text);
std::string read_text_file(const fs::path& p);
// The non-empty lines of s.
std::vector<std::string> nonempty_lines(const std::string& s);
// Files in dir (not recursive) whose name matches ".*.aesxfer-*": leftovers of a receiver.
std::vector<fs::path> temp_debris(const fs::path& dir);
// Sets a file's access and modification times `days` days (and a minute) into the past, without
// following a symbolic link; throws when it cannot.
void make_old(const fs::path& p, long days);

// A JSON object ({"k":"v","n":1.5,"b":true}) as key -> text (strings unescaped, numbers and
// literals as nlohmann-json prints them: integers exactly); a nested object's members also as
// "key.member", and nested objects and arrays as compact JSON; nullopt when the line is not one
// strict JSON object (parse_json_strict in tests/test_util.h).
std::optional<std::map<std::string, std::string>> parse_flat_json(const std::string& line);

// The JSON naming scheme (docs/aesxfer.1, JSON OUTPUT) checked over a whole document, nested
// objects and objects inside arrays included: snake_case keys; rates are mb_per_s or start with
// mb_per_s_; no abbreviated or older unit names (mb_s, a lone s, elapsed, a bare total). One entry
// per key that breaks it ("path.key: why"); `doc` is JSON text (it must parse).
std::vector<std::string> json_scheme_problems(const std::string& doc);

// The charts' one encoding (app/lab/svg.h) checked over several SVG documents: every element with
// a data-family (bars, lines, legend keys) gives its family the same colour in every document, no
// two families share a colour, a dash appears only on data-portable elements, only AES families
// are portable, and a line or bar whose title says "(no AES-NI)" is portable. One entry per breach.
std::vector<std::string> chart_encoding_problems(const std::vector<std::string>& docs);

// A core made busy on purpose: the calling thread is pinned to the CPU it runs on, and a thread
// spinning on that same CPU competes with it (and with the processes it starts, which inherit the
// pinning) for as long as the object lives. The destructor stops the spinner and restores the
// calling thread's CPU set.
class BusyCore {
 public:
  BusyCore();
  ~BusyCore();
  BusyCore(const BusyCore&) = delete;
  BusyCore& operator=(const BusyCore&) = delete;
  int cpu() const { return cpu_; }

 private:
  int cpu_ = 0;
  std::vector<unsigned char> old_set_;  // the caller's cpu_set_t before
  std::atomic<bool> stop_{false};
  std::thread spinner_;
};

// ---------------------------------------------------------------------------------------------
// Processes

struct ProcResult {
  int exit_code = -1;      // exit status, or 128 + signal when killed by a signal
  bool timed_out = false;  // killed by the harness after the timeout
  std::string out, err;
  // Everything a failed assertion should show.
  std::string describe() const;
};

// Runs argv[0] (a path) with argv, the current environment plus `env` overrides, stdin from
// /dev/null; captures stdout and stderr. SIGKILLs it after timeout_s seconds.
ProcResult run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                       double timeout_s = 120);

// Runs the aesxfer binary (AESXFER_BINARY) with args and AESXFER_HOME=home.
// The environment of a server process with an LD_PRELOAD probe (tests/rename_probe.cpp and the
// like) and `extra`: ASan is told not to insist on being first in the link order.
inline std::map<std::string, std::string> preload_env(const std::string& library,
                                                      std::map<std::string, std::string> extra = {}) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string before = asan ? asan : "";
  extra["LD_PRELOAD"] = library;
  extra["ASAN_OPTIONS"] = before + (before.empty() ? "" : ":") + "verify_asan_link_order=0";
  return extra;
}

ProcResult run_aesxfer(const std::vector<std::string>& args, const fs::path& home, double timeout_s = 120);

// A client running as uid 65534 (nobody), with a home and key of its own (ws.tmp/nobody-home),
// its key authorized in ws.home, and ws.tmp made passable (0711). Throws when it cannot be made.
struct NobodyClient {
  fs::path home;
  explicit NobodyClient(const Workspace& ws);
  // The aesxfer binary with args, as that user, AESXFER_HOME=home.
  ProcResult run(const std::vector<std::string>& args, double timeout_s = 120) const;
};

// `aesxfer serve --listen 127.0.0.1 -P 0 --root ROOT --port-file ...` with AESXFER_HOME=home.
// The constructor returns once the port file exists (throws if the server exits or takes more
// than 10 s). The destructor stops the server by its PID: SIGTERM, then SIGKILL after 5 s.
class ServerProcess {
 public:
  // With as_user (a uid other than 0), the server drops to that user and group (and no
  // supplementary groups) before it runs: a root test's way to a server that permissions bind.
  // extra_env is added to its environment (an LD_PRELOAD probe). log_path: where its stderr (its
  // log) goes, when not a file of its own temporary directory (a log on a file system a test fills).
  ServerProcess(const fs::path& home, const fs::path& root, const std::vector<std::string>& extra_args = {},
                uid_t as_user = 0, const std::map<std::string, std::string>& extra_env = {},
                const fs::path& log_path = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // True while the process has not exited.
  bool running();
  // The server's stderr (its log) so far.
  std::string log() const;
  // Waits until log() contains `needle` `times` times (true) or timeout_s passes (false). The
  // server logs a request after its client may have exited: read the log after waiting for it.
  bool wait_for_log(const std::string& needle, double timeout_s = 5, size_t times = 1) const;
  // Sends SIGTERM and waits (20 s, then SIGKILL); returns the exit code (128 + signal when killed).
  // Idempotent.
  int stop();

 private:
  TempDir dir_{"aesxfer-srv"};
  fs::path err_path_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  int exit_code_ = -1;
};

// Sanitizer reports (ASan, LSan, UBSan, TSan) found in a process's stderr, or "".
std::string sanitizer_findings(const std::string& log);

// ---------------------------------------------------------------------------------------------
// TCP helpers (127.0.0.1 only)

// A port on 127.0.0.1 with nothing listening on it: bound, read, closed.
uint16_t unused_port();
// Connects to 127.0.0.1:port; returns the socket or -1.
int connect_loopback(uint16_t port);

// Connects to 127.0.0.1:port from the loopback address `from` (any of 127/8, "127.0.0.2" to be
// another source than the real clients); returns the socket or -1.
int connect_loopback_from(uint16_t port, const std::string& from);

// A hostile client for the startups pool: holds `n` TCP connections to 127.0.0.1:port from `from` that
// never send a byte, and reopens at once each one the server closes (its handshake deadline, a
// busy refusal), on its own thread, until destroyed.
class IdleFlood {
 public:
  IdleFlood(uint16_t port, int n, const std::string& from = "127.0.0.1");
  ~IdleFlood();
  IdleFlood(const IdleFlood&) = delete;
  IdleFlood& operator=(const IdleFlood&) = delete;
  int held() const { return held_.load(); }        // connections open now
  int renewed() const { return renewed_.load(); }  // reopened after the server closed them
  // Waits until `n` connections are open (true) or timeout_s passes.
  bool wait_held(double timeout_s) const;

 private:
  void run();
  uint16_t port_;
  int n_;
  std::string from_;
  std::atomic<bool> stop_{false};
  std::atomic<int> held_{0}, renewed_{0};
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Relay

enum class FaultKind { none, flip, drop, replay, swap, cut };
enum class RecordPart { header, body, tag };

struct FaultSpec {
  FaultKind kind = FaultKind::none;
  // Index of the client->server record to act on; 0 is the first record after the handshake
  // (the client's first request), so for a single put, records 1..n carry the file's data.
  size_t record = 1;
  // flip: which byte (offset within the part) and the XOR mask.
  RecordPart part = RecordPart::body;
  size_t offset = 0;
  uint8_t mask = 0x01;
  // cut: close both sides once this many bytes of records (after the handshake) went through.
  uint64_t cut_after = 0;
  // Independently of `kind`: close both sides once this many bytes (handshake included) went
  // from the server to the client; 0 = never. Lets a get be cut while the client is receiving.
  uint64_t cut_s2c_after = 0;
  // Independently of `kind`: XOR 0x01 into the server->client byte at this offset (handshake
  // included, counted from 1; 0 = never). With cipher and MAC none this corrupts file data that
  // only the end record's SHA-256 can catch.
  uint64_t flip_s2c_at = 0;
  // Bytes of tag after each record's body: 16 for aes128-gcm, 32 for hmac-sha256, 0 for none.
  size_t tag_len = 16;
  // Keep a copy of every byte the client sent (Relay::captured_c2s); for small sessions only.
  bool capture_c2s = false;
};

// Listens on 127.0.0.1 (ephemeral port), accepts one client, connects it to
// 127.0.0.1:server_port and forwards both directions, applying `spec` to the client->server
// stream, parsed as two handshake frames (u32 BE length + bytes) and then records (8-byte
// header, u32 BE body length at offset 0, body, tag). Runs on its own thread, which ends when
// either side closes, after the fault cut the connection, or on destruction (joined there).
class Relay {
 public:
  Relay(uint16_t server_port, const FaultSpec& spec);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  uint16_t port() const { return port_; }
  // True once the fault has been carried out on the stream.
  bool fault_applied() const { return applied_.load(); }
  // Records seen from the client so far.
  size_t records_seen() const { return records_.load(); }
  // Bytes forwarded from the server to the client so far (handshake included).
  uint64_t s2c_bytes() const { return s2c_total_.load(); }
  // Waits for the relay thread to end (true) or timeout_s (false).
  bool wait_done(double timeout_s) const;
  // With spec.capture_c2s: every byte the client sent so far, as it came off the wire.
  std::vector<uint8_t> captured_c2s() const;

 private:
  void run();
  uint16_t server_port_;
  FaultSpec spec_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<bool> applied_{false};
  std::atomic<size_t> records_{0};
  std::atomic<uint64_t> s2c_total_{0};
  mutable std::mutex captured_mu_;
  std::vector<uint8_t> captured_;
  std::thread thread_;
};

}  // namespace aesxfer::test
