// `aesxfer bench --vs-scp`: the same file sent with `scp -c` next to aesxfer, to a
// HOST through the user's own ssh setup, or to a throwaway sshd on a loopback port with its own
// keys in a temporary folder. See app/lab/bench_scp.cpp for how each figure is taken.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace aesxfer::app {

// How an aesxfer cipher is sent with scp: OpenSSH's cipher of the same construction (the cipher
// row's `openssh` field, crypto/suite.h) and, for a cipher that is not an AEAD, kScpMac.
struct ScpCipher {
  const char* cipher;      // aesxfer's name
  const char* ssh_cipher;  // OpenSSH's name (scp -c), nullptr when OpenSSH never had one
  const char* ssh_mac;     // scp -o MACs=..., nullptr for an AEAD cipher
  const char* history;     // why a current OpenSSH lacks it, or nullptr
};

// OpenSSH's MAC of the construction of aesxfer's default MAC (HMAC-SHA256, encrypt-then-MAC).
inline constexpr const char* kScpMac = "hmac-sha2-256-etm@openssh.com";

// The entry for an aesxfer cipher name or alias; nullopt for a name the table does not know.
std::optional<ScpCipher> scp_cipher_for(const std::string& cipher);

// The rate on scp's last progress-meter line that reached 100% ("data 100% 256MB 182.3MB/s
// 00:01", binary units as scp prints them), converted to MB/s of 10^6 bytes. False when the
// output holds no such line.
bool parse_scp_meter(const std::string& output, double& mb_s);

// What ssh -v says was negotiated ("debug1: kex: client->server cipher: C MAC: M compression:
// none"). mac is "aead" when ssh says <implicit>. False when the line is missing.
bool parse_ssh_kex(const std::string& output, std::string& cipher, std::string& mac);

// A throwaway sshd: host and user keys made with ssh-keygen in `dir`, its own sshd_config
// (127.0.0.1 only, an ephemeral port, no PAM, no passwords, pid file none, the sftp subsystem,
// aes128-cbc added to the ciphers it offers), run in the foreground as a child (sshd -D) and
// stopped by its PID. client_config() is an ssh_config for `scp -F` that reaches it with the user
// key and checks its host key. As root, /run/sshd (the privilege separation directory sshd
// insists on) is created when missing, as the ssh service would.
class ThrowawaySshd {
 public:
  ThrowawaySshd(const std::filesystem::path& dir, const std::string& sshd, const std::string& ssh_keygen);
  ~ThrowawaySshd();
  ThrowawaySshd(const ThrowawaySshd&) = delete;
  ThrowawaySshd& operator=(const ThrowawaySshd&) = delete;

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  const std::filesystem::path& client_config() const { return client_config_; }
  std::string log_tail() const;
  int stop() noexcept;  // exit status, -1 when not running

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::filesystem::path log_, client_config_;
};

// One scp run.
struct ScpJob {
  std::string scp;                // path of scp
  std::vector<std::string> opts;  // scp options before bench's own (ssh's first value wins)
  std::string target;             // "HOST:/dev/null"
  std::string ssh_cipher;         // empty: scp's defaults
  std::string ssh_mac;            // empty: scp's defaults (or implied by an AEAD cipher)
  std::filesystem::path file;
  uint64_t bytes = 0;
  pid_t server = -1;    // a local sshd, whose CPU is counted (else -1)
  double timeout = 60;  // seconds without any output from scp before it is stopped
};

struct ScpRun {
  double mb_s = 0;      // from the progress meter, else bytes over the whole run
  bool metered = true;  // false: no meter, the time includes the connection set-up
  double setup_s = -1;  // scp started to its meter started, else to ssh's "Authenticated to"; -1 unknown
  double window = 0;    // seconds the CPU figures cover: meter start to scp's exit
  double client_cpu = 0, client_wait = -1;   // scp and its ssh, seconds
  double server_cpu = -1, server_wait = -1;  // the local sshd and its children, seconds
  std::string ssh_cipher, ssh_mac;           // as negotiated (ssh -v)
};

// scp failed because the cipher or MAC was not offered by one side.
struct ScpNotOffered : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs `scp -v [opts] -o BatchMode=yes -o ControlMaster=no -o ControlPath=none [-c C]
// [-o MACs=M] FILE TARGET` on a pseudo-terminal (scp shows its meter only on one) and measures it.
// *running holds scp's PID while it runs (for a signal handler). Throws ScpNotOffered or
// std::runtime_error (scp's last message) when scp fails.
ScpRun run_scp(const ScpJob& job, volatile pid_t* running);

}  // namespace aesxfer::app
