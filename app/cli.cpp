#include "app/cli.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "app/cli_checks.h"
#include "app/host_config.h"
#include "app/json.h"
#include "client/config.h"
#include "crypto/aes.h"
#include "crypto/suite.h"
#include "files/atomic_file.h"
#include "files/keystore.h"
#include "net/congestion.h"
#include "proto/failure.h"

namespace aesxfer::app {

namespace fs = std::filesystem;

std::string bounded_line(const std::string& msg) {
  constexpr size_t kHead = 384, kTail = 576;
  if (msg.size() <= kHead + kTail + 64) return msg;
  // Whole pieces of printable()'s text (an escape, a character), the head's and the tail's.
  size_t head = 0;
  while (head < msg.size() && head + proto::escaped_piece(msg, head) <= kHead)
    head += proto::escaped_piece(msg, head);
  size_t tail = head;
  while (tail < msg.size() - kTail) tail += proto::escaped_piece(msg, tail);
  return msg.substr(0, head) + " [... " + std::to_string(tail - head) + " bytes ...] " + msg.substr(tail);
}

void die_line(const std::string& msg) { std::fprintf(stderr, "aesxfer: %s\n", bounded_line(msg).c_str()); }

std::string stored_name(const std::string& path) {
  const fs::path p = fs::path(path).lexically_normal();
  std::string n = p.filename().string();
  if (n.empty() || n == ".") n = p.parent_path().filename().string();
  return n == "." || n == ".." || n == "/" ? std::string() : n;
}

bool distinct_names(const char* verb, const std::vector<std::string>& shown,
                    const std::vector<std::string>& paths) {
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string n = stored_name(paths[i]);
    if (n.empty()) continue;
    if (auto [it, fresh] = seen.emplace(n, i); !fresh) {
      die_line(std::string(verb) + ": " + net::printable(shown[it->second]) + " and " +
               net::printable(shown[i]) + " would both be written as " + net::printable(n) +
               ", the second over the first; nothing was moved (give them separate destinations)");
      return false;
    }
  }
  return true;
}

std::string port_in_path_hint(const Remote& r) {
  const size_t colon = r.path.find(':');
  if (colon == 0 || colon == std::string::npos || colon > 5 ||
      r.path.find_first_not_of("0123456789") != colon)
    return "";
  const std::string port = r.path.substr(0, colon);
  return " (" + net::printable(r.host + ":" + r.path) + " names the path " + net::printable(r.path) +
         ": a port goes in -P " + port + ")";
}

std::string last_name(const std::string& path) {
  // Trailing "/" and "/." set aside, which name the same directory (a thirty-fifth re-attack, A-N3
  // and B-N5: ".q.aesxfer-partial/." was made); "." alone stays.
  std::string trimmed = path;
  for (;;) {
    const size_t n = trimmed.size();
    if (n > 1 && trimmed.back() == '/')
      trimmed.pop_back();
    else if (n > 2 && trimmed.compare(n - 2, 2, "/.") == 0)
      trimmed.resize(n - 2);
    else
      break;
  }
  const size_t slash = trimmed.rfind('/');
  return slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
}

bool check_remote(const Remote& r, bool quiet, const std::string& special) {
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
  const std::string shown = net::printable(r.host + ":" + r.path);
  // Refused here, with the reason, not by the server's "invalid path" after a login (a
  // twenty-seventh re-attack, N6).
  // A name of the shapes aesxfer keeps for its own temporary and partial files: no request may
  // name one (PROTOCOL.md 3.7), said before the connection (a thirty-first re-attack, N1: after
  // the login, exit 1).
  // Its last component, trailing slashes aside (a thirty-second re-attack, B-a: ".x.aesxfer-partial/"
  // passed, logged in, and failed).
  if (files::is_reserved_name(last_name(r.path))) {
    die_line(shown + ": " + files::kReservedShape);
    return false;
  }
  if (r.path.find_first_of("\r\n") != std::string::npos) {
    die_line(shown + ": a CR or LF in a path cannot be sent (no path on the wire may hold one)");
    return false;
  }
  if (!r.path.empty() && r.path[0] == '/' && r.path != special) {
    die_line(shown + ": absolute paths are refused: paths are relative to the server's --root (" + special +
             " is the one exception)");
    return false;
  }
  for (size_t at = 0; at <= r.path.size();) {
    const size_t slash = std::min(r.path.find('/', at), r.path.size());
    if (r.path.compare(at, slash - at, "..") == 0) {
      die_line(shown + ": '..' is refused: paths stay under the server's --root");
      return false;
    }
    at = slash + 1;
  }
  return true;
}

