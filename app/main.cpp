// aesxfer: encrypted file transfer over TCP with a cipher of the user's choice.
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "app/host_config.h"
#include "app/json.h"
#include "app/lab/bench.h"
#include "app/lab/speed.h"
#include "app/pacing.h"
#include "app/progress.h"
#include "client/client.h"
#include "client/pipeline.h"
#include "client/recv_tree.h"
#include "crypto/aes.h"
#include "crypto/cpu.h"
#include "crypto/suite.h"
#include "files/atomic_file.h"
#include "files/keystore.h"
#include "proto/init.h"
#include "server/server.h"

namespace fs = std::filesystem;
using namespace aesxfer;

namespace {

constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

void die_line(const std::string& msg) { std::fprintf(stderr, "aesxfer: %s\n", msg.c_str()); }

struct Remote {
  std::string host;
  std::string path;
  std::string user;  // "user@host:path": accepted for scp users' habits, and ignored (see below)
};

// "host:path", "[v6addr]:path", either with "user@" before it; nullopt when the argument names
// no host (a local path).
std::optional<Remote> parse_remote(const std::string& arg) {
  std::string s = arg, user;
  const size_t at = s.find('@'), colon0 = s.find(':'), slash0 = s.find('/');
  if (at != std::string::npos && at > 0 && colon0 != std::string::npos && at < colon0 &&
      (slash0 == std::string::npos || at < slash0)) {
    user = s.substr(0, at);
    s = s.substr(at + 1);
  }
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return std::nullopt;
    Remote r{s.substr(1, close - 1), s.substr(close + 2), user};
    if (r.path.empty()) r.path = ".";
    return r;
  }
  size_t colon = s.find(':');
  size_t slash = s.find('/');
  if (colon == std::string::npos || colon == 0 || (slash != std::string::npos && slash < colon))
    return std::nullopt;
  Remote r{s.substr(0, colon), s.substr(colon + 1), user};
  if (r.path.empty()) r.path = ".";  // "host:" is the server's root, as scp's is the home directory
  return r;
}

// What scp users type that means nothing here. An aesxfer server serves one root to every
// authorized key, so "user@" is ignored (with a note); "~" would be a file named "~" under the
// root, so it is refused with the form that works. Returns false after printing the error.
bool check_remote(const Remote& r, bool quiet) {
  if (!r.user.empty() && !quiet)
    std::fprintf(stderr,
                 "aesxfer: note: '%s@' is ignored: the server has one root for every authorized key\n",
                 net::printable(r.user).c_str());
  if (!r.path.empty() && r.path[0] == '~') {
    die_line(net::printable(r.host + ":" + r.path) +
             ": '~' has no meaning here: paths are relative to the server's --root (write " +
             net::printable(r.host) + ":" +
             net::printable(r.path.substr(r.path.find('/') == std::string::npos ? r.path.size()
                                                                                : r.path.find('/') + 1)) +
             ")");
    return false;
  }
  return true;
}

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
  std::string checksum = "xxh128";                // --checksum
  uint64_t record_size = proto::kDefaultPayload;  // --record-size
  int verbose = 0;                                // -v
  bool strict_host_keys = false;                  // --strict-host-keys
  std::string identity;                           // -i (else IdentityFile, else $AESXFER_HOME/id_ed25519)
  std::string config_file;                        // -F (else $AESXFER_HOME/config)
  std::vector<std::string> config_options;        // -o, repeatable
  std::set<std::string> given;                    // long names of the options on the command line
};

// -v: "debugN: line" on stderr for the lines of level N up to the -v count (-v, -vv).
std::function<void(int, const std::string&)> debug_sink(int verbose) {
  if (verbose <= 0) return nullptr;
  return [verbose](int level, const std::string& line) {
    if (level <= verbose) std::fprintf(stderr, "debug%d: %s\n", level, line.c_str());
  };
}

// The config file and -o for the host alias typed, under the command line: a value comes from
// the command line when it is given there, else from -o, else from the config file (the first
// value obtained). `host` becomes the address to connect to (HostName, else the alias); it also
// names the server in known_hosts. False after printing the one-line error.
bool apply_host_config(TransferOpts& t, const std::string& alias, std::string& host) {
  client::HostConfig c;
  std::string from;
  try {
    c = app::load_host_config(t.config_file, files::aesxfer_home(), t.config_options, alias, &from);
  } catch (const client::ConfigError& e) {
    die_line(e.what());
    return false;
  }
  const auto debug = debug_sink(t.verbose);
  if (debug && !from.empty()) debug(1, "reading configuration " + net::printable(from));
  if (debug)
    for (const auto& a : c.applied) debug(1, a + ": applying options for " + net::printable(alias));
  const auto cli = [&](const char* name) { return t.given.count(name) > 0; };
  host = c.hostname.value_or(alias);
  if (debug && c.hostname) debug(1, net::printable(alias) + ": HostName " + net::printable(host));
  if (c.port && !cli("port")) t.port = *c.port;
  if (c.cipher && !cli("cipher")) t.cipher = *c.cipher;
  if (c.mac && !cli("mac")) t.mac = *c.mac;
  if (c.streams && !cli("streams")) t.streams = *c.streams;
  if (c.checksum && !cli("checksum")) t.checksum = *c.checksum;
  if (c.record_size && !cli("record-size")) t.record_size = *c.record_size;
  if (c.timeout && !cli("timeout")) t.timeout = *c.timeout;
  if (c.strict_host_keys && !cli("strict-host-keys")) t.strict_host_keys = *c.strict_host_keys;
  if (c.identity_file && !cli("identity")) t.identity = *c.identity_file;
  if (!t.identity.empty()) t.identity = client::expand_tilde(t.identity, app::user_home());
  return true;
}

