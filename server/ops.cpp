#include "server/ops.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <iomanip>
#include <memory>
#include <sstream>

#include "client/atomic_file.h"
#include "client/resume.h"
#include "server/paths.h"

namespace aesxfer::net {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

proto::Message response(proto::Status st, const std::string& text = {}) {
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

}  // namespace

bool serve_extended(Conn& c, const proto::SessionKeys& keys, const fs::path& root_real, const proto::Message& req,
                    const std::function<void(const std::string&)>& log) {
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
  return false;
}

}  // namespace aesxfer::net