std::string ipv6_hint(const std::string& arg) {
  const size_t last = arg.rfind(':');
  if (arg.empty() || arg[0] == '[' || last == std::string::npos || arg.find(':') == last) return "";
  const std::string host = arg.substr(0, last);
  if (host.find('/') != std::string::npos) return "";  // a local path with colons
  return " (an IPv6 address goes in brackets: " + net::printable("[" + host + "]:" + arg.substr(last + 1)) +
         ")";
}

bool locale_reads_utf8(const char* lc_all, const char* lc_ctype, const char* lang) {
  const char* name = "";
  for (const char* v : {lc_all, lc_ctype, lang})
    if (v && *v) {
      name = v;
      break;
    }
  std::string n;
  for (const char* p = name; *p; ++p) n += char(std::tolower(static_cast<unsigned char>(*p)));
  return n.find("utf-8") != std::string::npos || n.find("utf8") != std::string::npos;
}

std::function<void(int, const std::string&)> debug_sink(int verbose) {
  if (verbose <= 0) return nullptr;
  return [verbose](int level, const std::string& line) {
    if (level <= verbose) std::fprintf(stderr, "debug%d: %s\n", level, line.c_str());
  };
}

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
  if (c.congestion && !cli("congestion")) t.congestion = *c.congestion;
  if (c.retries && !cli("retries")) t.retries = *c.retries;
  if (c.checksum && !cli("checksum")) t.checksum = *c.checksum;
  if (c.record_size && !cli("record-size")) t.record_size = *c.record_size;
  if (c.timeout && !cli("timeout")) t.timeout = *c.timeout;
  if (c.strict_host_keys && !cli("strict-host-keys")) t.strict_host_keys = *c.strict_host_keys;
  if (c.identity_file && !cli("identity")) t.identity = *c.identity_file;
  if (!t.identity.empty()) t.identity = client::expand_tilde(t.identity, app::user_home());
  return true;
}