// Resolves -c/-m, prints the warnings weak choices deserve; exits on unknown names.
bool pick_suite(const TransferOpts& t, client::ClientOptions& co) {
  co.cipher = crypto::find_cipher(t.cipher);
  if (!co.cipher) {
    die_line("unknown cipher '" + t.cipher + "' (known: " + crypto::cipher_names() + ")");
    return false;
  }
  std::string mac = t.mac.empty() ? (co.cipher->aead ? "none" : "hmac-sha256") : t.mac;
  co.mac = crypto::find_mac(mac);
  if (!co.mac) {
    die_line("unknown MAC '" + mac + "' (known: " + crypto::mac_names() + ")");
    return false;
  }
  if (co.cipher->aead && co.mac->tag_len && !t.mac.empty())
    std::fprintf(stderr, "aesxfer: note: %s authenticates itself; -m %s is ignored\n", co.cipher->name,
                 co.mac->name);
  if (co.cipher->legacy && co.cipher->mode != crypto::CipherMode::none && !t.quiet)
    std::fprintf(stderr, "aesxfer: warning: %s is a legacy cipher, offered for comparison only\n",
                 co.cipher->name);
  if (co.cipher->mode == crypto::CipherMode::none && !t.quiet)
    std::fprintf(stderr, "aesxfer: warning: cipher none: data crosses the network unencrypted\n");
  if (!co.cipher->aead && co.mac->tag_len == 0 && !t.quiet)
    std::fprintf(stderr, "aesxfer: warning: MAC none: data is unauthenticated (raw speed test only)\n");
  if (!crypto::find_checksum(t.checksum, co.checksum)) {
    die_line("unknown checksum '" + t.checksum + "' (known: " + crypto::checksum_names() + ")");
    return false;
  }
  if (co.checksum == crypto::ChecksumAlg::none && !t.quiet)
    std::fprintf(stderr,
                 "aesxfer: warning: checksum none: no end-to-end check of the file beyond the record %s\n",
                 co.cipher->aead || co.mac->tag_len ? "authentication" : "layer (and MAC none: none at all)");
  co.record_size = uint32_t(t.record_size);
  co.port = t.port;
  co.home = files::aesxfer_home();
  co.identity = t.identity;
  co.debug = debug_sink(t.verbose);
  co.keylog = t.keylog;
  co.strict_host_keys = t.strict_host_keys;
  co.announce_new_host = !t.quiet;
  co.timeout = std::chrono::milliseconds(int64_t(t.timeout * 1000));
  co.preserve = t.preserve;
  co.resume = t.resume;
  co.fine_progress = t.limit_kbit > 0 || t.json_progress;
  co.streams = t.streams;
  co.paced = t.limit_kbit > 0;
  return true;
}

// The file's checksum as --json shows it: {"alg", "hex"} for a file that moved as one stream (hex
// is what xxh128sum / sha256sum print), {"alg", "ranges": [{offset, length, hex}]} for --streams.
app::Json checksum_json(const client::ClientOptions& co, const client::FileResult& r) {
  app::Json j;
  j["alg"] = crypto::checksum_name(co.checksum);
  if (r.ranges.empty()) {
    j["hex"] = r.checksum.hex();
    return j;
  }
  j["ranges"] = app::Json::array();
  for (const auto& range : r.ranges)
    j["ranges"].push_back(
        {{"offset", range.offset}, {"length", range.length}, {"hex", range.checksum.hex()}});
  return j;
}

static_assert(client::kUnknownSize == app::kUnknownTotal, "send -: the client's unknown size is the meter's");

// What one file's transfer shows while it moves: the progress line, the JSON progress lines and
// the rate limit, fed by the client's start and progress callbacks (bytes a resume skipped are
// neither shown as moved nor paced).
struct FileMeter {
  app::Progress& prog;
  app::JsonProgress& jp;
  app::RateLimiter& limiter;
  const client::Client& client;
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
    prog.finish(r.bytes, r.seconds);
    jp.finish(r.bytes);
  }
};

void report(const TransferOpts& t, const client::ClientOptions& co, const client::FileResult& r,
            bool tty_progress, std::FILE* out = stdout) {
  const char* mac = co.cipher->aead ? "aead" : co.mac->name;
  double mbps = r.seconds > 0 ? double(r.bytes - r.resumed_from) / r.seconds / 1e6 : 0;  // this run's rate
  if (t.json) {
    app::Json j;
    app::set_name(j, "file", r.file);
    j["bytes"] = r.bytes;
    j["seconds"] = app::rounded(r.seconds, 6);
    j["mb_per_s"] = app::rounded(mbps, 2);
    j["cipher"] = co.cipher->name;
    j["mac"] = mac;
    j["impl"] = crypto::cipher_impl_name(*co.cipher);
    j["verified"] = r.verified;
    j["resumed_from"] = r.resumed_from;
    j["streams"] = r.streams;
    j["record_size"] = r.record_size;
    j["checksum"] = checksum_json(co, r);
    std::fputs(app::json_line(j).c_str(), out);
  } else if (!t.quiet) {
    (void)tty_progress;
    std::string sum;
    if (t.verbose > 0) {
      sum = std::string(", ") + crypto::checksum_name(co.checksum);
      if (r.ranges.empty())
        sum += r.checksum.len ? " " + r.checksum.hex() : "";
      else
        sum += " per range (" + std::to_string(r.ranges.size()) + " streams)";
    }
    // A resumed transfer: where it resumed, and the rate of the bytes that moved in this run.
    std::string resumed;
    if (r.resumed_from > 0)
      resumed = ", resumed at byte " + std::to_string(r.resumed_from) + ", " +
                std::to_string(r.bytes - r.resumed_from) + " moved";
    // With --json-progress standard output carries JSON only: the summary line goes to stderr.
    std::FILE* human = t.json_progress ? stderr : out;
    if (r.bytes > 0 && r.resumed_from == r.bytes) {  // --resume found it whole and identical
      std::fprintf(human, "%s: %llu bytes, up to date (size and checksum match), nothing moved%s\n",
                   net::printable(r.file).c_str(), (unsigned long long)r.bytes, sum.c_str());
      std::fflush(human);
      return;
    }
    std::fprintf(human, "%s: %llu bytes%s in %.2f s, %.1f MB/s (%s, %s, %s%s)\n",
                 net::printable(r.file).c_str(), (unsigned long long)r.bytes, resumed.c_str(), r.seconds,
                 mbps, co.cipher->name, mac, crypto::cipher_impl_name(*co.cipher).c_str(), sum.c_str());
  }
  std::fflush(out);
  if (co.debug && r.record_size)
    co.debug(1, net::printable(r.file) + ": " + std::to_string(r.streams) +
                    (r.streams == 1 ? " stream" : " streams") + ", " +
                    std::to_string((r.bytes - r.resumed_from + r.record_size - 1) / r.record_size) +
                    " records of up to " + std::to_string(r.record_size) + " bytes");
}

// A pipelined file's verdict (client/pipeline.h), when its answers arrive: its 100% line and
// report as `shown`, or its failure line (rc becomes 1; the other files go on).
void report_pipelined(const TransferOpts& t, const client::ClientOptions& co, bool tty,
                      const std::string& shown, const client::FileResult* r, const net::Failure* f, int& rc) {
  if (f) {
    die_line(f->what());
    rc = kExitFail;
    return;
  }
  client::FileResult res = *r;
  res.file = shown;
  app::Progress prog(net::printable(fs::path(shown).filename().string()), tty);
  app::JsonProgress jp(shown, t.json_progress);
  prog.start(res.bytes);
  jp.start(res.bytes, 0);
  prog.finish(res.bytes, res.seconds);
  jp.finish(res.bytes);
  report(t, co, res, tty);
}

