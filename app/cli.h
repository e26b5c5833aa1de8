// The pieces the CLI's commands share (app/main.cpp holds the table of commands): exit codes and
// the one-line error, HOST:PATH arguments, the options of send and recv and how the config file
// fills them in, and the lines that report a file. Each command is a setup function that declares
// its options on its CLI11 subcommand and returns what runs it (send_cmd.cpp, recv_cmd.cpp,
// server_cmd.cpp; the lab's commands in main.cpp).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "app/pacing.h"
#include "app/progress.h"
#include "client/client.h"
#include "client/remote.h"

namespace aesxfer::app {

constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

// "aesxfer: MSG" on stderr: every error the CLI prints has this shape. A message over about 1 KB
// (a path a server chose, 4 KB of blanks in a listing) keeps its first 384 and last 576 bytes,
// whole characters and escapes, and says how much went between, so that one line takes at most
// about 13 rows of an 80-column terminal and its "aesxfer:" head stays on the screen (a
// forty-eighth re-attack, C48-1: 3,693 bytes of a listed path's blanks scrolled the head away
// and left rows of the server's making that read as a file received).
std::string bounded_line(const std::string& msg);
void die_line(const std::string& msg);

// What runs a command once the command line is parsed: its exit status.
using CommandRun = std::function<int()>;
// The commands of app/*_cmd.cpp: each declares its options on `sub` and returns what runs it.
// no_aesni: the global --no-aesni, which the commands also take.
CommandRun setup_send(CLI::App* sub, bool& no_aesni);
CommandRun setup_recv(CLI::App* sub, bool& no_aesni);
CommandRun setup_serve(CLI::App* sub, bool& no_aesni);
CommandRun setup_keygen(CLI::App* sub, bool& no_aesni);
CommandRun setup_authorize(CLI::App* sub, bool& no_aesni);

// HOST:PATH on the command line (client/remote.h).
using client::parse_remote;
using client::Remote;

// What scp users type that means nothing here. An aesxfer server serves one root to every
// authorized key, so "user@" is ignored (with a note); "~" would be a file named "~" under the
// root, so it is refused with the form that works. A path the protocol refuses (absolute, but for
// `special`: /dev/null to send to, /dev/zero to fetch; a ".." component) is refused here, before
// anything moves, as the man page promises. Returns false after printing the error.
bool check_remote(const Remote& r, bool quiet, const std::string& special);
// The last name of a path, trailing "/" and "/." aside ("a/b/./" -> "b"): what is judged against the
// reserved shapes of aesxfer's own files (files::is_reserved_name) on either side.
std::string last_name(const std::string& path);
// " (...)" when r's path begins with digits and a colon (host:7720:f), which scp and aesxfer read as
// a path while its writer likely meant a port: said when the connection fails (a twentieth
// re-attack, N6). "" otherwise.
std::string port_in_path_hint(const Remote& r);
// For an argument that is not HOST:PATH because it holds an IPv6 address without brackets
// ("::1:f"): " (an IPv6 address goes in brackets: [::1]:f)"; "" otherwise.
std::string ipv6_hint(const std::string& arg);
// The name a source is stored under in a destination directory: its last component ("a/x" -> x,
// "dir/" and "dir/." -> dir); "" for the root and such ("", ".", "/").
std::string stored_name(const std::string& path);
// With several sources into one directory, two stored under one name would have the second
// overwrite the first (a thirteenth re-attack, H1; cp refuses the second). False, with one line
// naming both, when any two agree: nothing is moved (a usage error).
bool distinct_names(const char* verb, const std::vector<std::string>& shown,
                    const std::vector<std::string>& paths);

struct TransferOpts {
  std::string cipher = "aes128-gcm";
  std::string mac;
  uint16_t port = client::kDefaultPort;
  bool quiet = false;
  bool json = false;
  bool no_aesni = false;
  std::string keylog;
  double timeout = 30;
  bool recursive = false;                         // -r
  bool preserve = false;                          // -p
  bool resume = false;                            // --resume
  bool json_progress = false;                     // --json-progress
  double limit_kbit = 0;                          // -l, Kbit/s (0: none)
  int streams = 0;                                // --streams (0: auto)
  std::string congestion = "auto";                // --congestion
  std::string checksum = "xxh128";                // --checksum
  uint64_t record_size = proto::kDefaultPayload;  // --record-size
  int verbose = 0;                                // -v
  bool strict_host_keys = false;                  // --strict-host-keys
  int retries = 5;                                // --retries / Retries: new connections after a lost one
  // Retries since the last file reported: the next file reported is the one they served (the
  // one in flight when the connection was lost), and report() sets it back to 0 (a thirty-fifth
  // re-attack, B-N12: every later file of the session said "retries":1).
  mutable int retried = 0;
  std::string identity;                     // -i (else IdentityFile, else $AESXFER_HOME/id_ed25519)
  std::string config_file;                  // -F (else $AESXFER_HOME/config)
  std::vector<std::string> config_options;  // -o, repeatable
  std::set<std::string> given;              // long names of the options on the command line
};

// --retries: a connection lost after login (reset, closed, timed out) is replaced by a new one
// and the transfer goes on as --resume would, verifying what the other end kept: at most
// t.retries times in a command, after 1, 2, 4 ... (at most 30) seconds, each said on stderr. A
// refusal, a local error or a failed first connection is never retried.
// One Retrier serves a whole command (all its sources share the count); the caller adds each
// retry to TransferOpts::retried, which the next file's summary takes.
class Retrier {
 public:
  // Notes the start of the command (the coarse real-time clock, which stamps a file's ctime).
  explicit Retrier(int max);
  void logged_in() { logged_in_ = session_since_wait_ = true; }
  // True when `f` ended a connection worth replacing: a link failure after a login, with retries
  // left. During a retry also the server's "busy": most likely it still holds the lost session
  // (its lock on the partial file, its session slot) until it sees that connection die, which a
  // silent break hides until its idle timeout (30 s by default); waited out like the lost link (a
  // sixteenth re-attack, L1: the retry met "another transfer is writing this file" and the send
  // failed 3 s after the break, its retries unused).
  // Never a protocol violation or a record that fails authentication (Status::integrity): the
  // peer or the path broke the protocol, and a new connection meets the same (a twenty-third
  // re-attack, N4: a server's out-of-order answer was retried five times over 31 s).
  bool worth(const proto::Failure& f) const {
    if (!logged_in_ || used_ >= max_ || f.status == proto::Status::integrity) return false;
    return f.origin == proto::Origin::link ||
           (used_ > 0 && f.origin == proto::Origin::peer && f.status == proto::Status::busy);
  }
  // Says what was lost and waits before the next attempt (used() counts it). `resumable`: the
  // failed attempt ran as --resume (ClientOptions::resume), so what arrived of the file in
  // transfer was kept; else the next attempt starts that file again, and the line says so.
  void wait(const proto::Failure& f, bool resumable);
  int used() const { return used_; }
  // The retries not yet counted for a file: the next file reported takes them (the one in flight
  // when the connection was lost), and the count starts again from 0.
  int take() { return std::exchange(untaken_, 0); }
  // From a retry on, the transfer runs as with --resume, but (unless --resume was given) a get
  // offers only a destination this command wrote, one changed since the command started.
  void resume(client::ClientOptions& co) const;