bool pick_suite(const TransferOpts& t, client::ClientOptions& co) {
  co.cipher = crypto::find_cipher(t.cipher);
  if (!co.cipher) {
    die_line("unknown cipher '" + net::printable(t.cipher) + "' (known: " + crypto::cipher_names() + ")");
    return false;
  }
  std::string mac = t.mac.empty() ? (co.cipher->aead ? "none" : "hmac-sha256") : t.mac;
  co.mac = crypto::find_mac(mac);
  if (!co.mac) {
    die_line("unknown MAC '" + net::printable(mac) + "' (known: " + crypto::mac_names() + ")");
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
    die_line("unknown checksum '" + net::printable(t.checksum) + "' (known: " + crypto::checksum_names() +
             ")");
    return false;
  }
  if (co.checksum == crypto::ChecksumAlg::none && !t.quiet)
    std::fprintf(stderr,
                 "aesxfer: warning: checksum none: no end-to-end check of the file beyond the record %s\n",
                 co.cipher->aead || co.mac->tag_len ? "authentication" : "layer (and MAC none: none at all)");
  co.record_size = uint32_t(t.record_size);
  // -l low: records that take at most about 2 s at the rate (a power of two, 4 KiB at least), unless
  // --record-size or RecordSize chose another size. The limiter sends whole records, and below about 70
  // Kbit/s one 256 KiB record took longer than the server's 30 s idle timeout (a twenty-first re-attack, N2).
  if (t.limit_kbit > 0 && t.record_size == proto::kDefaultPayload) {
    const uint64_t two_seconds = uint64_t(t.limit_kbit) * 1000 / 8 * 2;
    uint32_t r = uint32_t(proto::kMinRecordSize);
    while (uint64_t(r) * 2 <= two_seconds && r * 2 <= co.record_size) r *= 2;
    co.record_size = std::min(co.record_size, r);
  }
  co.port = t.port;
  co.home = files::aesxfer_home();
  // A home others may write to, or one of another user's, or below a directory others may write to
  // (sshd's StrictModes, as serve judges its own home): they can rename its config or known_hosts
  // away (then an unknown host is trusted on first use whatever StrictHostKeyChecking said) or
  // plant their own. Serve refuses such a home; the client says so, with -q too: it is no chatter
  // (a thirty-eighth re-attack, A-F3: not a word; a thirty-ninth, B-F4: the mode bits alone were
  // judged, so another user's 0755 home, or a 0700 one in a 0777 directory, went unsaid).
  if (struct stat hs{}; ::stat(co.home.c_str(), &hs) == 0 && S_ISDIR(hs.st_mode))
    if (const std::string p = files::strict_modes_problem(co.home, hs); !p.empty())
      std::fprintf(
          stderr,
          "aesxfer: warning: $AESXFER_HOME: another user can replace its config and known_hosts: %s\n",
          net::printable(p).c_str());
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
  co.congestion = t.congestion;
  if (std::string why = net::check_congestion(t.congestion); !why.empty()) {
    die_line(why);
    return false;
  }
  co.paced = t.limit_kbit > 0;
  return true;
}

namespace {

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

}  // namespace

static_assert(client::kUnknownSize == app::kUnknownTotal, "send -: the client's unknown size is the meter's");

// The line of a file --resume (or a retry) found whole and identical where it goes. One written
// whole to a connection lost before its end was acknowledged may be this command's bytes or a
// copy that was there before: the line says it cannot tell (a sixtieth re-attack, O60-2).
void found_whole(std::FILE* human, const client::FileResult& r, const std::string& sum) {
  std::fprintf(
      human,
      r.sent_before_the_loss
          ? "%s: %llu bytes, sent before the connection was lost and found in place by the retry "
            "(size and checksum match)%s\n"
      : r.written_before_the_loss
          ? "%s: %llu bytes, found in place by the retry (size and checksum match)%s; it was written "
            "whole to the connection before it was lost, but not all of it was acknowledged: whether "
            "those bytes or a copy already there made the match is not known\n"
          : "%s: %llu bytes, up to date (size and checksum match), nothing moved%s\n",
      net::printable(r.file).c_str(), (unsigned long long)r.bytes, sum.c_str());
  std::fflush(human);
}