// The local sources of a send, checked before connecting (scp semantics): one that is missing or
// unreadable is reported in one line (rc becomes 1), the others still go. "-" is standard input,
// read as it comes when its turn comes (an unsized put, docs/PROTOCOL.md 3.3); given once.
std::vector<std::string> check_sources(const std::vector<std::string>& args, const TransferOpts& t, int& rc) {
  std::vector<std::string> sources;
  bool dash = false;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "-") {
      if (dash) {
        die_line("send: - (standard input) given twice");
        rc = kExitFail;
        continue;
      }
      dash = true;
      sources.push_back(args[i]);
      continue;
    }
    struct stat st {};
    if (::stat(args[i].c_str(), &st) != 0) {
      die_line(net::printable(args[i]) + ": " + files::errno_text(errno));
      rc = kExitFail;
      continue;
    }
    if (S_ISDIR(st.st_mode) && !t.recursive) {
      die_line(net::printable(args[i]) + ": is a directory (use -r)");
      rc = kExitFail;
      continue;
    }
    if (!S_ISDIR(st.st_mode) && ::access(args[i].c_str(), R_OK) != 0) {
      die_line(net::printable(args[i]) + ": " + files::errno_text(errno));
      rc = kExitFail;
      continue;
    }
    sources.push_back(args[i]);
  }
  return sources;
}

// The files of one send over one connection.
struct SendSession {
  const TransferOpts& t;
  const client::ClientOptions& co;
  client::Client& client;
  bool tty;
  app::RateLimiter limiter{t.limit_kbit};
  int rc = 0;
  // Small files go pipelined (docs/PROTOCOL.md, "Pipelining"); a large one, or any with --resume
  // or -l, waits for the pipeline to empty and goes on its own.
  client::Pipeline pipeline{client};

  // A pipelined file's verdict, when its answers arrive: the report line, or the failure line.
  client::Pipeline::Done verdict(const std::string& shown) {
    return [this, shown](const client::FileResult* r, const net::Failure* f) {
      report_pipelined(t, co, tty, shown, r, f, rc);
    };
  }

  // One file, pipelined when it is small; false when a failure stopped the connection. probed:
  // --resume found nothing to resume from (the file goes whole, pipelined when small).
  bool send_file(const fs::path& local, const std::string& to, bool probed = false) {
    struct stat st {};
    try {
      if (::stat(local.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          pipeline.can_put(uint64_t(st.st_size), probed)) {
        pipeline.put(local, to, "", verdict(local.string()));
        return true;
      }
      pipeline.drain();
    } catch (const net::Failure& f) {  // the connection failed: nothing more goes
      die_line(f.what());
      rc = kExitFail;
      return false;
    }
    return send_one(local, to) || client.can_continue();
  }

  // Waits for the answers still due; false when the connection failed meanwhile.
  bool finish() {
    try {
      pipeline.drain();
      return true;
    } catch (const net::Failure& f) {
      die_line(f.what());
      rc = kExitFail;
      return false;
    }
  }

  // One file moved by `put` (given the meter's callbacks) and reported; false after a failure (the
  // connection may be mid-stream: stop there). The progress line is on `prog_out` when `shown`.
  template <class Put>
  bool metered(app::Progress& prog, app::JsonProgress& jp, bool shown, std::FILE* prog_out, const Put& put) {
    FileMeter meter{prog, jp, limiter, client};
    try {
      client::FileResult r = put(meter);
      meter.finish(r);
      report(t, co, r, tty);
      return true;
    } catch (const net::Failure& f) {
      if (shown) std::fputc('\n', prog_out);
      die_line(f.what());
      rc = kExitFail;
      return false;
    }
  }

  bool send_one(const fs::path& local, const std::string& to) {
    app::Progress prog(net::printable(local.filename().string()), tty);
    app::JsonProgress jp(local.string(), t.json_progress);
    return metered(prog, jp, tty, stdout,
                   [&](FileMeter& m) { return client.put(local, to, m.on_start(), m.on_progress()); });
  }

  // send -: standard input as it comes, under the name "stdin" in a directory; its progress line
  // (bytes and rate, no total) goes to stderr. False when a failure stopped the connection.
  bool send_stdin(const std::string& to) {
    if (!finish()) return false;
    const bool err_tty = !t.quiet && !t.json && !t.json_progress && ::isatty(STDERR_FILENO);
    app::Progress prog("stdin", err_tty, stderr);
    app::JsonProgress jp("-", t.json_progress);
    return metered(prog, jp, err_tty, stderr,
                   [&](FileMeter& m) {
                     client::FileResult r =
                         client.put_stream(STDIN_FILENO, to, "stdin", m.on_start(), m.on_progress());
                     r.file = "-";
                     return r;
                   }) ||
           client.can_continue();
  }

  // -r --resume (docs/PROTOCOL.md 3.6, protocol 4): the directories and a probe of every file
  // pipelined first (one round trip for the tree), then only what the server lacks: a file it
  // holds whole and identical is reported as resumed at its end and not sent, one with a kept
  // partial file is resumed (put asks again and checks the prefix), the rest goes whole
  // (pipelined when small). False when a failure stopped the connection.
  bool send_resumed(const std::vector<app::TreeEntry>& entries, const std::string& base,
                    const client::Pipeline::DirDone& dir_failed) {
    std::vector<std::optional<proto::Message>> said(entries.size());
    auto to = [&](const app::TreeEntry& e) { return base == "." ? e.rel : base + "/" + e.rel; };
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      struct stat st {};
      if (e.dir)
        pipeline.mkdir(to(e), e.mode, e.mtime, false, dir_failed);
      else if (::stat(e.local.c_str(), &st) == 0 && S_ISREG(st.st_mode))  // else the put says why
        pipeline.probe(to(e), e.local.filename().string(), uint64_t(st.st_size),
                       [&said, i](const proto::Message* m, const net::Failure*) {
                         if (m) said[i] = *m;
                       });
    }
    pipeline.drain();
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      if (e.dir) continue;
      client::FileResult done;
      auto kept = client::Client::Kept::nothing;
      if (said[i]) {
        if (said[i]->size > proto::kMaxAheadSize) pipeline.drain();  // its hash pings the server
        kept = client.judge_probe(e.local, *said[i], done);
      }
      if (kept == client::Client::Kept::complete) {
        report(t, co, done, tty);
      } else if (kept == client::Client::Kept::partial) {
        pipeline.drain();
        if (!send_one(e.local, to(e)) && !client.can_continue()) return false;
      } else if (!send_file(e.local, to(e), true)) {
        return false;
      }
    }
    return true;
  }

  // -r: like scp, DEST/NAME when DEST is a directory on the server, else DEST itself. False when
  // a failure stopped the connection.
  bool send_tree(const fs::path& local, const std::string& dest) {
    std::vector<std::string> skipped;
    auto entries = app::walk_tree(local, &skipped);
    for (const auto& sk : skipped) std::fprintf(stderr, "aesxfer: skipping %s\n", sk.c_str());
    struct stat st {};
    ::stat(local.c_str(), &st);
    std::string name = fs::absolute(local).lexically_normal().filename().string();
    if (name.empty()) name = fs::absolute(local).lexically_normal().parent_path().filename().string();
    // The top's place is the one answer waited for (it names where everything else goes); the
    // directories and small files below it are pipelined.
    if (!finish()) return false;
    std::string base = client.mkdir(dest, name, st.st_mode & 07777, st.st_mtim.tv_sec);
    auto dir_failed = [this](const std::string*, const net::Failure* f) {
      if (f) {
        die_line(f->what());
        rc = kExitFail;
      }
    };
    try {
      if (co.resume) {
        if (!send_resumed(entries, base, dir_failed)) return false;
      } else {
        for (const auto& e : entries) {
          std::string to = base == "." ? e.rel : base + "/" + e.rel;
          if (e.dir)
            pipeline.mkdir(to, e.mode, e.mtime, false, dir_failed);
          else if (!send_file(e.local, to))
            return false;
        }
      }
      if (t.preserve) {  // directory modes and times last, deepest first
        for (auto it = entries.rbegin(); it != entries.rend(); ++it)
          if (it->dir)
            pipeline.mkdir(base == "." ? it->rel : base + "/" + it->rel, it->mode, it->mtime, true,
                           dir_failed);
        pipeline.mkdir(base, st.st_mode & 07777, st.st_mtim.tv_sec, true, dir_failed);
      }
    } catch (const net::Failure& f) {  // the connection failed
      die_line(f.what());
      rc = kExitFail;
      return false;
    }
    return finish();
  }
};