 private:
  timespec started_{};
  int max_;
  int used_ = 0;
  int untaken_ = 0;
  bool logged_in_ = false;
  // A session logged in since the last wait, and whether the last one that did ran as --resume: an
  // attempt that could not connect keeps what the one before it left, and its line says so, never
  // "resuming" after an attempt that kept nothing (a fifty-eighth re-attack, H58-1: "cannot
  // connect ...; retry 2 of 5 in 2 s, resuming", and the file went again from byte 0).
  bool session_since_wait_ = false;
  bool kept_ = false;
};

// Whether the locale says the terminal reads UTF-8, from the first of LC_ALL, LC_CTYPE and LANG
// that is set and not empty (null or "" when unset): a codeset named UTF-8 (or utf8, any case).
// None set is the C locale: not UTF-8. The client commands then have proto::printable() escape
// every byte from 0x80 up, as OpenSSH's clients do (the server's log stays UTF-8).
bool locale_reads_utf8(const char* lc_all, const char* lc_ctype, const char* lang);

// -v: "debugN: line" on stderr for the lines of level N up to the -v count (-v, -vv).
std::function<void(int, const std::string&)> debug_sink(int verbose);

// The config file and -o for the host alias typed, under the command line: a value comes from
// the command line when it is given there, else from -o, else from the config file (the first
// value obtained). `host` becomes the address to connect to (HostName, else the alias); it also
// names the server in known_hosts. False after printing the one-line error.
bool apply_host_config(TransferOpts& t, const std::string& alias, std::string& host);

// Resolves -c/-m, prints the warnings weak choices deserve; exits on unknown names.
bool pick_suite(const TransferOpts& t, client::ClientOptions& co);

// What one file's transfer shows while it moves: the progress line, the JSON progress lines and
// the rate limit, fed by the client's start and progress callbacks (bytes a resume skipped are
// neither shown as moved nor paced).
struct FileMeter {
  app::Progress& prog;
  app::JsonProgress& jp;
  app::RateLimiter& limiter;
  const client::Client& client;
  bool replaced = true;  // the summary line follows on the meter's stream and takes its line
  uint64_t last = 0;

