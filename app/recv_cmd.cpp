// aesxfer recv: one file, several files (pipelined when they are on one host and small), or a
// tree (-r, client/recv_tree.h), shown and reported here.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "app/cli.h"
#include "app/cli_checks.h"
#include "client/pipeline.h"
#include "client/recv_tree.h"
#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/io.h"

namespace aesxfer::app {

namespace fs = std::filesystem;

namespace {

// A recv that ends on a failure: its line (with `hint` added when the peer refused with
// `hinted`), a Bye while the session still carries messages, exit 1.
int end_on_failure(const proto::Failure& f, client::Client* c, proto::Status hinted = proto::Status::ok,
                   const char* hint = "") {
  die_line(f.origin == net::Origin::peer && f.status == hinted ? with_hint(f.what(), hint) : f.what());
  if (c) c->bye();
  return kExitFail;
}

// `f` as the line of `source`'s failure: "SOURCE: " before its words unless they begin so ("" as is).
proto::Failure source_named(const proto::Failure& f, const std::string& source) {
  const std::string name = net::printable(source) + ": ";
  if (source.empty() || std::string_view(f.what()).substr(0, name.size()) == name) return f;
  return f.reworded(name + f.what());
}

// A directory refused as a file source gets " (use -r)".
proto::Failure use_r_hint(const proto::Failure& f) {
  return f.reworded(f.origin == net::Origin::peer && f.status == proto::Status::is_directory
                        ? with_hint(f.what(), " (use -r)")
                        : std::string(f.what()));
}

int cmd_recv_tree(const std::string& src, const std::string& dest, const TransferOpts& t, Retrier& retry);
// What the sessions of one recv -r command share (--retries).
struct TreeMemory {
  // What recv_tree keeps across sessions; its `settled` filled here, as files are reported.
  client::TreeSessions tree;
  // The failures (path and words) and notes shown: a retry meets them again and does not repeat
  // them (a sixteenth re-attack, L2; a fifty-third, C53-2: every skip note again per session).
  client::SeenSet said;
};
int recv_tree_session(const std::string& src, const std::string& dest, const TransferOpts& t,
                      const client::ClientOptions& co, bool tty, app::RateLimiter& limiter, Retrier& retry,
                      int& rc, std::optional<proto::Failure>& lost, TreeMemory& memory);

// What recv_many leaves to its caller: nothing (`rc` is the exit status), or every source one by
// one, each on its own connection (the sources name several hosts, or the connection was lost
// and --retries takes over: then retry.used() > 0 and each source resumes, keeping or verifying
// what was fetched).
struct ManyOutcome {
  enum class Then { done, one_by_one } then = Then::done;
  int rc = 0;
  // one_by_one after a lost link: the sources already reported (their line and --json object),
  // which the retry leaves alone (a twenty-third re-attack, N1: each was reported again).
  std::vector<char> settled;
};

// True when a lost get into `dest` may be tried again: a file, or nothing yet, there (a FIFO, a
// device or standard output takes the bytes as they come: a second attempt would repeat them).
bool retryable_destination(const std::string& dest, const std::string& remote_path, bool to_stdout) {
  // A descriptor named by path (/dev/fd/3 on a regular file) is written through from where it
  // stands: a retry would append the file again after the first attempt's bytes (a seventeenth
  // re-attack, M2: 25 MB of a 20 MB file, "verified", exit 0).
  struct stat st {};
  if (to_stdout || client::written_through(dest)) return false;
  if (::stat(dest.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return true;
  if (!S_ISDIR(st.st_mode)) return false;
  // Into a directory, the file written is DEST/NAME, judged the same way: a FIFO or a link to a
  // descriptor there got the first attempt's bytes and then the whole file again, "verified",
  // exit 0, and a FIFO whose reader had gone held the retry in open() for good (a fifty-first
  // re-attack, C51-4).
  const fs::path inside = fs::path(dest) / fs::path(remote_path).filename();
  return !client::written_through(inside) && (::stat(inside.c_str(), &st) != 0 || S_ISREG(st.st_mode));
}

using client::kKeptNote;

// Whether a partial file --resume would adopt (files::ownership_problem, as partial_distrust) is
// kept beside `at`, the file a get writes.
bool keeps_partial(const fs::path& at) {
  struct stat st {};
  return ::lstat((at.parent_path() / files::partial_name(at.filename().string())).c_str(), &st) == 0 &&
         S_ISREG(st.st_mode) && st.st_size > 0 && files::ownership_problem(st, S_IWGRP | S_IWOTH).empty();
}

// The last failure of a resumable get, with the partial file it leaves named as the first lost
// connection's line names it (a twenty-seventh re-attack, N8: the last line, after the retries,
// did not say that what arrived was kept).
proto::Failure with_kept_note(const proto::Failure& f, const client::ClientOptions& co, const fs::path& local,
                              const std::string& remote) {
  // Only for a lost connection, and a partial file --resume would adopt (a twenty-eighth
  // re-attack, N2: the note also followed the server's "no such file" and another user's planted
  // file).
  if (!co.resume || f.origin == net::Origin::peer || f.status == proto::Status::busy ||
      std::string_view(f.what()).find(kKeptNote) != std::string_view::npos)
    return f;
  std::error_code ec;
  const fs::path at = fs::is_directory(local, ec) ? local / fs::path(remote).filename() : local;
  if (!keeps_partial(at)) return f;
  return f.reworded(std::string(f.what()) + std::string(kKeptNote));
}

// `f` without the note on a kept partial file, which belongs to the one file whose get it ended.
proto::Failure without_kept_note(const proto::Failure& f) {
  std::string what = f.what();
  if (const size_t at = what.find(kKeptNote); at != std::string::npos) what.erase(at, kKeptNote.size());
  return f.reworded(what);
}

// `lost`, when given, is set when the command's connection to the source's host failed for good
// (a lost or refused connection with no retry left): the caller stops asking that host.
// `several`: the command named several sources, and the line of this one's failure names it
// (the fifty-sixth session's find: "cannot connect ..." after a retry named none).
int cmd_recv(const std::string& src, const std::string& dest, uint64_t zero_size, const TransferOpts& t_in,
             Retrier& retry, std::string* lost = nullptr, bool several = false) {
  auto remote = parse_remote(src);
  if (!remote) {
    die_line("recv: the first argument must be HOST:PATH (got '" + net::printable(src) + "')");
    return kExitUsage;
  }
  if (!check_remote(*remote, t_in.quiet, "/dev/zero")) return kExitUsage;
  if (t_in.recursive) {
    if (dest == "-") {
      die_line("recv: -r cannot write a directory to standard output");
      return kExitUsage;
    }
    return cmd_recv_tree(src, dest, t_in, retry);
  }
  TransferOpts t = t_in;
  client::ClientOptions co;
  if (!apply_host_config(t, remote->host, co.host) || !pick_suite(t, co)) return kExitUsage;
  co.connect_hint = port_in_path_hint(*remote);
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
  const bool may_retry = retryable_destination(dest, remote->path, to_stdout);
  app::JsonProgress jp(remote->path, t.json_progress, msg);  // one file's lines, across the retries
  for (;;) {
    // From the command's first retry on (in this source or an earlier one, or recv_many's), what
    // arrived is kept beside DEST and verified before the rest comes.
    if (retry.used() > 0) retry.resume(co);
    std::unique_ptr<client::Client> client;
    try {
      client = std::make_unique<client::Client>(co);
      retry.logged_in();
      app::Progress prog(net::printable(fs::path(remote->path).filename().string()), tty && !t.json_progress,
                         msg);
      app::RateLimiter limiter(t.limit_kbit);
      FileMeter meter{prog, jp, limiter, *client};
      auto r = client->get(remote->path, local, zero_size, meter.on_start(), meter.on_progress());
      meter.finish(r);
      t.retried = retry.take();  // this file's, and those of a lost session it was in flight in
      report(t, co, r, tty, msg);
      client->bye();
      return 0;
    } catch (const proto::Failure& f) {
      if (tty) std::fputc('\n', msg);
      const bool last = !may_retry || !retry.worth(f);
      // The reason the later sources of this host are not fetched: without the note on what this
      // file kept (a thirty-fifth re-attack, B-N6: each of them said "partial file kept").
      if (last && lost && f.origin == net::Origin::link) {
        *lost = f.what();
        if (const size_t at = lost->find(kKeptNote); at != std::string::npos)
          lost->erase(at, kKeptNote.size());
      }
      // Its object too (N2), on standard error when the data is on standard output (a thirty-sixth
      // re-attack, B4: recv --json host:f - gave a failed source none).
      if (last) {
        const proto::Failure hinted = use_r_hint(with_kept_note(f, co, local, remote->path));
        if (int rc = 0; t.json) {
          report_pipelined(t, co, tty, remote->path, nullptr, &hinted, rc, &jp, msg);
          if (client) client->bye();
          return kExitFail;
        }
        const proto::Failure said = source_named(hinted, several ? remote->path : "");
        jp.fail(said.what(), said.size);  // --json-progress's last line (stderr if data is on stdout)
        return end_on_failure(said, client.get());
      }
      retry.wait(source_named(f, several ? remote->path : ""), co.resume);
    } catch (const std::exception& e) {
      die_line(e.what());
      return kExitFail;
    }
  }
}

// recv -r: the listing, then one get per file on the same connection (client/recv_tree.h).
int cmd_recv_tree(const std::string& src, const std::string& dest, const TransferOpts& t_in, Retrier& retry) {
  auto remote = parse_remote(src);
  TransferOpts t = t_in;
  client::ClientOptions co;
  if (!apply_host_config(t, remote->host, co.host) || !pick_suite(t, co)) return kExitUsage;
  co.connect_hint = port_in_path_hint(*remote);
  bool tty = !t.quiet && !t.json && !t.json_progress && ::isatty(STDOUT_FILENO);
  app::RateLimiter limiter(t.limit_kbit);
  int rc = 0;  // a file that failed alone (pipelined): reported, the others go on, exit 1
  TreeMemory memory;
  for (;;) {
    std::optional<proto::Failure> lost;
    if (const int r = recv_tree_session(src, dest, t, co, tty, limiter, retry, rc, lost, memory); !lost)
      return r;
    retry.wait(*lost, co.resume);
    t.retried += retry.take();
    retry.resume(co);  // the copy goes on where it stopped (client/tree_resume.h)
  }
}

// The files an earlier listing held that a later one did not (TreeSessions::vanished): each
// "not fetched", with the note on a partial file kept for it.
void report_vanished(const TransferOpts& t, const client::ClientOptions& co, bool tty, TreeMemory& memory,
                     int& rc) {
  for (const auto& file : std::exchange(memory.tree.vanished, {}))
    if (memory.tree.settled.insert(file.remote))
      report_not_moved(t, co, tty, file.remote, "not fetched", rc,
                       file.remote + ": gone from the server before the retry listed the tree again" +
                           std::string(co.resume && keeps_partial(file.local) ? kKeptNote : ""));
}

// The end of a recv -r on failure `f` (its note on a kept partial file taken away): each file of
// the listing not yet reported is named (I58-7), with that note where its partial file is kept
// (a sixtieth re-attack, O60-5: every file and the tree said so), then the tree.
int end_tree(const TransferOpts& t, const client::ClientOptions& co, bool tty, const proto::Failure& f,
             const std::string& tree, TreeMemory& memory, int& rc, client::Client* client) {
  report_vanished(t, co, tty, memory, rc);
  for (const auto& file : std::exchange(memory.tree.files, {}))
    if (memory.tree.settled.insert(file.remote))
      report_not_moved(t, co, tty, file.remote, "not fetched", rc,
                       f.what() + std::string(co.resume && keeps_partial(file.local) ? kKeptNote : ""));
  // With --json the tree's object too (a twenty-seventh re-attack, N2: none).
  json_failed(t, tree,
              f.origin == net::Origin::peer && f.status == proto::Status::not_directory
                  ? with_hint(f.what(), " (recv -r fetches directories; a file without -r)")
                  : std::string(f.what()));
  return end_on_failure(f, client, proto::Status::not_directory,
                        " (recv -r fetches directories; a file without -r)");
}

// One session of recv -r; a lost connection that --retries takes over comes back in `lost`.
int recv_tree_session(const std::string& src, const std::string& dest, const TransferOpts& t,
                      const client::ClientOptions& co, bool tty, app::RateLimiter& limiter, Retrier& retry,
                      int& rc, std::optional<proto::Failure>& lost, TreeMemory& memory) {
  auto remote = parse_remote(src);
  std::unique_ptr<client::Client> client;
  // A failure fails the command even when its words were shown by an earlier session: a file
  // reported there that is now a directory fails under the same path with its own words, and was
  // dropped with the success, exit 0 (a fifty-third re-attack, C53-1).
  const auto failed = [&](const std::string& from, const proto::Failure& f, app::JsonProgress* jp) {
    memory.tree.settled.insert(from);
    if (memory.said.insert(from + '\n' + f.what())) report_pipelined(t, co, tty, from, nullptr, &f, rc, jp);
    rc = kExitFail;
  };
  try {
    client = std::make_unique<client::Client>(co);
    retry.logged_in();
    auto fetch_one = [&](const std::string& from, const fs::path& to, uint64_t size, int dirfd) {
      app::Progress prog(net::printable(to.filename().string()), tty);
      app::JsonProgress jp(from, t.json_progress);
      FileMeter meter{prog, jp, limiter, *client};
      try {
        auto r = client->fetch(from, to, 0, meter.on_start(), meter.on_progress(), size, dirfd);
        meter.finish(r);
        if (memory.tree.settled.insert(from)) report(t, co, r, tty);
      } catch (const proto::Failure& f) {
        if (tty) std::fputc('\n', stdout);
        // The server refused this file (it cannot read it, it went since the listing): this file
        // alone, as for a pipelined one; the rest of the tree comes (a twelfth re-attack, G1: a
        // large file refused ended the tree). A link or local failure still ends the session
        // (recv_tree reports a local one, and the files after it: client::TreeEnded).
        if (f.origin != proto::Origin::peer) throw;
        failed(from, f, &jp);
      }
    };
    // What the tree holds that -r skips by design (links, special files): left out by -q, as scp -q
    // drops its warnings; failures are always shown.
    auto note = [&](const std::string& line) {
      if (!t.quiet && memory.said.insert(line)) die_line(line);
    };
    auto pipelined = [&](const std::string& from, const fs::path&, const client::FileResult* r,
                         const proto::Failure* f) {
      if (f && f->origin == proto::Origin::link && retry.worth(*f)) return;  // the retry fetches it
      if (f)
        failed(from, *f, nullptr);
      else if (memory.tree.settled.insert(from))
        report_pipelined(t, co, tty, from, r, nullptr, rc);
    };
    client::recv_tree(*client, remote->path, dest, t.preserve, fetch_one, note, pipelined, &memory.tree);
    client->bye();
    report_vanished(t, co, tty, memory, rc);
    if (rc) return rc;
  } catch (const client::TreeEnded&) {  // every file already named
    return kExitFail;
  } catch (const proto::Failure& f) {
    if (retry.worth(f)) {
      report_vanished(t, co, tty, memory, rc);
      lost = f;
      return kExitFail;
    }
    return end_tree(t, co, tty, without_kept_note(f), remote->path, memory, rc, client.get());
  } catch (const std::exception& e) {
    die_line(e.what());
    return kExitFail;
  }
  return 0;
}

// A source of recv_many too large to pipeline, fetched alone with its meter. False when its failure
// ended the session (the caller names the sources after it); a lost link worth a retry is thrown.
bool fetch_alone(client::Client& client, const std::string& from, const fs::path& local, uint64_t size,
                 const TransferOpts& t, const client::ClientOptions& co, bool tty, Retrier& retry, int& rc) {
  app::RateLimiter unlimited(0);  // --limit takes the one-by-one path (the caller's rule)
  app::Progress prog(net::printable(fs::path(from).filename().string()), tty);
  app::JsonProgress jp(from, t.json_progress);
  FileMeter meter{prog, jp, unlimited, client};
  try {
    auto r = client.fetch(from, local, 0, meter.on_start(), meter.on_progress(), size);
    meter.finish(r);
    report(t, co, r, tty);
    return true;
  } catch (const proto::Failure& f) {
    if (tty) std::fputc('\n', stdout);
    // Data was due: a lost link is retried; else this file failed, and the ones after it are
    // named (a nineteenth re-attack, N2: no --json object for it, nothing for the rest).
    if (f.origin == net::Origin::link && retry.worth(f)) throw;
    report_pipelined(t, co, tty, from, nullptr, &f, rc, &jp);
    return f.origin == net::Origin::peer || client.can_continue();  // before any data: the next follows
  }
}

// Why a source's file cannot go to DEST/NAME, found before its get and reported in its place among
// the others (client::destination_refusal): a directory there (a twenty-seventh re-attack, N3:
// the file moved whole, then its rename failed), a link or FIFO another user planted (a
// twenty-eighth, N2 to N4; a twenty-ninth, N3, for the small, pipelined files), or another user's
// file in a sticky directory that the rename cannot replace (a twenty-ninth, N4). A source that
// names a directory ("tree/", ".") is left to the server, which says what it is.
std::optional<proto::Failure> refused_destination(const fs::path& dest, const std::string& remote) {
  const fs::path name = fs::path(remote).filename();
  if (name.empty() || name == "." || name == "..") return std::nullopt;
  return client::destination_refusal(dest / name);  // a twenty-ninth re-attack, N3: FIFOs too
}

std::vector<std::string> unsettled(const std::vector<std::string>& paths, const std::vector<char>& settled) {
  std::vector<std::string> out;
  for (size_t i = 0; i < paths.size(); ++i)
    if (!settled[i]) out.push_back(paths[i]);
  return out;
}

// The sources' paths when all name one host (none empty nor /dev/zero): its Remote; else none.
std::optional<Remote> one_host(const std::vector<std::string>& args, std::vector<std::string>& paths) {
  std::optional<Remote> first;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    auto r = parse_remote(args[i]);
    if (!r || r->path.empty() || r->path == "/dev/zero" || (first && r->host != first->host))
      return std::nullopt;
    if (!first) first = r;
    paths.push_back(r->path);
  }
  return first;
}

// After a lost connection, the unsettled sources whose get was sent or begun (`asked`) into a
// DEST/NAME written through (a FIFO, a link to a descriptor): each has had its one attempt, as
// cmd_recv gives it alone. The one-by-one path fetched it again from byte 0, the first attempt's
// bytes and then the whole file into the FIFO, "1 retry", exit 0 (a fifty-second re-attack, C52-1).
std::vector<size_t> spent_attempts(const fs::path& dest, const std::vector<std::string>& paths,
                                   const std::vector<char>& asked, const std::vector<char>& settled) {
  std::vector<size_t> out;
  for (size_t i = 0; i < paths.size(); ++i)
    if (asked[i] && !settled[i] && !retryable_destination(dest, paths[i], false)) out.push_back(i);
  return out;
}

// recv HOST:SRC... DIR with every source on one host: one connection, the sources' stats
// pipelined, then the small files' gets pipelined (docs/PROTOCOL.md 3.10) and the large ones one
// by one (parallel streams as for one file).
ManyOutcome recv_many(const std::vector<std::string>& args, const TransferOpts& t_in, Retrier& retry) {
  using Then = ManyOutcome::Then;
  const fs::path dest = args.back();
  std::vector<std::string> paths;
  const std::optional<Remote> first = one_host(args, paths);
  if (!first) return {Then::one_by_one, 0, {}};
  if (!check_remote(*first, t_in.quiet, "/dev/zero")) return {Then::done, kExitUsage, {}};
  TransferOpts t = t_in;
  client::ClientOptions co;
  if (!apply_host_config(t, first->host, co.host) || !pick_suite(t, co)) return {Then::done, kExitUsage, {}};
  co.connect_hint = port_in_path_hint(*first);
  const bool tty = !t.quiet && !t.json && !t.json_progress && ::isatty(STDOUT_FILENO);
  int rc = 0;
  std::vector<char> settled(paths.size(), 0);
  std::vector<char> asked(paths.size(), 0);  // its get was sent (pipelined) or begun (alone)
  std::unique_ptr<client::Client> client;
  try {
    client = std::make_unique<client::Client>(co);
    retry.logged_in();
    client::Pipeline pl(*client);
    std::vector<std::optional<proto::Message>> st(paths.size());
    std::vector<std::optional<proto::Failure>> refused(paths.size());
    for (size_t i = 0; i < paths.size(); ++i)
      pl.stat(paths[i], [&, i](const proto::Message* ok, const proto::Failure* f) {
        if (!ok)
          refused[i] = use_r_hint(*f);
        else if (!(refused[i] = refused_destination(dest, paths[i])))
          st[i] = *ok;
      });
    pl.drain();
    // A refused source's line and, with --json, its object (a sixteenth re-attack, L3: none), in
    // its place among the others: after the results of the gets before it.
    const auto report_refused = [&](size_t i) {
      report_pipelined(t, co, tty, paths[i], nullptr, &*refused[i], rc);
      settled[i] = 1;
    };
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!st[i]) {
        pl.drain();
        report_refused(i);
        continue;
      }
      const fs::path local = dest / fs::path(paths[i]).filename();
      asked[i] = 1;
      if (pl.can_get(st[i]->size)) {
        pl.get(paths[i], local, st[i]->size, AT_FDCWD, nullptr,
               [&, i](const client::FileResult* r, const proto::Failure* f) {
                 if (f && f->origin == proto::Origin::link && retry.worth(*f)) return;  // fetched again
                 report_pipelined(t, co, tty, paths[i], r, f, rc);
                 settled[i] = 1;
               });
        continue;
      }
      pl.drain();
      const bool next = fetch_alone(*client, paths[i], local, st[i]->size, t, co, tty, retry, rc);
      settled[i] = 1;
      if (next) continue;
      for (size_t j = i + 1; j < paths.size(); ++j)
        if (st[j])
          report_not_moved(t, co, tty, paths[j], "not fetched", rc);
        else
          report_refused(j);
      return {Then::done, rc, {}};
    }
    pl.drain();
    client->bye();
  } catch (const proto::Failure& f) {
    if (!retry.worth(f)) {
      if (client) client->bye();
      return {Then::done, end_with_unreported(t, f, unsettled(paths, settled), "not fetched", true), {}};
    }
    for (const size_t i : spent_attempts(dest, paths, asked, settled)) {  // not fetched again
      report_pipelined(t, co, tty, paths[i], nullptr, &f, rc);
      settled[i] = 1;
    }
    retry.wait(f, co.resume);
    return {Then::one_by_one, rc, std::move(settled)};  // the rest resume: retry.used() > 0
  }
  return {Then::done, rc, {}};
}

// The usage errors of a DEST that is written through: standard output not open or a directory,
// and --resume, which keeps a partial file beside DEST: none beside standard output, a descriptor
// or a special file, where it was ignored without a word (a thirtieth re-attack, N2), as send
// refuses --resume of standard input.
int check_written_through_dest(const std::string& dest, const TransferOpts& t) {
  struct stat out {};
  if (dest == "-" && !files::inherited_descriptor(1)) {
    die_line("recv: - (standard output) was not open when aesxfer started");
    return kExitUsage;
  }
  if (dest == "-" && ::fstat(STDOUT_FILENO, &out) == 0 && S_ISDIR(out.st_mode)) {
    die_line("recv: - (standard output) is a directory");
    return kExitUsage;
  }
  if (t.resume && (dest == "-" || dest == "/dev/null" || client::written_through(dest))) {
    die_line("recv: " + (dest == "-" ? std::string("- (standard output)") : net::printable(dest)) +
             " cannot be resumed: no partial file can be kept beside it (drop --resume)");
    return kExitUsage;
  }
  return 0;
}

// The usage errors of a recv, found before anything moves: the number of arguments, a source that
// is not HOST:PATH (a port given after -p among them) or that means nothing here ('~'),
// /dev/zero without --size, several sources into what is not a directory. Returns the exit status
// after printing the line, or 0.
int check_recv_usage(const std::vector<std::string>& args, const TransferOpts& t) {
  const char* usage = " (aesxfer recv HOST:SRC... DEST)";
  if (args.size() < 2) {
    if (args.empty())
      die_line(std::string("recv: nothing to fetch") + usage);
    else if (parse_remote(args[0]))
      die_line("recv: " + net::printable(args[0]) +
               " needs a destination after it: a file, a directory or - for standard output" + usage);
    else
      die_line("recv: nothing to fetch into '" + net::printable(args[0]) + "'" + usage);
    return kExitUsage;
  }
  const std::string& dest = args.back();
  const size_t n = args.size() - 1;
  if (dest.empty()) {
    die_line("recv: an empty destination ('') names no file" + std::string(usage));
    return kExitUsage;
  }
  if (const int bad = check_written_through_dest(dest, t)) return bad;
  for (size_t i = 0; i < n; ++i) {
    const auto r = parse_remote(args[i]);
    if (!r) {
      const std::string p = port_after_lower_p(args[i]);
      die_line(p.empty() ? "recv: every source must be HOST:PATH (got '" + net::printable(args[i]) + "')" +
                               ipv6_hint(args[i])
                         : "recv: " + p);
      return kExitUsage;
    }
    if (!check_remote(*r, true, "/dev/zero")) return kExitUsage;
    if (r->path == "/dev/zero" && !t.given.count("size") && !t.recursive) {
      die_line("recv: " + net::printable(args[i]) +
               " is not a regular file: give --size (e.g. --size 1G) for the number of bytes to read");
      return kExitUsage;
    }
  }
  // A thirty-first re-attack (N1); trailing slashes aside since a thirty-fourth (B-N3: recv -r made
  // a local directory ".q.aesxfer-partial/"), as for a remote path.
  if (files::is_reserved_name(last_name(dest))) {
    die_line("recv: " + net::printable(dest) + ": " + files::kReservedShape);
    return kExitUsage;
  }
  // A DEST of the shape HOST:PATH is another server's path, which recv cannot write (scp would
  // copy between the two servers); it became a local file named "host:x" (a fifteenth re-attack,
  // K5). As in scp, ./host:x names a local file.
  if (parse_remote(dest)) {
    die_line("recv: the destination " + net::printable(dest) +
             " is HOST:PATH, and recv writes here, not to a server (for a local file of that name, write ./" +
             net::printable(dest) + ")" + usage);
    return kExitUsage;
  }
  std::error_code ec;
  if (n > 1 && (dest == "-" || !fs::is_directory(dest, ec))) {
    die_line("recv: " + net::printable(dest) +
             ": not a directory (several sources need an existing directory)");
    return kExitUsage;
  }
  if (n > 1 && fs::path(dest).lexically_normal() != "/dev/null") {
    const std::vector<std::string> sources(args.begin(), args.end() - 1);
    std::vector<std::string> paths;
    for (const auto& a : sources) {
      paths.push_back(parse_remote(a)->path);
      // The root's contents go into DEST itself, under names no check here can know (a fourteenth
      // re-attack, J1: another source's tree overwrote the root's files of the same name).
      if (t.recursive && stored_name(paths.back()).empty()) {
        die_line("recv: " + net::printable(a) +
                 " puts the server's whole root into DEST, where another source's names could overwrite "
                 "its own; nothing was moved (fetch it alone)");
        return kExitUsage;
      }
    }
    if (!distinct_names("recv", sources, paths)) return kExitUsage;
  }
  return 0;
}

// True when a local destination is written as a directory ("iso/", "iso/."): it must be one.
bool names_directory(const std::string& dest) {
  const size_t slash = dest.rfind('/');
  return slash != std::string::npos &&
         (slash + 1 == dest.size() || dest.compare(slash + 1, std::string::npos, ".") == 0);
}

// recv HOST:SRC... DEST, as scp takes several sources: with more than one, DEST must be an
// existing local directory; each source is fetched in turn, one that fails is reported and the
// others still come, and the exit status is 1 if any failed.
int cmd_recv_all(const std::vector<std::string>& args, uint64_t zero_size, const TransferOpts& t) {
  // "iso/" names a directory that must exist, one source or several (as cp): checked first, since
  // it is not a usage error but a missing directory (exit 1).
  std::error_code dir_ec;
  // A reserved name is a usage error, said by check_recv_usage (a thirty-fourth re-attack, B-N3).
  if (args.size() >= 2 && !t.recursive && names_directory(args.back()) &&
      !files::is_reserved_name(last_name(args.back())) && !fs::is_directory(args.back(), dir_ec)) {
    const std::string why = "recv: " + net::printable(args.back()) + ": not a directory";
    die_line(why);
    // Each source's --json object and --json-progress final line, as for the other failures that
    // exit 1 (a thirty-third re-attack, B-N2: none).
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (const auto r = parse_remote(args[i])) json_failed(t, r->path, why);
    return kExitFail;
  }
  if (int usage = check_recv_usage(args, t)) return usage;
  const std::string dest = args.back();
  const size_t n = args.size() - 1;
  Retrier retry(t.retries);
  int rc = 0;
  std::vector<char> settled;
  if (n > 1 && !t.recursive && !t.resume && !t.limit_kbit) {
    ManyOutcome m = recv_many(args, t, retry);
    if (m.then == ManyOutcome::Then::done) return m.rc;
    rc = m.rc;
    settled = std::move(m.settled);
  }
  // A host whose connection failed for good is not asked again for the sources after it: each is
  // named, "not fetched" with the reason (a twenty-eighth re-attack, N3: --retries 0 went on
  // connecting for every later source, and a dead server gave one "cannot connect" line per
  // source, none naming its file).
  std::map<std::string, std::string> lost_hosts;
  for (size_t i = 0; i < n; ++i) {
    if (i < settled.size() && settled[i]) continue;  // reported before the link was lost
    const std::string host = parse_remote(args[i])->host;
    if (const auto it = lost_hosts.find(host); it != lost_hosts.end()) {
      report_not_moved(t, client::ClientOptions{}, false, parse_remote(args[i])->path, "not fetched", rc,
                       it->second);
      continue;
    }
    std::string lost;
    const int r = cmd_recv(args[i], dest, zero_size, t, retry, &lost, n > 1);
    if (r == kExitUsage) return r;
    if (r != 0) rc = r;
    if (!lost.empty()) lost_hosts[host] = lost;
  }
  return rc;
}

}  // namespace