int cmd_send(const std::vector<std::string>& args, const TransferOpts& t_in) {
  if (args.size() < 2) {
    die_line("send: usage: aesxfer send FILE... HOST:DEST");
    return kExitUsage;
  }
  auto remote = parse_remote(args.back());
  if (!remote) {
    die_line("send: the last argument must be HOST:DEST (got '" + args.back() + "')");
    return kExitUsage;
  }
  if (!check_remote(*remote, t_in.quiet)) return kExitUsage;
  TransferOpts t = t_in;
  client::ClientOptions co;
  if (!apply_host_config(t, remote->host, co.host) || !pick_suite(t, co)) return kExitUsage;
  const std::string dest = remote->path.empty() ? "." : remote->path;
  const bool tty = !t.quiet && !t.json && !t.json_progress && ::isatty(STDOUT_FILENO);
  if (t.resume && std::find(args.begin(), args.end() - 1, "-") != args.end() - 1) {
    die_line("send: - (standard input) cannot be resumed: it is read only once (drop --resume)");
    return kExitUsage;
  }
  int rc = 0;
  const std::vector<std::string> sources = check_sources(args, t, rc);
  if (sources.empty()) return kExitFail;
  try {
    client::Client client(co);
    // Several sources go into a directory: refused before anything is written when DEST is not
    // an existing directory on the server (else each file would replace the one before).
    if (args.size() > 2 && dest != "/dev/null" && !client.is_remote_dir(dest)) {
      die_line(client.peer() + ":" + net::printable(dest) + ": not a directory");
      client.bye();
      return kExitFail;
    }
    SendSession s{t, co, client, tty};
    bool stopped = false;  // after a failure mid-stream: the connection cannot go on
    for (size_t i = 0; i < sources.size() && !stopped; ++i) {
      fs::path local = sources[i];
      std::error_code ec;
      if (sources[i] == "-")
        stopped = !s.send_stdin(dest);
      else if (fs::is_directory(local, ec))
        stopped = !s.send_tree(local, dest);
      else
        stopped = !s.send_file(local, dest);
    }
    if (!stopped) s.finish();
    client.bye();
    if (s.rc) rc = s.rc;
  } catch (const net::Failure& f) {
    die_line(f.what());
    return kExitFail;
  } catch (const std::exception& e) {
    die_line(e.what());
    return kExitFail;
  }
  return rc;
}

int cmd_recv_tree(const std::string& src, const std::string& dest, const TransferOpts& t);

int cmd_recv(const std::string& src, const std::string& dest, uint64_t zero_size, const TransferOpts& t_in) {
  auto remote = parse_remote(src);
  if (!remote) {
    die_line("recv: the first argument must be HOST:PATH (got '" + src + "')");
    return kExitUsage;
  }
  if (!check_remote(*remote, t_in.quiet)) return kExitUsage;
  if (t_in.recursive) {
    if (dest == "-") {
      die_line("recv: -r cannot write a directory to standard output");
      return kExitUsage;
    }
    return cmd_recv_tree(src, dest, t_in);
  }
  TransferOpts t = t_in;
  client::ClientOptions co;
  if (!apply_host_config(t, remote->host, co.host) || !pick_suite(t, co)) return kExitUsage;
  // "-" is standard output; so is a destination that is standard output's file (/dev/stdout,
  // /dev/fd/1). Then the progress meter, --json-progress and the summary go to stderr.
  fs::path local = dest == "-" ? fs::path("/dev/stdout") : fs::path(dest);
  struct stat out_st {
  }, dest_st{};
  bool to_stdout =
      dest == "-" || (::fstat(STDOUT_FILENO, &out_st) == 0 && ::stat(dest.c_str(), &dest_st) == 0 &&
                      out_st.st_dev == dest_st.st_dev && out_st.st_ino == dest_st.st_ino);
  std::FILE* msg = to_stdout ? stderr : stdout;
  bool tty = !t.quiet && !t.json && ::isatty(::fileno(msg));
  std::unique_ptr<client::Client> client;
  try {
    client = std::make_unique<client::Client>(co);
    app::Progress prog(net::printable(fs::path(remote->path).filename().string()), tty && !t.json_progress,
                       msg);
    app::JsonProgress jp(remote->path, t.json_progress, msg);
    app::RateLimiter limiter(t.limit_kbit);
    FileMeter meter{prog, jp, limiter, *client};
    auto r = client->get(remote->path, local, zero_size, meter.on_start(), meter.on_progress());
    meter.finish(r);
    report(t, co, r, tty, msg);
    client->bye();
  } catch (const net::Failure& f) {
    if (tty) std::fputc('\n', msg);
    std::string what = f.what();
    if (f.origin == net::Origin::peer && f.status == proto::Status::is_directory) what += " (use -r)";
    die_line(what);
    if (client) client->bye();
    return kExitFail;
  } catch (const std::exception& e) {
    die_line(e.what());
    return kExitFail;
  }
  return 0;
}

