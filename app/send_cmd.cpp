// aesxfer send: the command line's sources and destination checked, then the files of one send
// over one connection (client/send_tree.h) shown and reported here.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "app/cli.h"
#include "client/send_tree.h"
#include "files/atomic_file.h"
#include "files/io.h"
#include "files/keystore.h"

namespace aesxfer::app {

namespace fs = std::filesystem;

namespace {

// The usage errors among a send's sources, found before anything moves: "-" given twice or with
// --resume, a port given after -p. Returns the exit status after printing the line, or 0.
int check_send_usage(const std::vector<std::string>& args, const TransferOpts& t) {
  if (std::count(args.begin(), args.end() - 1, "") > 0) {  // a twentieth re-attack, N8: ": no such file"
    die_line("send: an empty name ('') is no file");
    return kExitUsage;
  }
  if (std::count(args.begin(), args.end() - 1, "-") > 1) {
    die_line("send: - (standard input) given twice");
    return kExitUsage;
  }
  if (t.resume && std::find(args.begin(), args.end() - 1, "-") != args.end() - 1) {
    die_line("send: - (standard input) cannot be resumed: it is read only once (drop --resume)");
    return kExitUsage;
  }
  if (std::find(args.begin(), args.end() - 1, "-") != args.end() - 1 && !files::inherited_descriptor(0)) {
    die_line("send: - (standard input) was not open when aesxfer started");
    return kExitUsage;
  }
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    struct stat st {};
    if (std::string p = port_after_lower_p(args[i]); !p.empty() && ::stat(args[i].c_str(), &st) != 0) {
      die_line("send: " + p);
      return kExitUsage;
    }
  }
  const auto remote = parse_remote(args.back());
  if (args.size() > 2 && remote && remote->path != "/dev/null") {
    const std::vector<std::string> sources(args.begin(), args.end() - 1);
    std::vector<std::string> absolute;
    // "-" is stored as "stdin" (send_stdin): a file of that name beside it went under it, exit 0
    // (a sixteenth re-attack, L4).
    for (const auto& s : sources)
      absolute.push_back(s == "-" ? std::string("stdin") : fs::absolute(s).string());
    if (!distinct_names("send", sources, absolute)) return kExitUsage;
  }
  return 0;
}

// The local sources of a send, checked before connecting (scp semantics): one that is missing or
// unreadable is reported in one line (rc becomes 1), the others still go. "-" is standard input,
// read as it comes when its turn comes (an unsized put, docs/PROTOCOL.md 3.3).
// For a missing source of the shape HOST:PATH: that send reads local files (a twenty-seventh
// re-attack, N5: "127.0.0.1:f: no such file or directory" read like the server's answer).
std::string remote_source_hint(const std::string& arg) {
  if (!parse_remote(arg)) return "";
  return " (send's sources are local files; to fetch from a server, aesxfer recv " + net::printable(arg) +
         " DEST)";
}

std::vector<std::string> check_sources(const std::vector<std::string>& args, const TransferOpts& t, int& rc) {
  std::vector<std::string> sources;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "-") {
      sources.push_back(args[i]);
      continue;
    }
    // A source refused here gets its line and, with --json, its object (a twenty-seventh
    // re-attack, N1: none), ahead of the objects of the files that move.
    const auto refuse = [&](const std::string& why) {
      const std::string line = net::printable(args[i]) + ": " + why;
      die_line(line);
      json_failed(t, args[i], line);
      rc = kExitFail;
    };
    struct stat st {};
    if (::stat(args[i].c_str(), &st) != 0) {
      refuse(files::errno_text(errno) + remote_source_hint(args[i]));
      continue;
    }
    if (S_ISDIR(st.st_mode) && !t.recursive) {
      refuse("is a directory (use -r)");
      continue;
    }
    if (!S_ISDIR(st.st_mode) && ::access(args[i].c_str(), R_OK) != 0) {
      refuse(files::errno_text(errno));
      continue;
    }
    sources.push_back(args[i]);
  }
  return sources;
}