CommandRun setup_recv(CLI::App* recv, bool& no_aesni) {
  struct Args {
    TransferOpts t;
    std::vector<std::string> args;
    uint64_t zero_size = 0;
  };
  auto a = std::make_shared<Args>();
  recv->add_option("args", a->args, "HOST:SRC... DEST (several sources need DEST to be a directory)")
      ->type_name("HOST:SRC... DEST");  // counted in check_recv_usage
  recv->add_option("--size", a->zero_size,
                   "Bytes to read when SRC is /dev/zero, which needs it (K, M, G suffixes of 1024)")
      ->transform(byte_size(0, uint64_t(1) << 60))
      ->type_name("SIZE");
  add_transfer_options(recv, a->t, no_aesni);
  recv->add_flag("-r,--recursive", a->t.recursive,
                 "Fetch a directory recursively (symlinks on the server are skipped)");
  recv->add_flag("--resume", a->t.resume,
                 "Continue an interrupted recv from the partial file kept beside DEST, or from DEST itself "
                 "(complete files are not fetched again)");
  return [a, recv] {
    files::install_cleanup_on_signals();
    a->t.given = given_options(recv);
    // --size reads that many bytes of /dev/zero; of a file it would read nothing less than all,
    // which a newcomer takes for "the first N bytes" (a twenty-second re-attack, N7).
    if (recv->count("--size") > 0 &&
        std::none_of(a->args.begin(), a->args.empty() ? a->args.end() : a->args.end() - 1,
                     [](const std::string& s) {
                       const auto r = parse_remote(s);
                       return r && r->path == "/dev/zero";
                     })) {
      die_line("recv: --size applies only to the source HOST:/dev/zero (a file is always fetched whole)");
      return kExitUsage;
    }
    return cmd_recv_all(a->args, a->zero_size, a->t);
  };
}

}  // namespace aesxfer::app