// recv -r: the listing, then one get per file on the same connection (client/recv_tree.h).
int cmd_recv_tree(const std::string& src, const std::string& dest, const TransferOpts& t_in) {
  auto remote = parse_remote(src);
  TransferOpts t = t_in;
  client::ClientOptions co;
  if (!apply_host_config(t, remote->host, co.host) || !pick_suite(t, co)) return kExitUsage;
  bool tty = !t.quiet && !t.json && !t.json_progress && ::isatty(STDOUT_FILENO);
  app::RateLimiter limiter(t.limit_kbit);
  std::unique_ptr<client::Client> client;
  try {
    client = std::make_unique<client::Client>(co);
    auto fetch_one = [&](const std::string& from, const fs::path& to, uint64_t size, int dirfd) {
      app::Progress prog(net::printable(to.filename().string()), tty);
      app::JsonProgress jp(from, t.json_progress);
      FileMeter meter{prog, jp, limiter, *client};
      try {
        auto r = client->fetch(from, to, 0, meter.on_start(), meter.on_progress(), size, dirfd);
        meter.finish(r);
        report(t, co, r, tty);
      } catch (const net::Failure&) {
        if (tty) std::fputc('\n', stdout);
        throw;
      }
    };
    auto note = [&](const std::string& line) {
      if (!t.quiet) std::fprintf(stderr, "aesxfer: %s\n", line.c_str());
    };
    int rc = 0;  // a file that failed alone (pipelined): reported, the others go on, exit 1
    auto pipelined = [&](const std::string& from, const fs::path&, const client::FileResult* r,
                         const net::Failure* f) { report_pipelined(t, co, tty, from, r, f, rc); };
    client::recv_tree(*client, remote->path, dest, t.preserve, fetch_one, note, pipelined);
    client->bye();
    if (rc) return rc;
  } catch (const net::Failure& f) {
    std::string what = f.what();
    if (f.origin == net::Origin::peer && f.status == proto::Status::not_directory)
      what += " (recv -r fetches directories; a file without -r)";
    die_line(what);
    if (client) client->bye();
    return kExitFail;
  } catch (const std::exception& e) {
    die_line(e.what());
    return kExitFail;
  }
  return 0;
}

// A number of seconds greater than 0 (CLI11's PositiveNumber prints DBL_MAX as its bound).
CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0') return "'" + v + "' is not a number of seconds";
        return d > 0 && d <= 31536000 ? "" : "must be more than 0 and at most a year of seconds, got " + v;
      },
      "", "positive_seconds");
}

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The first word when it is not an option and not a command: one line naming it, with the
// nearest command when one is close (as git does).
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string word = argv[1];
  std::string best;
  size_t best_d = 3;  // suggest only within two edits
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) return "";
    const size_t d = edit_distance(word, sub->get_name());
    if (d < best_d) best_d = d, best = sub->get_name();
  }
  return "unknown command '" + net::printable(word) + "'" +
         (best.empty() ? "" : " (did you mean " + best + "?)") +
         "; commands: send, recv, serve, keygen, authorize, speed, bench (see --help)";
}

// recv HOST:SRC... DIR with every source on one host: one connection, the sources' stats
// pipelined, then the small files' gets pipelined (docs/PROTOCOL.md 3.10) and the large ones one
// by one (parallel streams as for one file). nullopt when the sources name several hosts (the
// caller then fetches each on its own connection).
std::optional<int> recv_many(const std::vector<std::string>& args, const TransferOpts& t_in) {
  const fs::path dest = args.back();
  std::vector<std::string> paths;
  std::optional<Remote> first;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    auto r = parse_remote(args[i]);
    if (!r || r->path.empty() || r->path == "/dev/zero") return std::nullopt;
    if (!first) first = r;
    if (r->host != first->host) return std::nullopt;
    paths.push_back(r->path);
  }
  if (!check_remote(*first, t_in.quiet)) return kExitUsage;
  TransferOpts t = t_in;
  client::ClientOptions co;
  if (!apply_host_config(t, first->host, co.host) || !pick_suite(t, co)) return kExitUsage;
  const bool tty = !t.quiet && !t.json && !t.json_progress && ::isatty(STDOUT_FILENO);
  int rc = 0;
  std::unique_ptr<client::Client> client;
  try {
    client = std::make_unique<client::Client>(co);
    client::Pipeline pl(*client);
    std::vector<std::optional<proto::Message>> st(paths.size());
    for (size_t i = 0; i < paths.size(); ++i)
      pl.stat(paths[i], [&, i](const proto::Message* ok, const net::Failure* f) {
        if (ok) {
          st[i] = *ok;
          return;
        }
        std::string what = f->what();
        if (f->origin == net::Origin::peer && f->status == proto::Status::is_directory) what += " (use -r)";
        die_line(what);
        rc = kExitFail;
      });
    pl.drain();
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!st[i]) continue;
      const fs::path local = dest / fs::path(paths[i]).filename();
      if (pl.can_get(st[i]->size)) {
        pl.get(paths[i], local, st[i]->size, AT_FDCWD, nullptr,
               [&, from = paths[i]](const client::FileResult* r, const net::Failure* f) {
                 report_pipelined(t, co, tty, from, r, f, rc);
               });
        continue;
      }
      pl.drain();
      app::Progress prog(net::printable(fs::path(paths[i]).filename().string()), tty);
      app::JsonProgress jp(paths[i], t.json_progress);
      try {
        auto r = client->fetch(
            paths[i], local, 0,
            [&](uint64_t n) {
              prog.start(n);
              jp.start(n, 0);
            },
            [&](uint64_t d) {
              prog.update(d);
              jp.update(d);
            },
            st[i]->size);
        prog.finish(r.bytes, r.seconds);
        jp.finish(r.bytes);
        report(t, co, r, tty);
      } catch (const net::Failure& f) {
        if (tty) std::fputc('\n', stdout);
        if (f.origin != net::Origin::peer) throw;  // data was due: the session cannot go on
        die_line(f.what());                        // refused before any data: the next file follows
        rc = kExitFail;
      }
    }
    pl.drain();
    client->bye();
  } catch (const net::Failure& f) {
    die_line(f.what());
    if (client) client->bye();
    return kExitFail;
  }
  return rc;
}

// recv HOST:SRC... DEST, as scp takes several sources: with more than one, DEST must be an
// existing local directory; each source is fetched in turn, one that fails is reported and the
// others still come, and the exit status is 1 if any failed.
int cmd_recv_all(const std::vector<std::string>& args, uint64_t zero_size, const TransferOpts& t) {
  const std::string dest = args.back();
  const size_t n = args.size() - 1;
  if (n > 1) {
    std::error_code ec;
    if (dest == "-" || !fs::is_directory(dest, ec)) {
      die_line("recv: " + net::printable(dest) +
               ": not a directory (several sources need an existing directory)");
      return kExitUsage;
    }
    for (size_t i = 0; i < n; ++i)
      if (!parse_remote(args[i])) {
        die_line("recv: every source must be HOST:PATH (got '" + net::printable(args[i]) + "')");
        return kExitUsage;
      }
  }
  if (n > 1 && !t.recursive && !t.resume && !t.limit_kbit) {
    if (auto rc = recv_many(args, t)) return *rc;
  }
  int rc = 0;
  for (size_t i = 0; i < n; ++i) {
    const int r = cmd_recv(args[i], dest, zero_size, t);
    if (r == kExitUsage) return r;
    if (r != 0) rc = r;
  }
  return rc;
}