// The files of one send over one connection: the tree sender (client/send_tree.h) moves them,
// this shows and reports them (rc becomes 1 on any failure).
struct SendSession {
  const TransferOpts& t;
  const client::ClientOptions& co;
  client::Client& client;
  bool tty;
  Retrier* retry = nullptr;                  // --retries: a lost connection is kept here, not reported
  std::set<std::string>* settled = nullptr;  // sources reported (sent, up to date or failed alone)
  // Files sent whole whose answers a lost connection took (Failure::maybe_placed), by key(): if no
  // retry settles them, the command's last word calls them "not confirmed", never "not sent".
  std::set<std::string>* maybe_placed = nullptr;
  // Of those, the files whose end the peer's TCP acknowledged, by key(): one a retry's probe then
  // finds in place was moved by this command (FileResult::sent_before_the_loss). A file the lost
  // connection did not take whole, found in place, was there already (a sixtieth re-attack, O60-2).
  std::set<std::string>* sent_whole = nullptr;
  // The files an earlier session wrote whole and never had answered (SendProgress::unconfirmed),
  // by key(): a signal counts them until this session has its own word on each (its probe
  // answered, its put under way) or reports it (a sixtieth re-attack, O60-3: the login cleared
  // the count, and a Ctrl-C in the retry's first probe said nothing of them).
  std::set<std::string> unanswered_before{};
  app::RateLimiter limiter{t.limit_kbit};
  int rc = 0;
  std::optional<proto::Failure> lost{};  // the connection failure a retry may make good
  client::TreeSender sender{client, hooks(), t.preserve};

  // True when `f` is a lost connection that --retries takes over: kept (the first one) and not
  // reported; the transfer goes on in a new session.
  // `file`, when it is a file's verdict: one the server may have put in place is remembered
  // (maybe_placed), so that the last word says "not confirmed" if no retry settles it.
  bool keep_for_retry(const proto::Failure& f, const std::string* file = nullptr) {
    if (!retry || !retry->worth(f)) return false;
    if (!lost) lost = f;
    if (file && f.maybe_placed && maybe_placed) maybe_placed->insert(key(*file));
    if (file && f.maybe_placed && f.end_acknowledged && sent_whole) sent_whole->insert(key(*file));
    return true;
  }
  // What a file the retry found whole in place owes to a lost session: sent whole then, or only
  // written whole (whose bytes made the match is not known); else it was there already, "up to
  // date". Only a file found in place: one the retry sent again moved as any other (a sixtieth
  // re-attack, O60-1: --json said sent_before_the_loss of it).
  void before_the_loss(client::FileResult& r, const std::string& file) const {
    if (!r.found_in_place()) return;
    r.sent_before_the_loss = sent_whole && sent_whole->count(key(file));
    r.written_before_the_loss = !r.sent_before_the_loss && maybe_placed && maybe_placed->count(key(file));
  }
  // This session has its own word on `shown`: an earlier session's unanswered file is no longer
  // counted as such by a signal.
  void answered_again(const std::string& shown) {
    if (unanswered_before.erase(key(shown))) files::set_unanswered_before(int(unanswered_before.size()));
  }
  // The source whose files are being reported ("" for a file named on the command line): a file
  // of a tree is settled under it, so that a file found in two sources (`send -r l l/d1`), stored
  // twice, is reported for each copy, not taken the second time for a report already made (a
  // forty-eighth re-attack, B48-6). Changed only with no answer outstanding (enter()).
  std::string scope{};
  std::string key(const std::string& shown) const { return scope.empty() ? shown : scope + '\0' + shown; }
  void settle(const std::string& shown) {
    if (settled) settled->insert(key(shown));
    answered_again(shown);
  }
  bool is_settled(const std::string& shown) const { return settled && settled->count(key(shown)); }
  // Reports the answers still outstanding under the scope they belong to, then enters `next`;
  // false when the connection failed meanwhile.
  bool enter(const std::string& next) {
    if (next == scope) return true;
    if (!sender.finish()) return false;
    scope = next;
    return true;
  }
  // A tree's skip and failure lines once per command, not again in each session after a retry (a
  // thirty-fifth re-attack, B-N13).
  std::set<std::string>* said = nullptr;
  bool said_first(const std::string& line) { return !said || said->insert(line).second; }