void report(const TransferOpts& t, const client::ClientOptions& co, const client::FileResult& r,
            bool tty_progress, std::FILE* out) {
  const char* mac = crypto::mac_label(co.cipher, co.mac);
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
    // Verified means something checked the bytes: the records' MAC (or AEAD tag) or the whole-file
    // checksum. With -m none (and -c none) and --checksum none nothing did (a twenty-sixth
    // re-attack's note: "verified": true for a file no check had seen).
    j["verified"] =
        r.verified && (std::string_view(mac) != "none" || co.checksum != crypto::ChecksumAlg::none);
    j["resumed_from"] = r.resumed_from;
    j["streams"] = r.streams;
    j["record_size"] = r.record_size;
    j["retries"] = t.retried;
    if (!r.not_resumed.empty()) j["not_resumed"] = r.not_resumed;
    if (r.sent_before_the_loss) j["sent_before_the_loss"] = true;
    if (r.written_before_the_loss) j["written_before_the_loss"] = true;
    if (!r.congestion.empty()) {
      j["congestion"] = r.congestion;
      j["congestion_why"] = r.congestion_why;
      if (r.resent_percent >= 0) j["resent_percent"] = app::rounded(r.resent_percent, 3);
    }
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
        sum += " per range (" + std::to_string(r.ranges.size()) + " ranges over " +
               std::to_string(r.streams) + (r.streams == 1 ? " stream)" : " streams)");
    }
    // A resumed transfer: where it resumed, and the rate of the bytes that moved in this run.
    std::string resumed;
    if (t.retried > 0) resumed = ", " + std::to_string(t.retried) + (t.retried == 1 ? " retry" : " retries");
    if (r.resumed_from > 0)
      resumed += ", resumed at byte " + std::to_string(r.resumed_from) + ", " +
                 std::to_string(r.bytes - r.resumed_from) + " moved";
    // With --json-progress standard output carries JSON only: the summary line goes to stderr.
    std::FILE* human = t.json_progress ? stderr : out;
    if (r.found_in_place()) return found_whole(human, r, sum);  // --resume found it whole
    std::fprintf(human, "%s: %llu bytes%s in %.2f s, %.1f MB/s (%s, %s, %s%s)\n",
                 net::printable(r.file).c_str(), (unsigned long long)r.bytes, resumed.c_str(), r.seconds,
                 mbps, co.cipher->name, mac, crypto::cipher_impl_name(*co.cipher).c_str(), sum.c_str());
    if (std::string note = client::slow_path_note(r); !note.empty())
      std::fprintf(human, "aesxfer: note: %s\n", note.c_str());
  }
  // On stderr, as a tree's notes, made printable where it was said; also with -q and --json (a
  // thirty-third re-attack, B-N6: -q hid it, where the man page says a partial file passed over is
  // always shown).
  if (!r.not_resumed.empty())
    die_line("note: " + r.not_resumed + "; it was left as it is and the file moved from the start");  // B50-3
  t.retried = 0;  // the retries so far served this file
  std::fflush(out);
  if (co.debug && r.record_size) {
    const uint64_t records = (r.bytes - r.resumed_from + r.record_size - 1) / r.record_size;
    co.debug(1, net::printable(r.file) + ": " + std::to_string(r.streams) +
                    (r.streams == 1 ? " stream" : " streams") + ", " + std::to_string(records) +
                    (records == 1 ? " record" : " records") + " of up to " + std::to_string(r.record_size) +
                    " bytes");
  }
}

void report_pipelined(const TransferOpts& t, const client::ClientOptions& co, bool tty,
                      const std::string& shown, const client::FileResult* r, const proto::Failure* f, int& rc,
                      app::JsonProgress* jp, std::FILE* out) {
  if (f) {
    // A lost connection's line names the file it stopped, as the JSON does (a twenty-ninth
    // re-attack, B-N5: "connection ... lost", and no file, among several).
    const std::string name = net::printable(shown) + ": ";
    const bool named =
        f->origin != net::Origin::link || std::string_view(f->what()).substr(0, name.size()) == name;
    die_line(named ? std::string(f->what()) : name + f->what());
    json_failed(t, shown, f->what(), jp, out, f->size);  // a script reading --json learns of the file too
    rc = kExitFail;
    return;
  }
  client::FileResult res = *r;
  res.file = shown;
  app::Progress prog(net::printable(fs::path(shown).filename().string()), tty);
  app::JsonProgress lines(shown, t.json_progress);
  prog.start(res.bytes);
  lines.start(res.bytes, 0);
  prog.finish(res.bytes, res.seconds, true);
  lines.finish(res.bytes, res.seconds);
  report(t, co, res, tty);
}