  std::function<void(uint64_t)> on_start() {
    return [this](uint64_t n) {
      last = client.resume_offset();
      prog.start(n, last);
      jp.start(n, last);
    };
  }
  net::ProgressFn on_progress() {
    return [this](uint64_t d) {
      limiter.consume(d - last);
      last = d;
      prog.update(d);
      jp.update(d);
    };
  }
  void finish(const client::FileResult& r) {
    prog.finish(r.bytes, r.seconds, replaced);
    jp.finish(r.bytes, r.seconds);
  }
};

// The summary line of a file (or its JSON object with --json), and with -v its records.
void report(const TransferOpts& t, const client::ClientOptions& co, const client::FileResult& r,
            bool tty_progress, std::FILE* out = stdout);

// A pipelined file's verdict (client/pipeline.h), when its answers arrive: its 100% line and
// report as `shown`, or its failure line (rc becomes 1; the other files go on), with json_failed's
// lines (`jp` as there).
void report_pipelined(const TransferOpts& t, const client::ClientOptions& co, bool tty,
                      const std::string& shown, const client::FileResult* r, const proto::Failure* f, int& rc,
                      app::JsonProgress* jp = nullptr, std::FILE* out = stdout);

// A file an earlier file's failure kept from moving (the session ended): its line and, with
// --json, its object, as report_pipelined gives a failure ("not sent" or "not fetched").
void report_not_moved(const TransferOpts& t, const client::ClientOptions& co, bool tty,
                      const std::string& shown, const char* not_moved, int& rc,
                      const std::string& why = "the session ended when an earlier file failed");

// With --json, the object of a file that failed: {file, [file_hex], error, verified: false}; with
// --json-progress, its final line, from `jp` when the file had a meter, else from a new one.
// `out`: where --json goes (standard error when the data goes to standard output). `total`: the
// file's size if known though it never started (proto::Failure::size), for "total_bytes".
void json_failed(const TransferOpts& t, const std::string& file, const std::string& error,
                 app::JsonProgress* jp = nullptr, std::FILE* out = stdout,
                 uint64_t total = proto::Failure::kNoSize);

// A failure that ends the command before every source was reported (a connection or a login that
// failed, a lost link with no retry left): its line once and, with --json, an object for each
// source in `unreported`, so a script learns of every source it named (a twenty-seventh
// re-attack, N2: send, several-source recv and recv -r printed none). Without --json, such sources
// of a command that named `several` are named on a second line ("not fetched: a, b (the session
// ended)"; `not_moved` says which way), which the failure's own words need not do (a fifty-third
// re-attack's note: a server's protocol error among several sources named none of them; the
// fifty-sixth session: nor "cannot connect" when one source of several was left). Returns kExitFail.
int end_with_unreported(const TransferOpts& t, const proto::Failure& f,
                        const std::vector<std::string>& unreported, const char* not_moved, bool several);

// send and recv share these options.
void add_transfer_options(CLI::App* sub, TransferOpts& t, bool& no_aesni);
// A timeout or a duration: seconds, more than 0 and at most a year.
CLI::Validator timeout_seconds();
// scp's -p (preserve) followed by what was meant as a port (scp's is -P): main notes the words
// right after -p (alone or ending a cluster of flags, -rp) before parsing; port_after_lower_p is
// the line for a missing source that is such a number ("45201: no such file; the port is -P
// 45201 ..."), or "".
void note_words_after_lower_p(int argc, char** argv);
// A failure's line with a hint ("(use -r)") after its reason, before the port that a remote
// file's line ends with (client::Client::port_note()).
std::string with_hint(const std::string& what, const std::string& hint);
std::string port_after_lower_p(const std::string& arg);
// The long names of the options given on sub's command line (so that the config file and -o
// fill in only the others).
std::set<std::string> given_options(const CLI::App* sub);

}  // namespace aesxfer::app