  client::TreeSender::Hooks hooks() {
    client::TreeSender::Hooks h;
    h.send_one = [this](const fs::path& local, int fd, const std::string& to) {
      return send_one(local, to, fd);
    };
    // A file reported in an earlier session is not reported again when a retry finds it there
    // (a sixteenth re-attack, L2: every file of a tree once more per retry, in --json too).
    h.verdict = [this](const std::string& shown, const client::FileResult* r, const proto::Failure* f) {
      if (f && keep_for_retry(*f, &shown)) return;
      if (r && is_settled(shown)) return;
      report_pipelined(t, co, tty, shown, r, f, rc);
      settle(shown);
    };
    // One this command sent whole before the loss, which the retry found in place, is not "up to
    // date, nothing moved" (a fifty-ninth re-attack, L59-4): the command moved it.
    h.up_to_date = [this](const client::FileResult& done) {
      if (is_settled(done.file)) return;
      client::FileResult r = done;
      before_the_loss(r, done.file);
      report(t, co, r, tty);
      settle(done.file);
    };
    h.failed = [this](const proto::Failure& f) {
      if (keep_for_retry(f)) return;
      if (said_first(f.what())) die_line(f.what());
      rc = kExitFail;
    };
    h.note = [](const std::string& line) { die_line(line); };
    h.sending = [this](const std::string& shown) { answered_again(shown); };
    // Left out by -q, as recv -r's and scp -q's (a twentieth re-attack, N7: send -r showed them).
    h.skipped = [this](const std::string& line) {
      if (!t.quiet && said_first(line)) die_line(line);
    };
    h.not_sent = [this](const std::string& shown) {
      if (lost || is_settled(shown)) return;  // a retry sends it
      report_not_moved(t, co, tty, shown, "not sent", rc);
      settle(shown);
    };
    return h;
  }

  // One file moved by `put` (given the meter's callbacks) and reported; false after a failure (the
  // connection may be mid-stream: stop there). The progress line is on `prog_out` when `shown`.
  template <class Put>
  bool metered(app::Progress& prog, app::JsonProgress& jp, bool shown, std::FILE* prog_out,
               const std::string& file, const Put& put) {
    FileMeter meter{prog, jp, limiter, client, prog_out == stdout};
    try {
      client::FileResult r = put(meter);
      meter.finish(r);
      before_the_loss(r, file);  // L59-4, as up_to_date's
      report(t, co, r, tty);
      settle(r.file);
      return true;
    } catch (const proto::Failure& f) {
      if (shown) std::fputc('\n', prog_out);
      if (keep_for_retry(f, &file)) return false;
      // The line, and with --json the file's own object, as for a pipelined file (a sixteenth
      // re-attack, L3: a large file that failed had no object).
      report_pipelined(t, co, tty, file, nullptr, &f, rc, &jp);
      return false;
    }
  }

  bool send_one(const fs::path& local, const std::string& to, int fd = -1) {
    app::Progress prog(net::printable(local.filename().string()), tty);
    app::JsonProgress jp(local.string(), t.json_progress);
    const bool ok = metered(prog, jp, tty, stdout, local.string(), [&](FileMeter& m) {
      const auto on_start = m.on_start();  // after its probe: from here this session has its word
      const auto started = [&](uint64_t size) {
        answered_again(local.string());
        if (on_start) on_start(size);
      };
      return client.put(local, to, started, m.on_progress(), "", fd);
    });
    if (!ok && !lost) settle(local.string());  // failed alone, reported: not sent again by a retry
    return ok;
  }

  // send -: standard input as it comes, under the name "stdin" in a directory; its progress line
  // (bytes and rate, no total) goes to stderr. False when a failure stopped the connection.
  bool send_stdin(const std::string& to) {
    if (!sender.finish()) return false;
    retry = nullptr;  // standard input is read once: its loss cannot be made good
    const bool err_tty = !t.quiet && !t.json && !t.json_progress && ::isatty(STDERR_FILENO);
    app::Progress prog("stdin", err_tty, stderr);
    app::JsonProgress jp("-", t.json_progress);
    return metered(prog, jp, err_tty, stderr, "-",
                   [&](FileMeter& m) {
                     client::FileResult r =
                         client.put_stream(STDIN_FILENO, to, "stdin", m.on_start(), m.on_progress());
                     r.file = "-";
                     return r;
                   }) ||
           client.can_continue();
  }
};