void json_failed(const TransferOpts& t, const std::string& file, const std::string& error,
                 app::JsonProgress* jp, std::FILE* out, uint64_t total) {
  // And one reading --json-progress, the file's final line (a twenty-eighth re-attack's note: a
  // file that failed had none, so a script waiting for its last line waited on).
  app::JsonProgress own(file, t.json_progress);
  (jp ? *jp : own).fail(error, total);
  if (!t.json) return;
  app::Json j;
  app::set_name(j, "file", file);
  j["error"] = error;
  j["verified"] = false;
  std::fputs(app::json_line(j).c_str(), out);
}

int end_with_unreported(const TransferOpts& t, const proto::Failure& f,
                        const std::vector<std::string>& unreported, const char* not_moved, bool several) {
  die_line(f.what());
  for (const auto& file : unreported) json_failed(t, file, f.what());
  if (t.json || unreported.empty() || (!several && unreported.size() == 1)) return kExitFail;
  // As many lines as the names need, each whole within bounded_line's bound (a fifty-sixth
  // re-attack's note: one line of 300 names was cut in its middle, and 78 were never named); a
  // name too long for a line of its own is cut there.
  constexpr size_t kLine = 900;
  std::string names;
  for (const auto& file : unreported) {
    const std::string q = proto::quoted(file);
    if (!names.empty() && names.size() + 2 + q.size() > kLine) {
      die_line(std::string(not_moved) + ": " + names + " (the session ended)");
      names.clear();
    }
    names += (names.empty() ? "" : ", ") + q;
  }
  die_line(std::string(not_moved) + ": " + names + " (the session ended)");
  return kExitFail;
}

void report_not_moved(const TransferOpts& t, const client::ClientOptions& co, bool tty,
                      const std::string& shown, const char* not_moved, int& rc, const std::string& why) {
  const proto::Failure f(net::printable(shown) + ": " + not_moved + ": " + why, proto::Status::io_error);
  report_pipelined(t, co, tty, shown, nullptr, &f, rc);
}

Retrier::Retrier(int max) : max_(max) { ::clock_gettime(CLOCK_REALTIME_COARSE, &started_); }

void Retrier::resume(client::ClientOptions& co) const {
  if (co.resume) return;  // --resume: any destination of this user's is offered, as asked
  co.resume = true;
  co.offer_changed_since = started_;
}

void Retrier::wait(const proto::Failure& f, bool resumable) {
  ++used_;
  ++untaken_;
  if (std::exchange(session_since_wait_, false)) kept_ = resumable;
  const int delay = std::min(30, 1 << std::min(used_ - 1, 5));
  // Not "resuming" where this file's partial file was passed over (Failure::from_start), nor after
  // an attempt without --resume, which kept nothing of the file in transfer (a fifty-third
  // re-attack's note: a plain recv cut at 15 of 20 MB said "resuming" and moved all 20 MB again).
  std::fprintf(stderr, "aesxfer: %s; retry %d of %d in %d s, %s\n", bounded_line(f.what()).c_str(), used_,
               max_, delay,
               f.from_start ? "this file from its start"
               : kept_      ? "resuming"
                            : "what was in transfer starts again");
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(delay));
}

CLI::Validator timeout_seconds() { return real_number(0, 31536000, "seconds", true); }

namespace {
std::set<std::string>& after_lower_p() {
  static std::set<std::string> words;
  return words;
}
}  // namespace

std::string with_hint(const std::string& what, const std::string& hint) {
  const size_t port = what.rfind(" (port ");
  if (port == std::string::npos || what.back() != ')') return what + hint;
  return what.substr(0, port) + hint + what.substr(port);
}

void note_words_after_lower_p(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string w = argv[i];
    if (w == "--") break;
    if (w.size() >= 2 && w[0] == '-' && w[1] != '-' && w.back() == 'p') after_lower_p().insert(argv[i + 1]);
  }
}