void list_ciphers() {
  for (const auto& c : crypto::ciphers())
    std::printf("%-14s %s%s\n", c.name,
                c.legacy && c.mode != crypto::CipherMode::none ? "legacy  " : "        ", c.note);
  for (const auto& m : crypto::macs()) std::printf("mac %-10s         %s\n", m.name, m.note);
}

// send and recv share these options.
void add_transfer_options(CLI::App* sub, TransferOpts& t, bool& no_aesni) {
  sub->add_option("-c,--cipher", t.cipher, "Cipher (default aes128-gcm); see --list-ciphers")
      ->type_name("CIPHER");
  sub->add_option("-m,--mac", t.mac, "MAC for non-AEAD ciphers (default hmac-sha256)")->type_name("MAC");
  sub->add_option("-P,--port", t.port, "Server port (default 7227)")->type_name("PORT");
  sub->add_option("-i,--identity", t.identity,
                  "Client key to use instead of $AESXFER_HOME/id_ed25519 (must exist, readable by you only)")
      ->type_name("FILE");
  sub->add_option("-F,--config", t.config_file,
                  "Config file instead of $AESXFER_HOME/config (\"none\": no config file)")
      ->type_name("FILE");
  sub->add_option(
         "-o,--option", t.config_options,
         "A config keyword for this run, e.g. -o Port=7300 (repeatable; see CONFIGURATION in aesxfer(1))")
      ->allow_extra_args(false)
      ->type_name("KEY=VALUE");
  sub->add_flag("-q,--quiet", t.quiet, "No progress meter and no summary line");
  sub->add_flag("--json", t.json, "Print one JSON object per file");
  sub->add_option("--keylog", t.keylog, "Append the session keys to FILE (see docs/PROTOCOL.md)")
      ->type_name("FILE");
  sub->add_option("--timeout", t.timeout, "Seconds to wait on the network before giving up (default 30)")
      ->check(positive_seconds())
      ->type_name("SECONDS");
  sub->add_flag("--no-aesni", no_aesni, "Use the portable crypto code");
  sub->add_flag(
      "-p,--preserve", t.preserve,
      "Preserve modification time and mode (else: mode masked by the receiver's umask, time of arrival)");
  sub->add_option("-l,--limit", t.limit_kbit,
                  "Limit the bandwidth to KBIT/S Kbit/s, like scp -l; M and G suffixes for Mbit/s and Gbit/s "
                  "(80M = 80000)")
      ->transform(CLI::AsNumberWithUnit(std::map<std::string, double>{{"k", 1}, {"m", 1e3}, {"g", 1e6}},
                                        CLI::AsNumberWithUnit::CASE_INSENSITIVE)
                      .description(""))
      ->check(CLI::Range(0.0, 1e8).description(""))
      ->type_name("KBIT/S");
  sub->add_flag("--json-progress", t.json_progress, "JSON progress lines about every 0.5 s and a final one");
  sub->add_option("--streams", t.streams,
                  "TCP connections per file, by byte range (default 0 = auto: more than one only when the "
                  "round trip is 10 ms or more; 1 = never)")
      ->check(CLI::Range(0, 16));
  sub->add_option("--checksum", t.checksum,
                  "Whole-file checksum in every end record: xxh128 (default), sha256 or none")
      ->type_name("ALG");
  sub->add_option("--record-size", t.record_size,
                  "Payload bytes per record, 4K to 1M (default 256K; the server may lower it)")
      ->transform(CLI::AsSizeValue(false).description(""))
      ->check(CLI::Range(uint64_t(proto::kMinRecordSize), uint64_t(proto::kMaxRecordSize)).description(""))
      ->type_name("SIZE");
  sub->add_flag(
      "-v,--verbose", t.verbose,
      "Say more on stderr (debug1: lines): the handshake, host key, cipher and implementation, streams, "
      "socket buffers, round trip; the file's checksum on the summary line. -vv: more");
  sub->add_flag("--strict-host-keys", t.strict_host_keys,
                "Refuse a server whose key is not yet in known_hosts (else it is added, and said so)");
}

CLI::App* add_send_command(CLI::App& app, TransferOpts& t, std::vector<std::string>& args, bool& no_aesni) {
  auto* send = app.add_subcommand("send", "Send files: aesxfer send FILE... HOST:DEST");
  send->add_option("args", args, "FILE... HOST:DEST")
      ->required()
      ->expected(2, -1)
      ->type_name("FILE... HOST:DEST");
  add_transfer_options(send, t, no_aesni);
  send->add_flag("-r,--recursive", t.recursive, "Send directories recursively");
  send->add_flag("--resume", t.resume,
                 "Continue an interrupted send from what the server kept (docs/PROTOCOL.md)");
  return send;
}

CLI::App* add_recv_command(CLI::App& app, TransferOpts& t, std::vector<std::string>& args,
                           uint64_t& zero_size, bool& no_aesni) {
  auto* recv = app.add_subcommand("recv", "Fetch a file or (-r) a directory: aesxfer recv HOST:SRC DEST");
  recv->add_option("args", args, "HOST:SRC... DEST (several sources need DEST to be a directory)")
      ->required()
      ->expected(2, -1)
      ->type_name("HOST:SRC... DEST");
  recv->add_option("--size", zero_size, "Bytes to read when SRC is /dev/zero (K, M, G suffixes of 1024)")
      ->transform(CLI::AsSizeValue(false).description(""))
      ->type_name("SIZE");
  add_transfer_options(recv, t, no_aesni);
  recv->add_flag("-r,--recursive", t.recursive,
                 "Fetch a directory recursively (symlinks on the server are skipped)");
  recv->add_flag("--resume", t.resume,
                 "Continue an interrupted recv from the partial file kept beside DEST, or from DEST itself "
                 "(complete files are not fetched again)");
  return recv;
}

// The long names of the options given on sub's command line (so that the config file and -o
// fill in only the others).
std::set<std::string> given_options(const CLI::App* sub) {
  std::set<std::string> out;
  for (const CLI::Option* o : sub->get_options())
    if (o->count() > 0)
      for (const auto& n : o->get_lnames()) out.insert(n);
  return out;
}

struct ServeArgs {
  server::ServerOptions so;
  std::string listen_addr, root = ".", port_file, auth_keys;
  double timeout = 30, handshake_timeout = 10, partial_days = 7;
  bool quiet = false;
  std::vector<std::string> checksums;
  uint64_t max_record = proto::kMaxRecordSize;
};