// Reports each of `rest` not yet settled as not moved: an earlier file's failure ended the session.
void not_sent(const TransferOpts& t, const client::ClientOptions& co, bool tty,
              const std::vector<std::string>& rest, std::set<std::string>& settled, int& rc) {
  for (const auto& src : rest) {
    if (!settled.insert(src).second) continue;
    report_not_moved(t, co, tty, src, "not sent", rc);
  }
}

// What a send has done across its sessions (--retries): the sources reported, and where each
// tree went on the server.
struct SendProgress {
  std::set<std::string> settled;
  std::map<std::string, client::TreeSender::Placed> placed;
  std::set<std::string> said;          // lines of skipped and failed entries already shown
  std::set<std::string> maybe_placed;  // SendSession::maybe_placed
  std::set<std::string> sent_whole;    // SendSession::sent_whole

  // The files sent whole whose answers were lost that no later session settled, by key(): what a
  // signal during the retry's wait counts, and what the command's last word calls "not confirmed".
  std::vector<std::string> unconfirmed() const {
    std::vector<std::string> keys;
    for (const auto& k : maybe_placed)
      if (!settled.count(k)) keys.push_back(k);
    return keys;
  }
};

// The files an earlier session sent whole and lost the answers of, which no later session
// settled: each named "not confirmed" (a fifty-fifth re-attack, B55-1: the last word called them
// "not sent" though the server had put them in place). The caller settles them.
void not_confirmed(const TransferOpts& t, const client::ClientOptions& co, bool tty,
                   const std::vector<std::string>& keys, int& rc) {
  for (const auto& k : keys)
    report_not_moved(t, co, tty, k.substr(k.find('\0') + 1), "not confirmed", rc,
                     "an earlier session sent it whole and no answer came: whether the server put it in "
                     "place is not known");
}

// One session of a send: the sources not yet settled, over one connection. A lost connection that
// --retries takes over comes back in `lost`, unreported; any other failure is reported. Returns the
// exit status so far (0 or kExitFail). Throws Failure when the session cannot start.
int send_session(const std::vector<std::string>& sources, const std::string& dest, bool check_dir,
                 const TransferOpts& t, const client::ClientOptions& co, bool tty, Retrier& retry,
                 SendProgress& done, std::optional<proto::Failure>& lost) {
  client::Client client(co);
  retry.logged_in();
  // Several sources go into a directory: refused before anything is written when DEST is not
  // an existing directory on the server (else each file would replace the one before).
  // Each source is named too, with --json in an object of its own. A DEST that is not there is
  // "not a directory", the same words a single file sent to a missing DEST/ gets from the server.
  if (check_dir && dest != "/dev/null" && !client.is_remote_dir(dest)) {
    const std::string why = client.remote_name(net::printable(dest)) + ": not a directory";
    die_line(why + client.port_note());
    int rc = kExitFail;
    if (t.json || t.json_progress)  // and --json-progress's final lines (a thirty-third re-attack, B-N1)
      for (const auto& src : sources) report_not_moved(t, co, tty, src, "not sent", rc, why);
    client.bye();
    return kExitFail;
  }
  SendSession s{t, co, client, tty, &retry, &done.settled};
  s.said = &done.said;
  s.maybe_placed = &done.maybe_placed;
  s.sent_whole = &done.sent_whole;
  const std::vector<std::string> before = done.unconfirmed();  // counted until this session's word (O60-3)
  s.unanswered_before.insert(before.begin(), before.end());
  std::vector<std::string> trees;
  bool stopped = false;  // after a failure mid-stream: the connection cannot go on
  size_t i = 0;
  for (; i < sources.size() && !stopped; ++i) {
    if (done.settled.count(sources[i])) continue;
    const fs::path local = sources[i];
    std::error_code ec;
    const bool tree = sources[i] != "-" && fs::is_directory(local, ec);
    if (!s.enter(tree ? sources[i] : "")) {
      stopped = true;
      break;
    }
    if (sources[i] == "-") {
      stopped = !s.send_stdin(dest);
      if (!s.lost) s.settle("-");
    } else if (tree) {
      stopped = !s.sender.send_tree(local, dest, &done.placed[sources[i]]);
      trees.push_back(sources[i]);
    } else {
      stopped = !s.sender.send_file(local, dest);
    }
  }
  if (!stopped) s.sender.finish();
  s.scope.clear();
  if (s.lost) {
    lost = s.lost;
    return s.rc;
  }
  // The sources after a failure that ended the session: each named, in --json too, never left
  // out in silence (a nineteenth re-attack, N2).
  if (stopped)
    not_sent(t, co, tty, std::vector<std::string>(sources.begin() + long(i), sources.end()), done.settled,
             s.rc);
  for (const auto& tr : trees) s.settle(tr);
  client.bye();
  return s.rc;
}