std::string port_after_lower_p(const std::string& arg) {
  if (arg.empty() || arg.size() > 5 || arg.find_first_not_of("0123456789") != std::string::npos ||
      !after_lower_p().count(arg))
    return "";
  return arg + ": no such file; the port is -P " + arg + " (as in scp); -p preserves times and modes";
}

void add_transfer_options(CLI::App* sub, TransferOpts& t, bool& no_aesni) {
  sub->add_option("-c,--cipher", t.cipher, "Cipher (default aes128-gcm); see --list-ciphers")
      ->type_name("CIPHER");
  sub->add_option("-m,--mac", t.mac, "MAC for non-AEAD ciphers (default hmac-sha256)")->type_name("MAC");
  sub->add_option("-P,--port", t.port, "Server port (default 7227)")
      ->check(whole_number(1, 65535, "a port number"))
      ->type_name("PORT");
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
      ->check(CLI::Validator(
          [](std::string& s) {  // --keylog "$UNSET" wrote nothing without a word (a 28th re-attack, N4)
            return s.empty() ? std::string("an empty name ('') names no file") : std::string();
          },
          "FILE"))
      ->type_name("FILE");
  sub->add_option("--timeout", t.timeout, "Seconds to wait on the network before giving up (default 30)")
      ->check(timeout_seconds())
      ->type_name("SECONDS");
  sub->add_flag("--no-aesni", no_aesni, "Use the portable crypto code");
  sub->add_flag(
      "-p,--preserve", t.preserve,
      "Preserve modification time and mode (else: mode masked by the receiver's umask, time of arrival)");
  sub->add_option("-l,--limit", t.limit_kbit,
                  "Limit the bandwidth to RATE Kbit/s, like scp -l; M and G suffixes for Mbit/s and Gbit/s "
                  "(80M = 80000)")
      ->transform(kbit_rate(1e8))
      ->type_name("RATE");
  sub->add_flag("--json-progress", t.json_progress, "JSON progress lines about every 0.5 s and a final one");
  sub->add_option("--streams", t.streams,
                  "TCP connections per file, by byte range (default 0 = auto: more than one only when the "
                  "round trip is 10 ms or more; 1 = never)")
      ->check(whole_number(0, 16))
      ->type_name("N");
  sub->add_option(
         "--congestion", t.congestion,
         "TCP congestion control for the data this side sends: auto (default: bbr where the kernel allows "
         "it, else the host default; -v says which and why), system (the host default) or a name")
      ->type_name("auto|system|NAME");
  sub->add_option("--checksum", t.checksum,
                  "Whole-file checksum in every end record: xxh128 (default), sha256 or none")
      ->type_name("ALG");
  sub->add_option("--record-size", t.record_size,
                  "Payload bytes per record, 4K to 1M (default 256K; the server may lower it)")
      ->transform(byte_size(proto::kMinRecordSize, proto::kMaxRecordSize))
      ->type_name("SIZE");
  sub->add_flag(
      "-v,--verbose", t.verbose,
      "Say more on stderr (debug1: lines): the handshake, host key, cipher and implementation, streams, "
      "socket buffers, round trip; the file's checksum on the summary line. -vv: more");
  sub->add_option(
         "--retries", t.retries,
         "New connections after a lost one (reset, closed, timed out) in this command, each after "
         "1, 2, 4 ... s; the transfer resumes as with --resume (default 5; 0: end at the first loss)")
      ->check(whole_number(0, 100))
      ->type_name("N");
  sub->add_flag("--strict-host-keys", t.strict_host_keys,
                "Refuse a server whose key is not yet in known_hosts (else it is added, and said so)");
}

std::set<std::string> given_options(const CLI::App* sub) {
  std::set<std::string> out;
  for (const CLI::Option* o : sub->get_options())
    if (o->count() > 0)
      for (const auto& n : o->get_lnames()) out.insert(n);
  return out;
}

}  // namespace aesxfer::app