CLI::App* add_serve_command(CLI::App& app, ServeArgs& a, bool& no_aesni) {
  auto* serve = app.add_subcommand("serve", "Run the server");
  serve->add_option("--listen", a.listen_addr, "Address to listen on (default: all, IPv6 and IPv4)");
  serve->add_option("-P,--port", a.so.port, "Port (default 7227; 0 picks a free one)")->type_name("PORT");
  serve->add_option("--root", a.root, "Directory that files are read from and written to (default: .)");
  serve->add_option("--port-file", a.port_file, "Write the bound port to FILE once listening");
  serve->add_option("--authorized-keys", a.auth_keys,
                    "Client keys to accept (default $AESXFER_HOME/authorized_keys)");
  serve
      ->add_option("--partial-max-age", a.partial_days,
                   "Days to keep partial files of interrupted --resume sends (default 7; 0 = for ever)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--max-sessions", a.so.max_sessions,
                    "Refuse clients beyond this many at once (default 64)");
  serve->add_option("--timeout", a.timeout, "Idle seconds before a session is dropped (default 30)");
  serve->add_option("--handshake-timeout", a.handshake_timeout,
                    "Seconds a client has to complete the whole handshake (default 10)");
  serve
      ->add_option("--ciphers", a.so.ciphers,
                   "Ciphers clients may use, comma-separated (default: all; see --list-ciphers)")
      ->delimiter(',');
  serve
      ->add_option("--macs", a.so.macs,
                   "MACs clients may use with a non-AEAD cipher, comma-separated (default: all)")
      ->delimiter(',');
  serve->add_flag("-q,--quiet", a.quiet, "No log lines");
  serve
      ->add_option("--max-list", a.so.max_list_entries,
                   "Entries one recv -r listing may have (default 200000)")
      ->check(CLI::Range(uint64_t(1), proto::kMaxListEntries));
  serve->add_flag("--no-aesni", no_aesni, "Use the portable crypto code");
  serve
      ->add_option("--checksums", a.checksums,
                   "File checksums clients may choose, comma-separated (default: xxh128,sha256,none)")
      ->delimiter(',')
      ->type_name("LIST");
  serve
      ->add_option("--max-record-size", a.max_record,
                   "Largest record payload the server agrees to (default 1M)")
      ->transform(CLI::AsSizeValue(false).description(""))
      ->check(CLI::Range(uint64_t(proto::kMinRecordSize), uint64_t(proto::kMaxRecordSize)).description(""))
      ->type_name("SIZE");
  return serve;
}

int cmd_serve(ServeArgs& a) {
  server::ServerOptions& so = a.so;
  so.listen = a.listen_addr;
  so.root = a.root;
  so.home = files::aesxfer_home();
  so.port_file = a.port_file;
  so.authorized_keys = a.auth_keys;
  so.timeout = std::chrono::milliseconds(int64_t(a.timeout * 1000));
  so.handshake_timeout = std::chrono::milliseconds(int64_t(a.handshake_timeout * 1000));
  so.partial_max_age = std::chrono::seconds(int64_t(a.partial_days * 86400));
  so.log = a.quiet ? nullptr : &std::cerr;
  so.policy.max_record_size = uint32_t(a.max_record);
  if (!a.checksums.empty()) {
    so.policy.checksums = 0;
    for (const auto& name : a.checksums) {
      crypto::ChecksumAlg alg;
      if (!crypto::find_checksum(name, alg)) {
        die_line("serve: unknown checksum '" + name + "' in --checksums (known: " + crypto::checksum_names() +
                 ")");
        return kExitUsage;
      }
      so.policy.checksums |= 1u << uint8_t(alg);
    }
  }
  server::Server server(so);
  server.run();
  return 0;
}

int cmd_keygen() {
  bool created = false;
  fs::path p = files::aesxfer_home() / "id_ed25519";
  auto id = files::load_or_create_identity(p, &created);
  // stdout: exactly the line a server's authorized_keys takes (its .pub file); the rest on stderr.
  std::string line = files::encode_public_key(id.pk) + " " + files::key_comment();
  std::ifstream pub(p.string() + ".pub");
  std::string on_disk;
  proto::PublicKey pk{};
  if (std::getline(pub, on_disk) && files::decode_public_key(on_disk, pk) && pk == id.pk) line = on_disk;
  std::fprintf(stderr, "%s %s (%s)\nAdd this line to the server's authorized_keys (%s there):\n",
               created ? "created" : "identity", p.c_str(), proto::fingerprint(id.pk).c_str(),
               "$AESXFER_HOME/authorized_keys");
  std::printf("%s\n", line.c_str());
  return 0;
}

