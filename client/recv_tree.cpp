#include "client/recv_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <unordered_set>
#include <vector>

#include "net/atomic_file.h"
#include "net/resume.h"
#include "crypto/util.h"

namespace aesxfer::net {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

Failure refused(const proto::Message& m, const std::string& what) {
  std::string text = m.text.empty() ? proto::status_name(m.status) : m.text;
  return Failure(printable(what + ": " + text));
}

// The existing destination as a resume base: a regular, non-empty file opened without following
// a symbolic link, or -1.
int open_destination_base(const fs::path& dest, uint64_t& size) {
  int fd = ::open(dest.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    ::close(fd);
    return -1;
  }
  size = uint64_t(st.st_size);
  return fd;
}

std::string parent_of(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

}  // namespace

// ---- get with the resume flag --------------------------------------------------------------

FileResult Client::fetch_resumed(const std::string& remote, const fs::path& local, uint64_t zero_size,
                                 const std::function<void(uint64_t)>& on_start, const ProgressFn& progress) {
  std::error_code ec;
  if (fs::is_directory(local, ec)) throw Failure(local.string() + ": is a directory");
  PartialFile pf(local);  // locked: a second recv --resume of the same file is refused
  uint64_t have = pf.length();
  // No partial file, but a destination: offer the destination as the prefix (like rsync
  // --append-verify or curl -C -). The server's size says what it can be: the whole file (then it
  // is only compared, and left as it is), a shorter version (then it is copied into the partial
  // file while it is hashed, and the rest is appended there), or neither. All the local work
  // happens before the request, with keep-alives, so none is left once the server streams; the
  // destination itself is written only by the final rename.
  struct Fd {
    int fd = -1;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } base;
  bool whole = false;
  if (have == 0) {
    uint64_t dsize = 0;
    base.fd = open_destination_base(local, dsize);
    if (base.fd >= 0) {
      proto::Message st = stat_remote(remote, zero_size);
      if (st.status == proto::Status::ok && dsize <= st.size) {
        have = dsize;
        whole = dsize == st.size;
      } else {
        ::close(base.fd);
        base.fd = -1;
      }
    }
  }
  std::optional<PrefixScan> scan;
  if (have)
    scan = scan_prefix(*keys_, base.fd >= 0 ? base.fd : pf.fd(), have, base.fd >= 0 && !whole ? pf.fd() : -1,
                       keepalive());
  proto::Message req;
  req.type = proto::MsgType::request;
  req.op = proto::Op::get;
  req.path = remote;
  req.size = zero_size;
  req.flags = proto::kFlagResume;
  req.offset = have;
  if (scan) req.digest = scan->mac;
  proto::Message resp = ask(req);
  if (resp.status != proto::Status::ok) throw refused(resp, conn_->peer() + ":" + remote);
  // The server echoes our prefix hash when it resumes at our offset, and sends none when it
  // starts from 0 (its file differs, or is shorter).
  uint64_t start = 0;
  if (!resp.digest.empty()) {
    if (req.digest.size() != proto::kPrefixMacLen || have > resp.size ||
        !crypto::ct_equal(resp.digest.data(), req.digest.data(), proto::kPrefixMacLen))
      throw Failure("protocol error from " + conn_->peer() + ": resume point not agreed");
    start = have;
  }
  resume_offset_ = start;
  FileResult r;
  r.file = remote;
  r.resumed_from = start;
  proto::Message result;
  result.type = proto::MsgType::result;
  StreamOptions so{start, opt_.fine_progress};
  if (start) so.prefix_hash = &scan->sum;

  if (start && whole && start == resp.size) {
    // The destination is the server's file: the end record is all that comes, and the
    // destination stays as it is (with -p it takes the server's mode and time).
    pf.discard();
    if (on_start) on_start(resp.size);
    auto t0 = Clock::now();
    try {
      r.checksum = recv_stream(*conn_, -1, resp.size, progress, so);
    } catch (const RecvError& e) {
      send_failure_result(e);
      throw Failure(local.string() + ": " + e.what() + " (the destination was left as it was)");
    }
    if (opt_.preserve) apply_mode_mtime(base.fd, resp.mode, resp.mtime);
    conn_->send_message(result);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.bytes = resp.size;
    r.record_size = conn_->record_size();
    r.verified = true;
    return r;
  }

  // The server's file grew between the stat and the request: the destination was hashed but not
  // copied. Copy it now; if it changed meanwhile, the whole-file SHA-256 fails the transfer.
  if (start && whole) copy_prefix(base.fd, pf.fd(), start);
  pf.truncate_to(start);
  if (on_start) on_start(resp.size);
  auto t0 = Clock::now();
  try {
    r.checksum = recv_stream(*conn_, pf.fd(), resp.size, progress, so);
    pf.commit(effective_mode(resp.mode, opt_.preserve), effective_mtime(resp.mtime, opt_.preserve));
  } catch (const RecvError& e) {
    bool bad = e.status == int(proto::Status::integrity);
    if (bad) pf.discard();  // known bad: the next --resume starts over
    send_failure_result(e);
    throw Failure(local.string() + ": " + e.what() + (bad ? "" : " (partial file kept for --resume)"));
  } catch (const Failure& e) {
    // Connection lost: what arrived was verified record by record and stays for --resume.
    throw Failure(std::string(e.what()) + " (partial file kept for --resume)");
  }
  conn_->send_message(result);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.bytes = resp.size;
  r.record_size = conn_->record_size();
  r.verified = true;
  return r;
}

// ---- list ------------------------------------------------------------------------------------

RemoteDir Client::list(const std::string& remote) {
  proto::Message req;
  req.type = proto::MsgType::request;
  req.op = proto::Op::list;
  req.path = remote.empty() ? "." : remote;
  proto::Message resp = ask(req);
  if (resp.status != proto::Status::ok) throw refused(resp, conn_->peer() + ":" + req.path);
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
  std::unordered_set<std::string> dirs{""}, seen;
  uint64_t bytes = 0;
  for (bool last = false; !last;) {
    Conn::Incoming in = conn_->recv_record("the listing");
    if (in.hdr.type != proto::RecordType::control) throw Failure(bad + " (not a control record)");
    auto page = proto::decode_list_page(in.payload);
    if (!page) throw Failure(bad + " (malformed page)");
    last = page->last;
    if (page->entries.size() > resp.size - d.entries.size())
      throw Failure(bad + " (more entries than announced)");
    for (auto& e : page->entries) {
      bytes += e.path.size();
      if (bytes > proto::kMaxListBytes) throw Failure(bad + " (too large)");
      if (!dirs.count(parent_of(e.path)))
        throw Failure(bad + " (" + printable(e.path) + " before its directory)");
      if (!seen.insert(e.path).second) throw Failure(bad + " (" + printable(e.path) + " twice)");
      if (e.type == proto::EntryType::dir) dirs.insert(e.path);
      d.entries.push_back(std::move(e));
    }
  }
  if (d.entries.size() != resp.size) throw Failure(bad + " (fewer entries than announced)");
  return d;
}

// ---- recv -r ---------------------------------------------------------------------------------

void recv_tree(Client& client, const std::string& remote, const fs::path& dest, bool preserve,
               const std::function<void(const std::string&, const fs::path&, uint64_t)>& fetch_one,
               const std::function<void(const std::string&)>& note) {
  RemoteDir d = client.list(remote);
  std::error_code ec;
  fs::path top = dest;
  if (fs::is_directory(dest, ec) && d.path != ".") top = dest / fs::path(d.path).filename();
  struct Made {
    fs::path path;
    uint32_t mode;
    int64_t mtime;
    bool created;
  };
  std::vector<Made> dirs;  // parents first; attributes applied in reverse
  auto make_dir = [&](const fs::path& p, uint32_t mode, int64_t mtime) {
    struct stat st {};
    bool created = false;
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) throw Failure(p.string() + ": exists and is not a directory");
    } else if (::mkdir(p.c_str(), (mode | 0700) & 0777) == 0) {
      created = true;
    } else {
      throw Failure(p.string() + ": " + errno_text(errno));
    }
    dirs.push_back({p, mode, mtime, created});
  };
  make_dir(top, d.mode, d.mtime);
  std::string base = d.path == "." ? std::string() : d.path + "/";
  for (const auto& e : d.entries) {
    fs::path local = top / e.path;
    switch (e.type) {
      case proto::EntryType::dir:
        make_dir(local, e.mode, e.mtime);
        break;
      case proto::EntryType::file:
        if (fs::is_directory(local, ec)) throw Failure(local.string() + ": is a directory");
        fetch_one(base + e.path, local, e.size);
        break;
      case proto::EntryType::symlink:
        note("skipping " + printable(base + e.path) + " (symbolic link on the server, not followed)");
        break;
      case proto::EntryType::other:
        note("skipping " + printable(base + e.path) + " (not a regular file)");
        break;
    }
  }
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    if (it->created || preserve) ::chmod(it->path.c_str(), effective_mode(it->mode, preserve));
    if (preserve) {
      timespec ts[2];
      ts[0].tv_sec = ts[1].tv_sec = it->mtime;
      ts[0].tv_nsec = ts[1].tv_nsec = 0;
      ::utimensat(AT_FDCWD, it->path.c_str(), ts, 0);
    }
  }
}

}  // namespace aesxfer::net