int cmd_send(const std::vector<std::string>& args, const TransferOpts& t_in) {
  if (args.size() < 2) {
    const char* usage = " (aesxfer send FILE... HOST:DEST)";
    if (args.empty())
      die_line(std::string("send: nothing to send") + usage);
    else if (parse_remote(args[0]))
      die_line("send: no file to send to " + net::printable(args[0]) + usage);
    else
      die_line("send: '" + net::printable(args[0]) + "' needs a destination after it" + usage);
    return kExitUsage;
  }
  auto remote = parse_remote(args.back());
  if (!remote) {
    die_line("send: the last argument must be HOST:DEST (got '" + net::printable(args.back()) + "')" +
             ipv6_hint(args.back()));
    return kExitUsage;
  }
  if (!check_remote(*remote, t_in.quiet, "/dev/null")) return kExitUsage;
  if (int usage = check_send_usage(args, t_in)) return usage;
  TransferOpts t = t_in;
  client::ClientOptions co;
  if (!apply_host_config(t, remote->host, co.host) || !pick_suite(t, co)) return kExitUsage;
  co.connect_hint = port_in_path_hint(*remote);
  const std::string dest = remote->path.empty() ? "." : remote->path;
  const bool tty = !t.quiet && !t.json && !t.json_progress && ::isatty(STDOUT_FILENO);
  int rc = 0;
  const std::vector<std::string> sources = check_sources(args, t, rc);
  if (sources.empty()) return kExitFail;
  Retrier retry(t.retries);
  SendProgress done;
  for (bool first = true;; first = false) {
    std::optional<proto::Failure> lost;
    try {
      if (const int r = send_session(sources, dest, first && args.size() > 2, t, co, tty, retry, done, lost))
        rc = r;
    } catch (const proto::Failure& f) {
      if (!retry.worth(f)) {
        const std::vector<std::string> unsure = done.unconfirmed();  // named after the failure
        done.settled.insert(unsure.begin(), unsure.end());
        std::vector<std::string> unreported;
        for (const auto& src : sources)
          if (!done.settled.count(src)) unreported.push_back(src);
        const int r = end_with_unreported(t, f, unreported, "not sent", args.size() > 2);
        not_confirmed(t, co, tty, unsure, rc);
        return r;
      }
      lost = f;
    } catch (const std::exception& e) {
      die_line(e.what());
      return kExitFail;
    }
    if (!lost) break;
    files::set_unanswered_before(int(done.unconfirmed().size()));  // until the next session's word (O60-3)
    retry.wait(*lost, co.resume);
    t.retried += retry.take();
    retry.resume(co);  // from here on, what the server kept is verified and continued
  }
  // Files an earlier session sent whole whose answers were lost, which no later session settled
  // (removed here before the retry walked its tree): named, as when the retry cannot connect (a
  // sixty-first re-attack, S61-2: they were named nowhere, exit 0).
  const std::vector<std::string> unsure = done.unconfirmed();
  done.settled.insert(unsure.begin(), unsure.end());
  not_confirmed(t, co, tty, unsure, rc);
  return rc;
}

}  // namespace

CommandRun setup_send(CLI::App* send, bool& no_aesni) {
  struct Args {
    TransferOpts t;
    std::vector<std::string> args;
  };
  auto a = std::make_shared<Args>();
  send->add_option("args", a->args, "FILE... HOST:DEST")
      ->type_name("FILE... HOST:DEST");  // counted in cmd_send
  add_transfer_options(send, a->t, no_aesni);
  send->add_flag("-r,--recursive", a->t.recursive, "Send directories recursively");
  send->add_flag("--resume", a->t.resume,
                 "Continue an interrupted send from what the server kept (docs/PROTOCOL.md)");
  return [a, send] {
    files::install_cleanup_on_signals();
    a->t.given = given_options(send);
    return cmd_send(a->args, a->t);
  };
}

}  // namespace aesxfer::app