int cmd_authorize(const std::string& what) {
  std::string line = what;
  std::error_code ec;
  if (fs::is_regular_file(what, ec)) {  // a .pub file: its first key line
    std::ifstream in(what);
    line.clear();
    for (std::string l; std::getline(in, l);)
      if (!l.empty() && l[0] != '#') {
        line = l;
        break;
      }
  }
  const fs::path file = files::aesxfer_home() / "authorized_keys";
  proto::PublicKey pk{};
  try {
    const auto r = files::authorize_key(file, line);
    files::decode_public_key(line, pk);
    std::printf("%s %s in %s\n",
                r == files::Authorize::added ? "added" : "already there:", proto::fingerprint(pk).c_str(),
                file.c_str());
    return 0;
  } catch (const std::runtime_error& e) {
    die_line("authorize: " + net::printable(what.substr(0, 80)) + ": " + e.what());
    return kExitUsage;
  }
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

struct SpeedArgs {
  app::SpeedOptions sp;
  std::string list;
};

CLI::App* add_speed_command(CLI::App& app, SpeedArgs& a, bool& no_aesni) {
  auto* speed = app.add_subcommand("speed", "Cipher and MAC throughput, like openssl speed -evp");
  speed->add_option("-c,--cipher", a.list, "Comma-separated ciphers, MACs and checksums (default: all)")
      ->type_name("LIST");
  speed
      ->add_option("--seconds", a.sp.seconds,
                   "Seconds per cell of the table, i.e. per cipher, operation and block size (default 1; "
                   "a whole table takes rows x sizes x this)")
      ->check(positive_seconds())
      ->type_name("S");
  speed->add_option("--multi", a.sp.multi, "Threads running at once (figures summed)");
  speed->add_flag("--json", a.sp.json, "JSON output");
  speed->add_flag("--no-aesni", no_aesni, "Use the portable crypto code");
  speed
      ->add_option("--plot", a.sp.plot, "Also write the table as an SVG line chart (MB/s against block size)")
      ->type_name("FILE");
  speed->add_flag("--no-aesni-too", a.sp.no_aesni_too,
                  "Every AES row also with the portable code (in the chart: same colour, dashed)");
  return speed;
}

struct BenchArgs {
  app::BenchOptions bo;
  std::string list;
};

// `aesxfer bench`: the cipher lab (app/lab/bench.h).
CLI::App* add_bench_command(CLI::App& app, BenchArgs& a, bool& no_aesni) {
  app::BenchOptions& bo = a.bo;
  auto* bench =
      app.add_subcommand("bench", "Transfer throughput and CPU per cipher, against HOST or a local server");
  bench->add_option("host", bo.host, "Server to send to (default: start a local server child on 127.0.0.1)")
      ->type_name("HOST");
  bench->add_option("-c,--cipher", a.list, "Comma-separated ciphers (default: all)")->type_name("LIST");
  bench->add_option("-m,--mac", bo.mac, "MAC for non-AEAD ciphers (default hmac-sha256)")->type_name("MAC");
  bench->add_option("--size", bo.size, "Bytes per transfer, K/M/G suffixes are binary (default 1G)")
      ->transform(CLI::AsSizeValue(false).description(""))
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 50).description(""))
      ->type_name("SIZE");
  bench->add_option("--repeat", bo.repeat, "Transfers per cipher; median, min and max are shown (default 3)");
  bench->add_flag("--no-aesni-too", bo.no_aesni_too,
                  "Run every AES cipher with and without AES-NI, show the speed-up");
  auto* bench_json = bench->add_flag("--json", bo.json, "One JSON object with rows");
  bench->add_flag("--csv", bo.csv, "CSV: " + std::string(app::kBenchCsvHeader))->excludes(bench_json);
  bench->add_option(
      "--plot", bo.plot,
      "Also write an SVG chart to FILE: bars per cipher, or with --record-size lines of MB/s against "
      "record size");
  bench
      ->add_option("--record-size", bo.record_sizes,
                   "Sweep: every cipher once per record size, comma-separated (e.g. 4K,16K,64K,256K,1M)")
      ->delimiter(',')
      ->transform(CLI::AsSizeValue(false).description(""))
      ->check(CLI::Range(uint64_t(proto::kMinRecordSize), uint64_t(proto::kMaxRecordSize)).description(""))
      ->type_name("LIST");
  bench->add_option("-P,--port", bo.port, "Remote server port (default 7227)");
  bench->add_option("--timeout", bo.timeout, "Seconds to wait on the network before giving up (default 60)");
  bench->add_flag("-q,--quiet", bo.quiet, "No progress lines on stderr");
  bench->add_flag("--no-aesni", no_aesni,
                  "Use the portable crypto code (both sides when the server is local)");
  bench->add_flag(
      "--vs-scp", bo.vs_scp,
      "Also send with scp -c (matching cipher and MAC) and scp's defaults; without HOST to a throwaway "
      "sshd on 127.0.0.1");
  bench->add_option("--ssh-opts", bo.ssh_opts, "Options for scp with --vs-scp, split at spaces (repeatable)")
      ->allow_extra_args(false);
  bench->add_option("--sshd", bo.sshd,
                    "The sshd that --vs-scp without HOST starts (default: /usr/sbin/sshd)");
  return bench;
}

// Checks made before CLI11 parses: no arguments, an unknown command, serve -p. Returns the exit
// status for a usage error, or -1 to go on.
int precheck(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) {  // no arguments: usage on stderr, like a usage error
    std::fputs(app.help().c_str(), stderr);
    return kExitUsage;
  }
  if (std::string u = unknown_command(app, argc, argv); !u.empty()) {
    die_line(u);
    return kExitUsage;
  }
  // One meaning of -p everywhere (--preserve, as in scp); the port is -P in every command.
  if (std::string(argv[1]) == "serve")
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "-p") {
        die_line("serve: the port option is -P (or --port); -p means --preserve in send and recv");
        return kExitUsage;
      }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aesxfer: encrypted file transfer over TCP, with the cipher you pick"};
  app.require_subcommand(0, 1);
  bool list = false, no_aesni = false;
  app.add_flag("--list-ciphers", list, "List ciphers and MACs (legacy ones marked) and exit");
  app.add_flag("--no-aesni", no_aesni, "Use the portable constant-time code instead of AES-NI/PCLMUL/SHA-NI")
      ->envname("AESXFER_NO_AESNI");
  app.set_version_flag("-V,--version", std::string("aesxfer ") + AESXFER_VERSION + " (protocol " +
                                           std::to_string(proto::kVersion) + ")");

  TransferOpts t;
  std::vector<std::string> send_args, recv_args;
  uint64_t zero_size = 0;
  auto* send = add_send_command(app, t, send_args, no_aesni);
  auto* recv = add_recv_command(app, t, recv_args, zero_size, no_aesni);
  ServeArgs serve_args;
  auto* serve = add_serve_command(app, serve_args, no_aesni);
  auto* keygen = app.add_subcommand("keygen", "Create this user's identity (and show it)");
  auto* authorize = app.add_subcommand(
      "authorize", "On the server: let a client key in (appends it to $AESXFER_HOME/authorized_keys)");
  std::string authorize_what;
  authorize->add_option("key", authorize_what, "The line aesxfer keygen printed, or a .pub file holding it")
      ->required()
      ->type_name("KEYLINE|FILE");
  SpeedArgs speed_args;
  auto* speed = add_speed_command(app, speed_args, no_aesni);
  BenchArgs bench_args;
  auto* bench = add_bench_command(app, bench_args, no_aesni);

  if (int rc = precheck(app, argc, argv); rc >= 0) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string what = e.what();
    die_line(what.empty() ? "bad command line (see --help)" : what + " (see --help)");
    return kExitUsage;
  }
  try {
    proto::init(no_aesni);  // libsodium, and the CPU dispatch chosen once (the portable code with --no-aesni)
  } catch (const std::exception& e) {
    die_line(e.what());
    return kExitFail;
  }

  if (list) {
    list_ciphers();
    return 0;
  }
  if (*send || *recv) {
    files::install_cleanup_on_signals();
    t.given = given_options(*send ? send : recv);
  }
  try {
    if (*send) return cmd_send(send_args, t);
    if (*recv) return cmd_recv_all(recv_args, zero_size, t);
    if (*serve) return cmd_serve(serve_args);
    if (*keygen) return cmd_keygen();
    if (*authorize) return cmd_authorize(authorize_what);
    if (*speed) {
      speed_args.sp.ciphers = split_list(speed_args.list);
      speed_args.sp.no_aesni = no_aesni;
      return app::run_speed(speed_args.sp, std::cout, std::cerr);
    }
    if (*bench) {
      bench_args.bo.ciphers = split_list(bench_args.list);
      bench_args.bo.no_aesni = no_aesni;
      return app::run_bench(bench_args.bo, std::cout, std::cerr);
    }
  } catch (const net::Failure& f) {
    die_line(f.what());
    return kExitFail;
  } catch (const std::exception& e) {
    die_line(e.what());
    return kExitFail;
  }
  std::cout << app.help();
  return 0;
}
