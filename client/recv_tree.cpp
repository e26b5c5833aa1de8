#include "client/recv_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <set>
#include <unordered_set>
#include <vector>

#include "client/pipeline.h"
#include "client/remote.h"
#include "client/tree_resume.h"
#include "crypto/sha256.h"
#include "crypto/util.h"
#include "files/atomic_file.h"
#include "files/dir_chain.h"
#include "files/guarded_path.h"
#include "files/io.h"
#include "files/resume.h"
#include "files/unique_fd.h"
#include "proto/ops.h"

namespace aesxfer::client {

using proto::Failure;

using namespace aesxfer::net;    // the layers below: connections and streams,
using namespace aesxfer::files;  // files and keys
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// A retry (without --resume) resumes only what this command wrote, as it offers only such a
// destination: a partial file from before the command (another server's, an old --resume's) had
// its length and keyed digest sent to this server, then was cut and overwritten (a fifty-first
// re-attack, C51-1). Why fd's partial file is left as it is, or "".
std::string older_than_command(int fd, const timespec& since, const fs::path& local) {
  struct stat st {};
  if ((!since.tv_sec && !since.tv_nsec) || ::fstat(fd, &st) != 0 || files::changed_after(st, since))
    return "";
  return printable(local.string()) + ": its partial file is older than this command, which did not write it";
}

// True when a partial file of recv --resume (".NAME.aesxfer-partial") is in the directory.
bool has_partial(int dirfd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dirfd, partial_name(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

std::string parent_of(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

}  // namespace

// ---- get with the resume flag --------------------------------------------------------------

namespace {
// Where a resumed get starts: the server echoes our prefix hash when it resumes at our offset
// (`have`), and sends none when it starts from 0 (its file differs, or is shorter).
uint64_t agreed_start(const proto::Message& req, const proto::Message& resp, uint64_t have,
                      const std::string& peer) {
  if (resp.digest.empty()) return 0;
  if (req.digest.size() != proto::kPrefixMacLen || have > resp.size ||
      !crypto::ct_equal(resp.digest.data(), req.digest.data(), proto::kPrefixMacLen))
    throw Failure("protocol error from " + peer + ": resume point not agreed");
  return have;
}
}  // namespace

std::optional<FileResult> Client::fetch_resumed(const std::string& remote, const fs::path& local_in,
                                                uint64_t zero_size,
                                                const std::function<void(uint64_t)>& on_start,
                                                const ProgressFn& progress, uint64_t size_hint, int dirfd,
                                                std::string& not_resumed) {
  // A symbolic link is written through, as without --resume: the partial file beside its target
  // (a fifteenth re-attack, K2). A path as typed is resolved once from descriptors, by the kernel's
  // rule for links in sticky directories (files/guarded_path.h; a twenty-third re-attack, N1).
  files::GuardedEntry g;  // dirfd given: a tree's directory, already walked
  if (dirfd == AT_FDCWD) {
    g = guarded_destination(local_in);
    if (g.magic) throw Failure(printable(local_in.string()) + ": cannot be resumed (an open descriptor)");
    if (g.dir_form)
      throw Failure(printable(local_in.string()) + ": not a directory (a link to a directory path)");
    dirfd = g.dir.get();
  }
  const fs::path local = g.followed ? g.path : local_in;  // named where it is, beside a link's target
  const fs::path at = g.dir ? fs::path(g.name) : local.filename();  // the destination, in dirfd
  if (at == ".") return std::nullopt;  // "d3/" for "tree/": the server says what it is (28th re-attack, N1)
  struct stat dst {};
  if (::fstatat(dirfd, at.c_str(), &dst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(dst.st_mode))
    throw Failure(printable(local.string()) + ": is a directory");
  // locked: a second recv --resume of the same file is refused
  std::unique_ptr<PartialFile> pfp;
  try {
    pfp = std::make_unique<PartialFile>(dirfd, at.string(), local);
  } catch (const Failure& f) {
    if (f.status != proto::Status::permission || f.err != EPERM) throw;
    not_resumed = f.what();  // left as it is, and no obstacle (a fourteenth re-attack, H6)
    return std::nullopt;
  }
  PartialFile& pf = *pfp;
  uint64_t have = pf.length();
  if (have > 0 && !(not_resumed = older_than_command(pf.fd(), opt_.offer_changed_since, local)).empty())
    return std::nullopt;
  // No partial file, but a destination: offer the destination as the prefix (like rsync
  // --append-verify or curl -C -). The server's size says what it can be: the whole file (then it
  // is only compared, and left as it is), a shorter version (then it is copied into the partial
  // file while it is hashed, and the rest is appended there), or neither. All the local work
  // happens before the request, with keep-alives, so none is left once the server streams; the
  // destination itself is written only by the final rename (and is offered only with a
  // checksum: open_destination_base).
  UniqueFd base;
  files::FileVersion base_seen;  // as it was hashed: what a copy made of it must still be (A51-1)
  bool whole = false;
  if (have == 0) {
    base = open_destination_base(dirfd, at, base_seen, opt_);
    const uint64_t dsize = base_seen.size;
    if (base) {
      proto::Message st = stat_remote(remote, zero_size);
      if (st.status == proto::Status::ok && dsize <= st.size) {
        have = dsize;
        whole = dsize == st.size;
        size_hint = st.size;
      } else {
        base.reset();
      }
    }
  }
  const std::optional<PrefixScan> scan = resume_prefix(pf, base.get(), whole, have, size_hint, local);
  const proto::Message req = get_request(remote, zero_size, proto::kFlagResume, have, scan ? scan->mac : "");
  proto::Message resp;
  uint64_t start = 0;
  try {
    resp = ask(req);
    start = agreed_start(req, resp, have, conn_->peer());  // B49-3: a bad echo too
  } catch (const Failure& f) {
    if (!base || whole || !have) throw;
    pf.discard();  // only the copy of the destination, which is as it was (C47-3, below)
    throw f.reworded(std::string(f.what()) + std::string(kCopyDropped));
  }
  resume_offset_ = start;
  FileResult r;
  r.file = remote;
  r.resumed_from = start;
  StreamOptions so{start, opt_.fine_progress};
  if (start) so.prefix_hash = &scan->sum;

  return finish_resumed(r, resp, so, pf, base.get(), base_seen, whole, local, on_start, progress);
}

std::optional<PrefixScan> Client::resume_prefix(PartialFile& pf, int base_fd, bool whole, uint64_t have,
                                                uint64_t size_hint, const fs::path& local) {
  const bool copy = base_fd >= 0 && !whole;
  // The size known already (the server's stat above, a listing, the sources' stats): what is
  // still to come, and the copy of the destination before it, must fit, said before the copy and
  // the get (a thirty-fourth re-attack, A-N3 and B-N2: the copy filled the disk, and a partial
  // file that held nothing but the destination's bytes was kept; A-N4: asked first, the refusal
  // ended a tree). Nothing asked yet: this file fails alone.
  if (size_hint != UINT64_MAX && !whole) {
    const uint64_t need = copy ? size_hint : size_hint - std::min(size_hint, have);
    if (auto full = room_refusal(pf.fd(), need, printable(local.string()), copy ? have : 0)) {
      full->size = size_hint;
      if (copy || !have) {
        pf.discard();
        throw *full;
      }
      // What arrived before stays for --resume, and the line says so (a thirty-sixth re-attack,
      // B5: recv -r --resume said nothing of it).
      throw Failure(std::string(full->what()) + std::string(kKeptNote), full->status, full->err);
    }
  }
  std::optional<PrefixScan> scan;
  try {
    // A signal meanwhile removes the copy, never keeps it; the mark stays on until the server's
    // first data byte past it (finish_resumed).
    pf.copying(copy && have);
    if (have)
      scan = scan_prefix(*keys_, base_fd >= 0 ? base_fd : pf.fd(), have, copy ? pf.fd() : -1, keepalive());
  } catch (const Failure& f) {
    if (!copy) throw;
    // A copy of the destination, which is as it was: nothing worth keeping, whatever broke it (a
    // forty-seventh re-attack, C47-3: a connection lost during the copy's keep-alive kept 237 MB
    // of a 300 MB destination's own bytes as a hidden partial file, "kept for --resume").
    pf.discard();
    if (f.origin != Origin::local) throw f.reworded(std::string(f.what()) + std::string(kCopyDropped));
    throw Failure(printable(local.string()) + ": " + f.what() + std::string(kCopyDropped), f.status, f.err);
  }
  return scan;
}

namespace {
// The partial file cut back to `start`; false when it could not be.
bool cut_back(PartialFile& pf, uint64_t start) {
  try {
    pf.truncate_to(start);
    return true;
  } catch (const Failure&) {
    return false;
  }
}

// r, received and verified: its bytes, time since t0 and record size.
FileResult finished(FileResult r, uint64_t bytes, Clock::time_point t0, uint64_t record_size) {
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = bytes;
  r.record_size = record_size;
  r.verified = true;
  return r;
}

// `progress`, and the partial file's mark as a copy of the destination taken off at the server's
// first data byte past `start`.
ProgressFn until_data(PartialFile& pf, const ProgressFn& progress, uint64_t start) {
  return [&pf, &progress, start, marked = true](uint64_t done) mutable {
    if (marked && done > start) {
      pf.copying(false);
      marked = false;
    }
    if (progress) progress(done);
  };
}

// A connection lost during a resumed get's data: what arrived was verified record by record and
// stays for --resume, and so does a prefix an earlier partial file held. One that holds nothing,
// or nothing but the destination's copy (`copied`), goes (a forty-eighth re-attack: C48-2, a
// server that echoed the prefix and closed before its data kept a 100 MB copy of the destination
// "kept for --resume"; C48-3, one that answered "from 0" said so of a partial file it had emptied).
// Whether the partial file holds what a --resume can use: data of the server's past `start`, or
// a prefix an earlier partial file held; never only the destination's copy (`copied`), which is
// still there (a forty-ninth re-attack, B49-1: a stream the server withdrew, and a write error
// before the first byte, kept a 40 MB copy of the destination "for --resume").
bool worth_keeping(PartialFile& pf, uint64_t start, bool copied) {
  struct stat st {};
  const bool arrived = ::fstat(pf.fd(), &st) != 0 || uint64_t(st.st_size) > start;
  return arrived || (start && !copied);
}

Failure link_lost(PartialFile& pf, const Failure& e, uint64_t start, bool copied) {
  if (worth_keeping(pf, start, copied)) return e.reworded(std::string(e.what()) + std::string(kKeptNote));
  pf.discard();
  return e.reworded(std::string(e.what()) + (start ? std::string(kCopyDropped) : std::string()));
}
}  // namespace

FileResult Client::finish_resumed(FileResult r, const proto::Message& resp, const StreamOptions& so,
                                  PartialFile& pf, int base_fd, const files::FileVersion& base_seen,
                                  bool whole, const fs::path& local,
                                  const std::function<void(uint64_t)>& on_start, const ProgressFn& progress) {
  const uint64_t start = so.offset;
  proto::Message result;
  result.type = proto::MsgType::result;
  if (start && whole && start == resp.size) {
    // The destination is the server's file: the end record is all that comes, and the
    // destination stays as it is (with -p it takes the server's mode and time).
    pf.discard();
    if (on_start) on_start(resp.size);
    auto t0 = Clock::now();
    try {
      r.checksum = recv_stream(*conn_, -1, resp.size, progress, so);
    } catch (const Failure& e) {
      answer_failed_receive(e);
      throw Failure(printable(local.string()) + ": " + e.what() + " (the destination was left as it was)",
                    e.status, e.err);
    }
    if (opt_.preserve) apply_mode_mtime(base_fd, resp.mode, resp.mtime);
    conn_->send_message(result);
    return finished(r, resp.size, t0, conn_->record_size());
  }

  // The server's file grew between the stat and the request: the destination was hashed but not
  // copied. It is copied below; if it changed meanwhile, the whole-file SHA-256 fails the transfer.
  const bool copy = start && whole;
  if (!copy) pf.truncate_to(start);
  // What is still to come must fit, said before its first byte as for a get without --resume (a
  // thirty-third re-attack, B-N3: it filled the disk, and a full partial file stayed), and before
  // the copy, which it counts (a thirty-fourth, A-N3).
  const bool copied = start && base_fd >= 0;  // the prefix is the destination's copy
  if (auto full = room_refusal(pf.fd(), copy ? resp.size : resp.size - start, "", copy ? start : 0)) {
    full->size = resp.size;
    const bool keep = start && !copied;  // else nothing of it to keep (B49-2: the copy was kept)
    if (!keep) pf.discard();
    send_failure_result(*full);
    throw Failure(printable(local.string()) + ": " + full->what() + (keep ? std::string(kKeptNote) : ""),
                  full->status, full->err);
  }
  // A prefix that is the destination's copy stays marked as one until the server's first data
  // byte past it: a Ctrl-C before that removes it, as nothing of the server's is in it (a
  // forty-eighth re-attack, B48-5: one while the server hashed its prefix kept a 300 MB copy of
  // the destination "for --resume").
  pf.copying(copied);
  const ProgressFn watch = copied ? until_data(pf, progress, start) : progress;
  if (on_start) on_start(resp.size);
  auto t0 = Clock::now();
  try {
    if (copy) copy_prefix(base_fd, pf.fd(), start, &base_seen);  // a failure keeps no half copy (C49-1)
    pf.truncate_to(start);
    r.checksum = recv_stream(*conn_, pf.fd(), resp.size, watch, so);
    pf.copying(false);
    pf.commit(effective_mode(resp.mode, opt_.preserve), effective_mtime(resp.mtime, opt_.preserve));
  } catch (const Failure& e) {
    pf.copying(false);  // what is kept below is kept, also by a signal between retries
    const bool withdrawn = net::withdrawn(e);
    if (e.origin != Origin::local && !withdrawn) throw link_lost(pf, e, start, copied);
    // Known bad: the next --resume starts over. Withdrawn: what arrived is dropped, the agreed
    // prefix stays unless it is the destination's copy, and the session goes on (worth_keeping).
    const bool keep = withdrawn ? start && !copied && cut_back(pf, start)
                                : e.status != proto::Status::integrity && worth_keeping(pf, start, copied);
    if (withdrawn) clean_failure_ = true;
    if (!keep) pf.discard();
    send_failure_result(e);
    throw Failure(printable(local.string()) + ": " + e.what() +
                      (keep     ? std::string(kKeptNote)
                       : copied ? std::string(kCopyDroppedAfterData)
                                : ""),
                  e.status, e.err);
  }
  conn_->send_message(result);
  return finished(r, resp.size, t0, conn_->record_size());
}

// ---- list ------------------------------------------------------------------------------------

RemoteDir Client::list(const std::string& remote) {
  const proto::Message req = proto::request(proto::Op::list, remote.empty() ? "." : remote);
  proto::Message resp = ask(req);
  const std::string bad = "protocol error from " + conn_->peer() + ": bad listing";
  if (resp.size > proto::kMaxListEntries)
    throw Failure(bad + " (more than " + std::to_string(proto::kMaxListEntries) + " entries)");
  if (resp.text.empty() || (resp.text != "." && !proto::valid_list_path(resp.text)))
    throw Failure(bad + " (directory name)");
  RemoteDir d;
  d.path = resp.text;
  d.mode = resp.mode;
  d.mtime = resp.mtime;
  d.entries.reserve(size_t(std::min<uint64_t>(resp.size, 65536)));  // grows with what actually arrives
  std::unordered_set<std::string> dirs{""}, seen, counted;
  // The directories open at this point of a depth-first walk (PROTOCOL.md 3.7): the top, then each
  // directory down to the last entry. An entry of a directory whose contents already ended is a
  // protocol error: a listing that went back and forth between two deep branches made the client
  // open the whole branch again for every entry (a fiftieth re-attack, C50-3: 33 s of CPU for a
  // listing of 6,000 entries that takes 1.3 s in order).
  std::vector<std::string> open_dirs{""};
  uint64_t bytes = 0;
  for (bool last = false; !last;) {
    Conn::Incoming in = conn_->recv_record("the listing");
    auto page = proto::decode_list_page(in.payload);
    if (!page) throw Failure(bad + " (malformed page)");
    last = page->last;
    // A server fills a page before it sends the next: an empty one that is not the last only holds
    // this client past its --timeout (a thirty-seventh re-attack, B2).
    if (!last && page->entries.empty()) throw Failure(bad + " (an empty page that is not the last)");
    if (page->entries.size() > resp.size - d.entries.size())
      throw Failure(bad + " (more entries than announced)");
    for (auto& e : page->entries) {
      bytes += e.path.size();
      if (bytes > proto::kMaxListBytes) throw Failure(bad + " (too large)");
      if (e.type == proto::EntryType::left_out) {
        // Counts names of a listed directory: that directory (or the top), once.
        const std::string of = e.path == "." ? std::string() : e.path;
        if (!dirs.count(of))
          throw Failure(bad + " (names left out of " + printable(e.path) + ", not a directory)");
        if (!counted.insert(of).second)
          throw Failure(bad + " (names left out of " + printable(e.path) + " twice)");
        d.entries.push_back(std::move(e));
        continue;
      }
      const std::string parent = parent_of(e.path);
      if (!dirs.count(parent)) throw Failure(bad + " (" + printable(e.path) + " before its directory)");
      if (!seen.insert(e.path).second) throw Failure(bad + " (" + printable(e.path) + " twice)");
      while (open_dirs.size() > 1 && open_dirs.back() != parent) open_dirs.pop_back();
      if (open_dirs.back() != parent)
        throw Failure(bad + " (" + printable(e.path) + " after its directory's contents ended)");
      if (e.type == proto::EntryType::dir) {  // not unreadable_dir: nothing below it
        dirs.insert(e.path);
        open_dirs.push_back(e.path);
      }
      d.entries.push_back(std::move(e));
    }
  }
  if (d.entries.size() != resp.size) throw Failure(bad + " (fewer entries than announced)");
  return d;
}

// ---- recv -r ---------------------------------------------------------------------------------

namespace {

// top/rel as a string, for messages (top / rel as an fs::path splits every component).
std::string joined(const fs::path& top, const std::string& rel) {
  std::string t = top.string();
  if (!t.empty() && t.back() != '/') t += '/';
  return t + rel;
}

// Opens directory `name` inside dirfd without following a symbolic link; throws Failure naming
// `shown` (a string: an fs::path of a deep tree's path costs an allocation per component).
UniqueFd open_dir_at(int dirfd, const std::string& name, const std::string& shown) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return UniqueFd(fd);
  int e = errno;
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
    throw Failure(printable(shown) + ": is a symbolic link (not followed)");
  if (e == ENOTDIR) throw Failure(printable(shown) + ": exists and is not a directory");
  throw Failure(printable(shown) + ": " + errno_text(e));
}

// Why file `name` of a listing cannot be written in dirfd, before its get: a directory stands
// there, or (a new file takes an inode) the last inodes are kept (C50-1).
std::optional<Failure> cannot_write(int dirfd, const std::string& name, const fs::path& local) {
  struct stat st {};
  const bool there = ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (there && S_ISDIR(st.st_mode)) return Failure(printable(local.string()) + ": is a directory");
  return there ? std::nullopt : room_to_create(dirfd, printable(local.string()), false);
}

// Creates directory `name` inside dirfd (or finds it there, never through a symbolic link) and
// opens it. `created` says whether this call made it. One that was there and that another user
// planted in a sticky directory others can write to is refused, its owner named: that user could
// read, rename or replace what it receives (a thirty-seventh re-attack, A1: recv -r of a private
// tree went into nobody's 0777 directory of that name in /tmp, exit 0).
UniqueFd make_dir_at(int dirfd, const std::string& name, const std::string& shown, uint32_t mode,
                     bool& created) {
  if (struct stat st{}; ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    if (auto full = room_to_create(dirfd, printable(shown), true)) throw *full;
  created = ::mkdirat(dirfd, name.c_str(), (mode | 0700) & 0777) == 0;
  if (!created && errno != EEXIST) throw Failure(printable(shown) + ": " + errno_text(errno));
  UniqueFd fd = open_dir_at(dirfd, name, shown);
  if (const std::string who = created ? "" : files::planted_dir(fd.get()); !who.empty())
    throw Failure(printable(shown) + ": " + who + ": a tree is not written into it",
                  proto::Status::permission, EPERM);
  return fd;
}

bool has_control_byte(const std::string& s) {
  for (unsigned char ch : s)
    if (ch < 0x20 || ch == 0x7f) return true;
  return false;
}

}  // namespace

namespace {

// The listing must name the directory asked for; with no reporter for single files, no entry may
// hold a control byte (with one, such an entry is skipped alone: see recv_tree).
void check_listing(Client& client, const RemoteDir& d, const std::string& remote, const std::string& asked,
                   bool skip_bad_names) {
  if (d.path != asked && d.path.size() >= proto::kMaxMessage)
    throw Failure(client.remote_name(printable(remote)) +
                  ": path too long (the server's answer is limited to " + std::to_string(proto::kMaxMessage) +
                  " bytes in protocol " + std::to_string(proto::kVersion) + ")" + client.port_note());
  if (d.path != asked)
    throw Failure("protocol error from " + client.peer() + ": listing of " + printable(asked) +
                  " answered for " + proto::peer_words(d.path));
  for (const auto& e : d.entries)
    if (!skip_bad_names && has_control_byte(e.path))
      throw Failure("protocol error from " + client.peer() + ": bad listing (" + printable(e.path) +
                    ": control byte in a name)");
}

// What tree_copies records a copy of: the path on a server, the server known by its host key and
// not by the name typed for it. Another server on the same host (another port, another key) is
// another source (a thirty-fourth re-attack, B-N6: its tree was merged into the first one's copy);
// the same server reached another way (a tunnel, a relay, localhost for 127.0.0.1) is the same (a
// thirty-fifth, B-N4: a second copy was nested). Servers that share one host key (one
// AESXFER_HOME, two roots) are one server here, as they are to known_hosts.
std::string copy_source(const Client& client, const std::string& asked) {
  return client.host_key_fingerprint() + ":" + asked;
}

// recv -r --resume: true when the local directory dest is the copy an earlier recv -r of the same
// source created (recorded in $AESXFER_HOME, client/tree_resume.h: never decided from the
// server's listing), so that it is continued rather than nested.
bool continues_copy(const Client& client, const fs::path& dest, const std::string& source) {
  const UniqueFd d(files::open_guarded_dir(dest));
  return d && is_tree_copy(client.home(), d.get(), source);
}

// The client's own $AESXFER_HOME (its identity, known_hosts, config, tree_copies): a tree from a
// server never writes into it, as a server never serves or writes its own home (a thirty-seventh
// re-attack, B1: `recv -r host:.config ~` let the server replace the identity, pin its own host
// keys and redirect every later command through a config of its choosing), nor anywhere below it
// (a forty-second: `recv -r host:config ~/.config/aesxfer` made DEST/config, and every later
// command stopped at "config file ... is not a regular file"). Told by device and inode, so that
// no name, link or bind mount reaches it.
class OwnHome {
 public:
  explicit OwnHome(const fs::path& home) {
    struct stat st {};
    known_ = !home.empty() && ::stat(home.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  // Throws when fd is the home.
  void refuse(int fd, const std::string& shown) const {
    struct stat st {};
    if (known_ && ::fstat(fd, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) throw inside(shown);
  }
  // Throws when fd, a directory a tree's top is made in or is, is the home or lies below it:
  // walked up by "..", which no link can redirect.
  void refuse_at_or_below(int fd, const std::string& shown) const {
    if (known_ && files::walk_up(fd, [&](const struct stat& dir, const struct stat&) {
          return dir.st_dev == dev_ && dir.st_ino == ino_;
        }))
      throw inside(shown);
  }

 private:
  static Failure inside(const std::string& shown) {
    return Failure(printable(shown) +
                       ": this client's own aesxfer home ($AESXFER_HOME), or a directory in it, which a tree "
                       "from a server never writes into",
                   proto::Status::permission, EPERM);
  }
  bool known_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// The local top of recv -r: dest/NAME when dest is a directory (scp; NAME the last component of
// the request, the root's contents into dest itself), else dest, created here; with
// `continue_dest` (--resume, dest already the copy) dest itself. Sets top and top_created.
UniqueFd open_top(const fs::path& dest, const std::string& asked, const std::string& remote, uint32_t mode,
                  bool continue_dest, const OwnHome& home, fs::path& top, bool& top_created) {
  struct stat dst {};
  const bool dest_dir = ::stat(dest.c_str(), &dst) == 0 && S_ISDIR(dst.st_mode);
  top = dest;
  top_created = false;
  if (dest_dir)  // another user's, planted under the name typed: neither the copy nor its place
    if (auto planted = planted_destination_dir(dest)) throw *planted;
  if (dest_dir && asked != "." && !continue_dest) {
    std::string name = fs::path(asked).filename().string();
    if (name == "..")
      throw Failure(printable(remote) + ": names no directory of its own (give a path below it)");
    UniqueFd parent(files::open_guarded_dir(dest));
    if (parent.get() < 0) throw Failure(printable(dest.string()) + ": " + errno_text(errno));
    if (auto planted = planted_way_refusal(parent.get(), dest.string())) throw *planted;
    top = dest / name;
    home.refuse_at_or_below(parent.get(), top.string());
    UniqueFd fd = make_dir_at(parent.get(), name, top.string(), mode, top_created);
    home.refuse_at_or_below(fd.get(), top.string());  // one that was there: the home itself
    return fd;
  }
  if (dest_dir) {
    UniqueFd fd(files::open_guarded_dir(dest));
    if (fd.get() < 0) throw Failure(printable(dest.string()) + ": " + errno_text(errno));
    if (auto planted = planted_way_refusal(fd.get(), dest.string())) throw *planted;
    home.refuse_at_or_below(fd.get(), dest.string());
    return fd;
  }
  // Made in the directory that holds it, reached without following another user's link in a
  // sticky directory (files/guarded_path.h; a twenty-third re-attack, N1), nor one of theirs
  // anywhere to what they do not own (guarded_destination's foreign_reach, as for a file: a
  // fifty-third re-attack, B53-1: nobody's dangling link, or link to root's directory, in a
  // shared 0777 directory chose where root's recv -r made its tree).
  files::GuardedEntry g = guarded_destination(dest);
  if (g.name == "." || g.magic) throw Failure(printable(dest.string()) + ": not a directory");
  home.refuse_at_or_below(g.dir.get(), dest.string());
  return make_dir_at(g.dir.get(), g.name, dest.string(), mode, top_created);
}

// The directory of an entry: reached from the top one component at a time, never through a
// symbolic link (files::DirChain, which keeps a bounded number of its ancestors open); the last one
// is kept open for the entries that follow it (shared: a pipelined get keeps its directory open
// until its data has arrived).
class DirWalker {
 public:
  DirWalker(int top_fd, const fs::path& top)
      : chain_(top_fd, [top](int at, const std::string& name, const std::string& rel) {
          return open_dir_at(at, name, joined(top, rel));
        }) {}
  int dir_of(const std::string& rel) { return chain_.open(rel); }
  const std::shared_ptr<UniqueFd>& current() const { return chain_.current(); }

 private:
  files::DirChain chain_;
};

// Directories of the tree that could not be made or entered here (a local symbolic link or file in
// their place): each subtree is skipped with one message naming it, the rest is fetched, and the
// command fails at the end as for any other bad file. Without a pipelined reporter the tree stops.
// So is a name with a control byte, which no terminal or local file should get: that entry (and
// what lies below it) alone.
// Paths ordered as bytes, but with '/' before every other byte: the paths below a tree T (T/...)
// then come right after T, before any T + other byte (T-1, T.bak).
struct SlashFirst {
  static unsigned key(char c) { return c == '/' ? 0u : unsigned(static_cast<unsigned char>(c)) + 1; }
  bool operator()(const std::string& a, const std::string& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        [](char x, char y) { return key(x) < key(y); });
  }
};

// The trees left out of a listing. Each entry is looked up once, in log time: a vector scanned
// for each entry made 200,000 skipped names cost 14 s of CPU (a fiftieth re-attack, C50-4). No tree
// is below another (skip() keeps it so), so the tree that covers a path is the greatest one not
// above it in SlashFirst order.
struct SkippedTrees {
  std::set<std::string, SlashFirst> trees;
  bool covers(const std::string& path) const {
    auto it = trees.upper_bound(path);
    if (it == trees.begin()) return false;
    const std::string& t = *--it;
    return path.size() > t.size() && path[t.size()] == '/' && path.compare(0, t.size(), t) == 0;
  }
  // Leaves `path` (and all below it) out, reported once as a failure of that file.
  template <class Report>
  void skip(const std::string& path, const std::string& shown, const fs::path& local, const std::string& why,
            const Report& report) {
    if (!covers(path)) {  // and the trees below it, which it covers now, go (right after it)
      auto it = std::next(trees.insert(path).first);
      while (it != trees.end() && it->size() > path.size() && (*it)[path.size()] == '/' &&
             it->compare(0, path.size(), path) == 0)
        it = trees.erase(it);
    }
    const Failure f(why);
    report(shown, local, nullptr, &f);
  }
  template <class Report>
  bool reserved_name(const proto::ListEntry& e, const std::string& base, const fs::path& top,
                     const Report& report);
  template <class Report>
  bool bad_name(const proto::ListEntry& e, const std::string& base, const fs::path& top,
                const Report& report) {
    // A name longer than a file name can be here (NAME_MAX) is skipped before its get, not
    // failed at the rename after the whole file came (only a hostile or foreign server lists one:
    // a twenty-eighth re-attack's note).
    const size_t slash = e.path.rfind('/');
    const bool too_long = e.path.size() - (slash == std::string::npos ? 0 : slash + 1) > NAME_MAX;
    if (!has_control_byte(e.path) && !too_long) return false;
    skip(e.path, base + e.path, top,
         printable(base + e.path) +
             (too_long ? ": a name longer than " + std::to_string(NAME_MAX) + " bytes; skipped"
                       : std::string(": a control byte in the name; skipped")) +
             (e.type == proto::EntryType::dir ? " with all below it" : ""),
         report);
    return true;
  }
};

// An entry for what the listing could not hold (protocol 5): a directory the server cannot read,
// or names it left out of a directory (a CR or LF in a name). Reported as a failure of that path
// (the command exits 1 after fetching the rest); without a reporter, the tree stops here.
template <class Report>
void not_listed(const proto::ListEntry& e, const std::string& listed, const std::string& base,
                const fs::path& top, const Report& report) {
  const bool unreadable = e.type == proto::EntryType::unreadable_dir;
  const std::string where = e.path == "." ? listed : base + e.path;
  const Failure f(
      printable(where) + ": " +
      (unreadable ? std::string("the server cannot read this directory; skipped with all below it")
                  : std::to_string(e.size) + (e.size == 1 ? " name" : " names") +
                        " left out by the server (a name with a CR or LF, or whose path would be longer than "
                        "4096 bytes, cannot be sent; a directory so named goes with all below it)"));
  if (!report) throw f;
  report(where, e.path == "." ? top : top / e.path, nullptr, &f);
}

// A listed name of the shapes aesxfer gives its own partial and temporary files: written here, it
// would be taken for one (recv -r --resume adopted a real ".a.aesxfer-partial" of the tree as a's
// partial and renamed it away: a fourteenth re-attack, J2). Skipped with a line, as a server
// refuses such a name at put; the command fails at the end.
template <class Report>
bool SkippedTrees::reserved_name(const proto::ListEntry& e, const std::string& base, const fs::path& top,
                                 const Report& report) {
  const std::string leaf = e.path.substr(e.path.rfind('/') + 1);
  if ((e.type != proto::EntryType::file && e.type != proto::EntryType::dir) || !files::is_reserved_name(leaf))
    return false;
  const std::string why =
      printable(base + e.path) +
      ": a name of the shape aesxfer keeps for its own partial and temporary files; skipped" +
      (e.type == proto::EntryType::dir ? " with all below it" : "");
  if (!report) throw Failure(why);
  skip(e.path, base + e.path, top, why, report);
  return true;
}

struct Made {
  std::string rel;
  uint32_t mode;
  int64_t mtime;
};

// Modes and times last, deepest first, and only on what this command created (a directory that
// was there keeps its own), through the directory's fd. The user keeps rwx on the directories it
// receives, as the server does on what it stores (protocol 5): a tree served as 0000 or 0555 made
// a copy its user could not read, remove, nor receive into again (a forty-seventh re-attack,
// C47-2: the next recv -r of an updated 0555 tree failed and kept the old content).
void apply_made(DirWalker& walker, const std::vector<Made>& made, bool preserve) {
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    int fd = walker.dir_of(it->rel);
    ::fchmod(fd, effective_mode(it->mode, preserve).bits | 0700);
    if (preserve) {
      timespec ts[2];
      ts[0].tv_sec = ts[1].tv_sec = it->mtime;
      ts[0].tv_nsec = ts[1].tv_nsec = 0;
      ::futimens(fd, ts);
    }
  }
}

// Whether directory `fd` is this command's: made by this session (`created`), or found in
// `by_command`, the ones an earlier session of the command made (and recorded there when made).
bool commands_own(int fd, bool created, MadeDirs* by_command) {
  struct stat st {};
  if (!by_command || ::fstat(fd, &st) != 0) return created;
  if (created) by_command->insert({st.st_dev, st.st_ino});
  return created || by_command->count({st.st_dev, st.st_ino}) > 0;
}

// Makes the directory of entry e inside its parent (never through a symbolic link) and records it
// when this command created it; one that cannot be made, or is this client's home, is skipped with
// all below it (reported) when there is a reporter, else the tree stops.
template <class Report>
void make_tree_dir(DirWalker& walker, const proto::ListEntry& e, const std::string& base,
                   const std::string& shown, SkippedTrees& skipped, std::vector<Made>& made,
                   MadeDirs* by_command, const OwnHome& home, const Report& report) {
  const std::string parent = parent_of(e.path);
  bool created = false;
  try {
    const UniqueFd fd =
        make_dir_at(walker.dir_of(parent), parent.empty() ? e.path : e.path.substr(parent.size() + 1), shown,
                    e.mode, created);
    home.refuse(fd.get(), shown);
    created = commands_own(fd.get(), created, by_command);
  } catch (const Failure& f) {
    if (!report) throw;
    skipped.skip(e.path, base + e.path, fs::path(shown),
                 std::string(f.what()) + "; skipping " + printable(base + e.path) + " and all below it",
                 report);
    return;
  }
  if (created) made.push_back({e.path, e.mode, e.mtime});
}

}  // namespace

// The files of listing `d` from index `from` on, named through `report` as not fetched: an earlier
// file's failure ended the session.
template <class Report>
void name_the_rest(const RemoteDir& d, size_t from, const std::string& base, const fs::path& top,
                   const SkippedTrees& skipped, const Report& report) {
  for (size_t i = from; i < d.entries.size(); ++i) {
    const auto& e = d.entries[i];
    if (e.type != proto::EntryType::file || skipped.covers(e.path) || has_control_byte(e.path) ||
        files::is_reserved_name(fs::path(e.path).filename().string()))
      continue;
    const Failure f(printable(base + e.path) + ": not fetched: the session ended when an earlier file failed",
                    proto::Status::io_error);
    report(base + e.path, top / e.path, nullptr, &f);
  }
}

// A file of listing `d` (index i) too large to pipeline, through fetch_one. A failure that ends the
// session (a full disk during the data) names this file and the files after it, not dropped without
// a word (a twentieth re-attack, N3; PROTOCOL.md 3.3), and is thrown as TreeEnded. A lost link is
// left to the retry, which fetches them.
template <class FetchOne, class Report>
void fetch_or_end(const Client& client, const FetchOne& fetch_one, const Report& pipelined,
                  const RemoteDir& d, size_t i, const std::string& base, const fs::path& top,
                  const SkippedTrees& skipped, int pfd) {
  const auto& e = d.entries[i];
  try {
    fetch_one(base + e.path, top / e.path, e.size, pfd);
  } catch (const Failure& f) {
    if (!pipelined || f.origin != proto::Origin::local) throw;
    pipelined(base + e.path, top / e.path, nullptr, &f);
    // Failed before its get (a file the listing's size says cannot fit): this file alone, as
    // among several sources (a thirty-fourth re-attack, A-N4 and B-N1: the rest were "not fetched").
    if (client.can_continue()) return;
    name_the_rest(d, i + 1, base, top, skipped, pipelined);
    throw TreeEnded(f);
  }
}

namespace {

// The tree's top: DEST or DEST/NAME by scp's rule, DEST itself when --resume continues a recorded
// copy, and on a retry the top the first session chose (C51-3); recorded when DEST itself is made.
UniqueFd place_top(Client& client, const RemoteDir& d, const std::string& remote, const std::string& asked,
                   const fs::path& dest, std::optional<fs::path>* placed, const OwnHome& home, fs::path& top,
                   bool& top_created) {
  const std::string source = copy_source(client, asked);
  const bool again = placed && *placed;
  const bool continue_dest =
      again || (client.resume_asked() && asked != "." && continues_copy(client, dest, source));
  UniqueFd top_fd =
      open_top(again ? **placed : dest, asked, remote, d.mode, continue_dest, home, top, top_created);
  if (placed) *placed = top;
  if (top_created && top == dest && asked != ".")  // DEST itself is the copy: --resume continues it
    remember_tree_copy(client.home(), top_fd.get(), source);
  return top_fd;
}

}  // namespace

namespace {
std::array<uint8_t, 16> digest16(std::string_view s) {
  uint8_t d[crypto::Sha256::kDigestLen];
  crypto::Sha256::digest(s.data(), s.size(), d);
  std::array<uint8_t, 16> out;
  std::memcpy(out.data(), d, out.size());
  return out;
}
}  // namespace

bool SeenSet::insert(std::string_view s) {
  const auto d = digest16(s);
  if (digests_.size() >= kMaxEntries) return digests_.count(d) == 0;
  return digests_.insert(d).second;
}

bool SeenSet::contains(std::string_view s) const { return digests_.count(digest16(s)) > 0; }

namespace {
// TreeSessions::files: the files of this session's listing, by their remote paths, and where
// each goes below `top`; the earlier session's are let go only now.
void remember_files(TreeSessions* across, const RemoteDir& d, const std::string& base, const fs::path& top) {
  if (!across) return;
  std::vector<TreeSessions::Listed> now;
  std::set<std::string> listed;
  for (const auto& e : d.entries)
    if (e.type == proto::EntryType::file) {
      now.push_back({base + e.path, top / e.path});
      listed.insert(base + e.path);
    }
  for (auto& f : across->files)  // gone since the earlier listing (a sixty-first re-attack, S61-1)
    if (!listed.count(f.remote) && !across->settled.contains(f.remote))
      across->vanished.push_back(std::move(f));
  across->files = std::move(now);
}
}  // namespace

void recv_tree(Client& client, const std::string& remote, const fs::path& dest, bool preserve,
               const std::function<void(const std::string&, const fs::path&, uint64_t, int)>& fetch_one,
               const std::function<void(const std::string&)>& note,
               const std::function<void(const std::string&, const fs::path&, const FileResult*,
                                        const Failure*)>& pipelined,
               TreeSessions* across) {
  // DEST's way, walked before the listing: a missing or refused directory on it is said before the
  // server lists the whole tree (a twenty-eighth re-attack, N5: 2,040 entries listed for nothing).
  (void)files::resolve_guarded(dest);
  RemoteDir d = client.list(remote);
  // The local name comes from the request alone (scp semantics), never from the reply.
  const std::string asked = normal_request(remote.empty() ? "." : remote);
  check_listing(client, d, remote, asked, bool(pipelined));
  fs::path top;
  bool top_created = false;
  const OwnHome home(client.home());  // never the top, nor where it is made
  MadeDirs* by_command = across ? &across->made : nullptr;
  const UniqueFd top_fd =
      place_top(client, d, remote, asked, dest, across ? &across->placed : nullptr, home, top, top_created);
  DirWalker walker(top_fd.get(), top);
  Pipeline pipeline(client);
  std::vector<Made> made;  // directories this command created, parents first
  if (commands_own(top_fd.get(), top_created, by_command)) made.push_back({"", d.mode, d.mtime});
  std::string base = d.path == "." ? std::string() : d.path + "/";
  remember_files(across, d, base, top);
  SkippedTrees skipped;
  for (const auto& e : d.entries) {
    if (skipped.covers(e.path) || skipped.bad_name(e, base, top, pipelined) ||
        skipped.reserved_name(e, base, top, pipelined))
      continue;
    const std::string shown = joined(top, e.path);  // an fs::path only where a file goes
    std::string parent = parent_of(e.path);
    std::string name = parent.empty() ? e.path : e.path.substr(parent.size() + 1);
    switch (e.type) {
      case proto::EntryType::dir:
        make_tree_dir(walker, e, base, shown, skipped, made, by_command, home, pipelined);
        break;
      case proto::EntryType::file: {
        if (across && across->settled.contains(base + e.path)) break;  // reported by an earlier session
        const fs::path local = top / e.path;
        int pfd = walker.dir_of(parent);
        if (auto f = cannot_write(pfd, name, local)) {
          if (!pipelined) throw *f;
          pipelined(base + e.path, local, nullptr, &*f);  // this file alone; the others go on
          break;
        }
        // --resume: pipelined unless a partial file waits here (protocol 4, 3.8 and 3.10).
        const bool resumable = client.resuming() && !has_partial(pfd, name);
        if (pipelined && pipeline.can_get(e.size, resumable)) {
          std::string from = base + e.path;
          pipeline.get(
              from, local, e.size, pfd, parent.empty() ? nullptr : walker.current(),
              [&pipelined, from, local](const FileResult* ok, const Failure* failed) {
                pipelined(from, local, ok, failed);
              },
              resumable);
          break;
        }
        pipeline.drain();
        fetch_or_end(client, fetch_one, pipelined, d, size_t(&e - d.entries.data()), base, top, skipped, pfd);
        break;
      }
      case proto::EntryType::symlink:
        note("skipping " + printable(base + e.path) + " (symbolic link on the server, not followed)");
        break;
      case proto::EntryType::other:
        note("skipping " + printable(base + e.path) + " (not a regular file)");
        break;
      case proto::EntryType::unreadable_dir:
      case proto::EntryType::left_out:
        // What the server could not send: named, the rest fetched, and the command fails at the end.
        not_listed(e, d.path, base, top, pipelined);
        break;
    }
  }
  pipeline.drain();
  apply_made(walker, made, preserve);
}

}  // namespace aesxfer::client
