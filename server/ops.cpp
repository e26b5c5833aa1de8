#include "server/ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <memory>
#include <sstream>

#include "net/atomic_file.h"
#include "net/resume.h"
#include "crypto/util.h"
#include "server/paths.h"

namespace aesxfer::net {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

proto::Message response(proto::Status st, const std::string& text) {
  proto::Message m;
  m.type = proto::MsgType::response;
  m.status = st;
  m.text = text;
  return m;
}

std::string rel(const fs::path& root_real, const fs::path& p) {
  if (p == root_real) return ".";
  return p.lexically_relative(root_real).string();
}

void send_file_await_result(Conn& c, int fd, uint64_t size, const StreamOptions& opt) {
  bool sent = false;
  try {
    send_stream(c, fd, size, nullptr, opt);
    sent = true;
    proto::Message res = c.recv_message("the transfer");
    if (res.type != proto::MsgType::result) throw Failure("protocol error: expected a result");
    if (res.status != proto::Status::ok) throw Failure("client reported: " + printable(res.text));
  } catch (const Failure& e) {
    std::string reason = e.what();
    if (!sent) {
      try {
        c.set_timeout(std::chrono::milliseconds(500));
        proto::Message res = c.recv_message("the transfer");
        if (res.type == proto::MsgType::result && res.status != proto::Status::ok)
          reason = "client reported: " + printable(res.text);
      } catch (...) {
      }
    }
    throw Failure(reason);
  }
}

namespace {

void serve_mkdir(Conn& c, const fs::path& root_real, const proto::Message& req,
                 const std::function<void(const std::string&)>& log) {
  proto::Status st;
  std::string why;
  bool exists = false;
  auto target = confine_mkdir(root_real, req.path, req.text, &exists, st, why);
  if (!target) {
    c.send_message(response(st, why));
    log("peer=" + c.peer() + " mkdir file=" + printable(req.path) + " result=\"refused: " + printable(why) + "\"");
    return;
  }
  bool preserve = req.flags & proto::kFlagPreserve;
  if (!exists) {
    // Owner rwx while the tree is being filled; -p applies the exact mode afterwards (a second
    // mkdir of the same directory with the preserve flag).
    if (::mkdir(target->c_str(), (req.mode | 0700) & 0777) != 0 && errno != EEXIST) {
      int e = errno;
      c.send_message(response(e == EACCES ? proto::Status::permission : proto::Status::io_error,
                              req.path + ": " + errno_text(e)));
      return;
    }
  } else if (preserve && *target != root_real) {
    ::chmod(target->c_str(), req.mode & 07777);
    timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = req.mtime;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    ::utimensat(AT_FDCWD, target->c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }
  c.send_message(response(proto::Status::ok, rel(root_real, *target)));
  log("peer=" + c.peer() + " mkdir file=" + printable(rel(root_real, *target)) + " result=ok");
}

void serve_probe(Conn& c, const proto::SessionKeys& keys, const fs::path& root_real, const proto::Message& req) {
  proto::Status st;
  std::string why;
  auto where = confine(root_real, req.path, proto::Op::put, req.text, st, why);
  if (!where) {
    c.send_message(response(st, why));
    return;
  }
  proto::Message m = response(proto::Status::ok);
  if (!where->dev_null) {
    int fd = ::open(PartialFile::partial_path(where->path).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat sb {};
    if (fd >= 0 && ::fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
      m.size = uint64_t(sb.st_size);
      try {
        m.digest = prefix_mac(keys, fd, m.size);
      } catch (const Failure&) {
        m.size = 0;
      }
    }
    if (fd >= 0) ::close(fd);
  }
  c.send_message(m);
}

void serve_resumed_put(Conn& c, const fs::path& root_real, const proto::Message& req, const fs::path& dest,
                       const std::function<void(const std::string&)>& log) {
  auto log_result = [&](uint64_t bytes, double secs, const std::string& result) {
    std::ostringstream os;
    os << "peer=" << c.peer() << " put file=" << printable(rel(root_real, dest)) << " bytes=" << bytes
       << " resumed_from=" << req.offset << " MB/s=" << std::fixed << std::setprecision(1)
       << (secs > 0 ? bytes / secs / 1e6 : 0.0) << " result=" << result;
    log(os.str());
  };
  std::unique_ptr<PartialFile> pf;
  try {
    pf = std::make_unique<PartialFile>(dest);
  } catch (const Failure& f) {
    int e = errno;
    proto::Status st = e == EACCES ? proto::Status::permission : proto::Status::io_error;
    if (e == EWOULDBLOCK) st = proto::Status::busy;
    c.send_message(response(st, req.path + ": " + f.what()));
    log_result(0, 0, std::string("refused: ") + printable(f.what()));
    return;
  }
  if (req.offset > pf->length() || req.offset > req.size) {
    c.send_message(response(proto::Status::integrity, req.path + ": resume point beyond the kept partial file"));
    log_result(0, 0, "refused: bad resume point");
    return;
  }
  pf->truncate_to(req.offset);
  proto::Message ok = response(proto::Status::ok);
  ok.size = req.offset;
  c.send_message(ok);
  proto::Message result;
  result.type = proto::MsgType::result;
  bool preserve = req.flags & proto::kFlagPreserve;
  auto t0 = Clock::now();
  try {
    recv_stream(c, pf->fd(), req.size, nullptr, StreamOptions{req.offset, false});
    pf->commit(effective_mode(req.mode, preserve), effective_mtime(req.mtime, preserve));
  } catch (const RecvError& e) {
    if (e.status == int(proto::Status::integrity)) pf->discard();  // known bad: start over next time
    result.status = proto::Status(e.status);
    result.text = e.what();
    try {
      c.send_message(result);
    } catch (...) {
    }
    log_result(0, 0, std::string("failed: ") + e.what());
    throw Failure(e.what());
  } catch (const Failure& e) {
    // Connection lost: the partial file stays for the next --resume.
    result.status = proto::Status::integrity;
    result.text = e.what();
    try {
      c.send_message(result);
    } catch (...) {
    }
    log_result(0, 0, std::string("failed (partial file kept): ") + e.what());
    throw;
  }
  c.send_message(result);
  log_result(req.size - req.offset, std::chrono::duration<double>(Clock::now() - t0).count(), "ok");
}

// ---- list (recv -r) ------------------------------------------------------------------------

struct ListRefusal {
  proto::Status status;
  std::string why;
};

// Walks the directory open as `top` depth first, names sorted, parents before their contents.
// Every directory is opened component by component from `top` with O_NOFOLLOW, so neither a
// symlink in the tree nor one swapped in during the walk leads anywhere; symlinks and special
// files are listed as such (never followed), names with CR or LF are left out (no path on the
// wire may hold them). Throws ListRefusal past the limits.
class TreeLister {
 public:
  TreeLister(int top, const std::string& shown, uint64_t max_entries)
      : top_(top), shown_(shown), max_entries_(std::min(max_entries, proto::kMaxListEntries)) {}
  std::vector<proto::ListEntry> entries;
  uint64_t unlisted = 0;  // names with CR/LF

  void walk(const std::string& rel) {
    struct Item {
      std::string name;
      struct stat st;
    };
    std::vector<Item> items;
    {
      int fd = open_dir(rel);
      DIR* d = ::fdopendir(fd);
      if (!d) {
        int e = errno;
        ::close(fd);
        fail_errno(rel, e);
      }
      struct Closer {
        DIR* d;
        ~Closer() { ::closedir(d); }
      } closer{d};
      while (dirent* de = ::readdir(d)) {
        std::string name = de->d_name;
        if (name == "." || name == "..") continue;
        Item it{name, {}};
        if (::fstatat(::dirfd(d), de->d_name, &it.st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
        items.push_back(std::move(it));
        if (items.size() > max_entries_) too_many();
      }
    }
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.name < b.name; });
    for (const auto& it : items) {
      if (it.name.find_first_of("\r\n") != std::string::npos) {
        ++unlisted;
        continue;
      }
      proto::ListEntry e;
      e.path = rel.empty() ? it.name : rel + "/" + it.name;
      if (e.path.size() > proto::kMaxPath)
        throw ListRefusal{proto::Status::refused, shown_ + "/" + e.path.substr(0, 64) + "...: path longer than " +
                                                      std::to_string(proto::kMaxPath) + " bytes"};
      e.mode = it.st.st_mode & 07777;
      e.mtime = it.st.st_mtim.tv_sec;
      if (S_ISREG(it.st.st_mode)) {
        e.type = proto::EntryType::file;
        e.size = uint64_t(it.st.st_size);
      } else if (S_ISDIR(it.st.st_mode)) {
        e.type = proto::EntryType::dir;
      } else if (S_ISLNK(it.st.st_mode)) {
        e.type = proto::EntryType::symlink;
      } else {
        e.type = proto::EntryType::other;
      }
      bytes_ += e.path.size();
      if (entries.size() >= max_entries_) too_many();
      if (bytes_ > proto::kMaxListBytes)
        throw ListRefusal{proto::Status::refused, shown_ + ": listing larger than " +
                                                      std::to_string(proto::kMaxListBytes >> 20) + " MiB of paths"};
      bool dir = e.type == proto::EntryType::dir;
      std::string child = e.path;
      entries.push_back(std::move(e));
      if (dir) walk(child);
    }
  }

 private:
  int top_;
  std::string shown_;
  uint64_t max_entries_;
  uint64_t bytes_ = 0;

  [[noreturn]] void too_many() {
    throw ListRefusal{proto::Status::refused, shown_ + ": more than " + std::to_string(max_entries_) +
                                                  " entries to list (the server's limit, serve --max-list)"};
  }
  [[noreturn]] void fail_errno(const std::string& rel, int e) {
    std::string where = rel.empty() ? shown_ : shown_ + "/" + rel;
    if (e == ELOOP || e == ENOTDIR) throw ListRefusal{proto::Status::io_error, where + ": changed while being listed"};
    throw ListRefusal{e == EACCES ? proto::Status::permission : proto::Status::io_error, where + ": " + errno_text(e)};
  }
  // The directory `rel` below top, opened one component at a time without following symlinks.
  int open_dir(const std::string& rel) {
    int fd = ::dup(top_);
    if (fd < 0) fail_errno(rel, errno);
    size_t start = 0;
    while (start < rel.size()) {
      size_t slash = rel.find('/', start);
      std::string part = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      int next = ::openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      int e = errno;
      ::close(fd);
      if (next < 0) fail_errno(rel, e);
      fd = next;
      start = slash == std::string::npos ? rel.size() : slash + 1;
    }
    return fd;
  }
};

void send_list_pages(Conn& c, const std::vector<proto::ListEntry>& entries) {
  proto::ListPage page;
  size_t used = proto::kListPageHeader;
  std::vector<uint8_t> buf;
  auto flush = [&](bool last) {
    page.last = last;
    proto::encode_list_page(page, buf);
    std::memcpy(c.payload_buffer(), buf.data(), buf.size());
    c.send_record(proto::RecordType::control, 0, buf.size());
    page.entries.clear();
    used = proto::kListPageHeader;
  };
  for (const auto& e : entries) {
    if (used + proto::list_entry_size(e) > proto::kMaxListPage || page.entries.size() == 0xffff) flush(false);
    used += proto::list_entry_size(e);
    page.entries.push_back(e);
  }
  flush(true);
}

void serve_list(Conn& c, const fs::path& root_real, const proto::Message& req, const ExtendedLimits& limits,
                const std::function<void(const std::string&)>& log) {
  proto::Status st;
  std::string why;
  auto dir = confine_dir(root_real, req.path, st, why);
  auto refuse = [&](proto::Status s, const std::string& text) {
    c.send_message(response(s, text));
    log("peer=" + c.peer() + " list dir=" + printable(req.path) + " result=\"refused: " + printable(text) + "\"");
  };
  if (!dir) return refuse(st, why);
  int top = ::open(dir->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (top < 0) {
    int e = errno;
    return refuse(e == EACCES ? proto::Status::permission : proto::Status::io_error, req.path + ": " + errno_text(e));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{top};
  struct stat sb {};
  ::fstat(top, &sb);
  std::string shown = rel(root_real, *dir);
  TreeLister lister(top, shown, limits.max_list_entries);
  try {
    lister.walk("");
  } catch (const ListRefusal& r) {
    return refuse(r.status, r.why);
  }
  proto::Message ok = response(proto::Status::ok, shown);
  ok.size = lister.entries.size();
  ok.mode = sb.st_mode & 07777;
  ok.mtime = sb.st_mtim.tv_sec;
  c.send_message(ok);
  send_list_pages(c, lister.entries);
  log("peer=" + c.peer() + " list dir=" + printable(shown) + " entries=" + std::to_string(lister.entries.size()) +
      (lister.unlisted ? " unlisted=" + std::to_string(lister.unlisted) : std::string()) + " result=ok");
}

// ---- get with the resume flag (recv --resume) -----------------------------------------------

void serve_resumed_get(Conn& c, const proto::SessionKeys& keys, const fs::path& root_real, const proto::Message& req,
                       const fs::path& src, const std::function<void(const std::string&)>& log) {
  std::string shown = rel(root_real, src);
  uint64_t start = 0;
  auto log_result = [&](uint64_t bytes, double secs, const std::string& result) {
    std::ostringstream os;
    os << "peer=" << c.peer() << " get file=" << printable(shown) << " bytes=" << bytes << " resumed_from=" << start
       << " MB/s=" << std::fixed << std::setprecision(1) << (secs > 0 ? bytes / secs / 1e6 : 0.0)
       << " result=" << result;
    log(os.str());
  };
  int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    std::string text = req.path + ": " + errno_text(e);
    c.send_message(response(e == EACCES ? proto::Status::permission : proto::Status::not_found, text));
    log_result(0, 0, "refused: " + printable(text));
    return;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat sb {};
  ::fstat(fd, &sb);
  proto::Message resp = response(proto::Status::ok);
  resp.size = uint64_t(sb.st_size);
  resp.mode = sb.st_mode & 07777;
  resp.mtime = sb.st_mtim.tv_sec;
  // Resume only where the client's prefix hashes like ours; otherwise from 0.
  if (req.offset > 0 && req.offset <= resp.size && req.digest.size() == proto::kPrefixMacLen) {
    try {
      std::string mine = prefix_mac(keys, fd, req.offset);
      if (crypto::ct_equal(mine.data(), req.digest.data(), proto::kPrefixMacLen)) {
        start = req.offset;
        resp.digest = mine;
      }
    } catch (const Failure&) {  // shrank meanwhile: from 0
    }
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  c.send_message(resp);
  auto t0 = Clock::now();
  try {
    send_file_await_result(c, fd, resp.size, StreamOptions{start, false});
  } catch (const Failure& e) {
    log_result(0, 0, std::string("failed: ") + e.what());
    throw;
  }
  log_result(resp.size - start, std::chrono::duration<double>(Clock::now() - t0).count(), "ok");
}

}  // namespace

bool serve_extended(Conn& c, const proto::SessionKeys& keys, const fs::path& root_real, const proto::Message& req,
                    const std::function<void(const std::string&)>& log, const ExtendedLimits& limits) {
  if (req.op == proto::Op::mkdir) {
    serve_mkdir(c, root_real, req, log);
    return true;
  }
  if (req.op == proto::Op::probe) {
    serve_probe(c, keys, root_real, req);
    return true;
  }
  if (req.op == proto::Op::put && (req.flags & proto::kFlagResume)) {
    proto::Status st;
    std::string why;
    auto where = confine(root_real, req.path, proto::Op::put, req.text, st, why);
    if (!where || where->dev_null) return false;  // the plain put reports or sinks it
    serve_resumed_put(c, root_real, req, where->path, log);
    return true;
  }
  if (req.op == proto::Op::list) {
    serve_list(c, root_real, req, limits, log);
    return true;
  }
  if (req.op == proto::Op::get && (req.flags & proto::kFlagResume)) {
    proto::Status st;
    std::string why;
    auto where = confine(root_real, req.path, proto::Op::get, req.text, st, why);
    if (!where || where->dev_zero) return false;  // the plain get reports or serves it
    serve_resumed_get(c, keys, root_real, req, where->path, log);
    return true;
  }
  return false;
}

}  // namespace aesxfer::net
