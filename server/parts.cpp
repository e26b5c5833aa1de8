#include "server/parts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <iomanip>
#include <sstream>

#include "net/atomic_file.h"
#include "net/resume.h"
#include "net/transfer.h"
#include "server/ops.h"
#include "server/paths.h"

namespace aesxfer::net {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct PartsTransfer {
  std::mutex mu;
  std::condition_variable cv;  // a part finished (verified or failed)
  std::array<uint8_t, proto::kXferIdLen> id{};
  fs::path dest;
  bool dev_null = false;
  uint64_t size = 0;
  uint32_t nparts = 0, mode = 0;
  int64_t mtime = 0;
  uint8_t flags = 0;
  std::unique_ptr<AtomicFile> out;  // removed with the last reference unless committed
  enum State : uint8_t { pending, receiving, verified };
  std::vector<State> state;
  std::vector<std::pair<uint64_t, uint64_t>> range;  // offset, length per part
  bool failed = false, committed = false;
  Clock::time_point started = Clock::now();
};

namespace {

// The ranges of all parts, sorted, must tile [0, size) exactly.
bool covers(const PartsTransfer& t) {
  auto r = t.range;
  std::sort(r.begin(), r.end());
  uint64_t at = 0;
  for (const auto& [off, len] : r) {
    if (off != at) return false;
    at += len;
  }
  return at == t.size;
}

}  // namespace

std::shared_ptr<PartsTransfer> PartsRegistry::join(const proto::PublicKey& client, const proto::Message& req,
                                                   const fs::path& dest, bool dev_null, proto::Status& st,
                                                   std::string& why) {
  std::string key(client.begin(), client.end());
  key.append(req.xfer_id.begin(), req.xfer_id.end());
  std::lock_guard<std::mutex> g(mu_);
  for (auto it = live_.begin(); it != live_.end();) it = it->second.expired() ? live_.erase(it) : std::next(it);
  std::shared_ptr<PartsTransfer> t;
  if (auto it = live_.find(key); it != live_.end()) t = it->second.lock();
  if (!t) {
    t = std::make_shared<PartsTransfer>();
    t->id = req.xfer_id;
    t->dest = dest;
    t->dev_null = dev_null;
    t->size = req.size;
    t->nparts = req.nparts;
    t->mode = req.mode;
    t->mtime = req.mtime;
    t->flags = req.flags;
    t->state.assign(req.nparts, PartsTransfer::pending);
    t->range.assign(req.nparts, {0, 0});
    if (!dev_null) {
      try {
        t->out = std::make_unique<AtomicFile>(dest);
      } catch (const Failure& f) {
        st = errno == EACCES ? proto::Status::permission : proto::Status::io_error;
        why = req.path + ": " + f.what();
        return nullptr;
      }
      // Room for the whole file at once: a full disk shows now rather than mid-way.
      if (int e = ::posix_fallocate(t->out->fd(), 0, off_t(req.size)); e == ENOSPC || e == EDQUOT) {
        st = proto::Status::no_space;
        why = req.path + ": no space left on device";
        return nullptr;
      }
    }
    live_[key] = t;
  }
  std::lock_guard<std::mutex> tg(t->mu);
  if (t->dest != dest || t->size != req.size || t->nparts != req.nparts || t->mode != req.mode ||
      t->mtime != req.mtime || t->flags != req.flags) {
    st = proto::Status::refused;
    why = req.path + ": part " + std::to_string(req.part) + " does not match its transfer";
    return nullptr;
  }
  if (t->state[req.part] != PartsTransfer::pending || t->failed || t->committed) {
    st = proto::Status::refused;
    why = req.path + ": part " + std::to_string(req.part) + " was sent already";
    return nullptr;
  }
  t->state[req.part] = PartsTransfer::receiving;
  t->range[req.part] = {req.offset, req.length};
  return t;
}

bool PartsRegistry::serve(Conn& c, const proto::SessionKeys& keys, const fs::path& root_real,
                          const proto::Message& req, Held& held, const std::function<void(const std::string&)>& log) {
  const bool ranged = req.flags & proto::kFlagRange;
  if (req.op == proto::Op::stat) {
    proto::Status st;
    std::string why;
    auto where = confine(root_real, req.path, proto::Op::get, req.text, st, why);
    if (!where) {
      c.send_message(response(st, why));
      return true;
    }
    proto::Message m = response(proto::Status::ok);
    if (where->dev_zero) {
      m.size = req.size;
    } else {
      struct stat sb {};
      if (::stat(where->path.c_str(), &sb) != 0) {
        int e = errno;
        c.send_message(response(e == EACCES ? proto::Status::permission : proto::Status::not_found,
                                req.path + ": " + errno_text(e)));
        return true;
      }
      m.size = uint64_t(sb.st_size);
      m.mode = sb.st_mode & 07777;
      m.mtime = sb.st_mtim.tv_sec;
    }
    c.send_message(m);
    return true;
  }

  if (req.op == proto::Op::commit) {
    if (!ranged) {
      c.send_message(response(proto::Status::refused, "commit without a transfer id"));
      return true;
    }
    auto it = std::find_if(held.begin(), held.end(), [&](const auto& t) { return t->id == req.xfer_id; });
    if (it == held.end()) {
      c.send_message(response(proto::Status::refused, req.path + ": no such transfer on this connection"));
      return true;
    }
    std::shared_ptr<PartsTransfer> t = *it;
    held.erase(it);
    // The client sends commit right behind its own part, so the other parts may still be
    // arriving: wait until every part verified or one failed. Each part's session has its own
    // idle timeout; a part that has not even been asked for gets one timeout from now.
    std::unique_lock<std::mutex> g(t->mu);
    auto verified = [&] {
      return std::all_of(t->state.begin(), t->state.end(), [](auto s) { return s == PartsTransfer::verified; });
    };
    const auto deadline = Clock::now() + c.timeout();
    while (!t->failed && !verified()) {
      bool pending = std::any_of(t->state.begin(), t->state.end(), [](auto s) { return s == PartsTransfer::pending; });
      if (pending && Clock::now() >= deadline) break;
      t->cv.wait_for(g, std::chrono::milliseconds(200));
    }
    bool all = verified();
    std::ostringstream os;
    os << "peer=" << c.peer() << " put file=" << printable(t->dev_null ? "/dev/null" : rel(root_real, t->dest))
       << " bytes=" << t->size << " parts=" << t->nparts << " cipher=" << keys.cipher->name
       << " mac=" << (keys.cipher->aead ? "aead" : keys.mac->name);
    if (t->failed || !all || !covers(*t)) {
      c.send_message(response(proto::Status::integrity, req.path + ": not every part arrived and verified"));
      log(os.str() + " result=\"failed: parts missing\"");
      return true;
    }
    try {
      if (t->out) {
        bool preserve = t->flags & proto::kFlagPreserve;
        t->out->commit(effective_mode(t->mode, preserve), effective_mtime(t->mtime, preserve));
      }
    } catch (const Failure& f) {
      c.send_message(response(proto::Status::io_error, req.path + ": " + f.what()));
      log(os.str() + " result=\"failed: " + printable(f.what()) + "\"");
      return true;
    }
    t->committed = true;
    double secs = std::chrono::duration<double>(Clock::now() - t->started).count();
    c.send_message(response(proto::Status::ok));
    os << " MB/s=" << std::fixed << std::setprecision(1) << (secs > 0 ? t->size / secs / 1e6 : 0.0) << " result=ok";
    log(os.str());
    return true;
  }

  if (!ranged) return false;
  if (req.op != proto::Op::put && req.op != proto::Op::get) {
    c.send_message(response(proto::Status::refused, "byte ranges apply to put and get only"));
    return true;
  }
  proto::Status st;
  std::string why;
  auto where = confine(root_real, req.path, req.op, req.text, st, why);
  if (!where) {
    c.send_message(response(st, why));
    return true;
  }

  if (req.op == proto::Op::put) {
    std::shared_ptr<PartsTransfer> t = join(keys.client_key, req, where->path, where->dev_null, st, why);
    if (!t) {
      c.send_message(response(st, why));
      return true;
    }
    if (held.size() >= proto::kMaxParts) held.erase(held.begin());  // bounded: oldest uncommitted gives way
    held.push_back(t);
    c.send_message(response(proto::Status::ok));
    proto::Message result;
    result.type = proto::MsgType::result;
    try {
      recv_stream(c, t->out ? t->out->fd() : -1, req.length, nullptr, StreamOptions{0, false, true, req.offset});
    } catch (const Failure& e) {
      {
        std::lock_guard<std::mutex> g(t->mu);
        t->failed = true;
      }
      t->cv.notify_all();
      const auto* re = dynamic_cast<const RecvError*>(&e);
      result.status = re ? proto::Status(re->status) : proto::Status::integrity;
      result.text = e.what();
      try {
        c.send_message(result);
      } catch (...) {
      }
      log("peer=" + c.peer() + " put file=" + printable(req.path) + " part=" + std::to_string(req.part) +
          " result=\"failed: " + printable(e.what()) + "\"");
      throw Failure(e.what());
    }
    {
      std::lock_guard<std::mutex> g(t->mu);
      t->state[req.part] = PartsTransfer::verified;
    }
    t->cv.notify_all();
    c.send_message(result);
    return true;
  }

  // get: one range of the file as it is now.
  int fd = -1;
  if (!where->dev_zero) {
    fd = ::open(where->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      c.send_message(response(e == EACCES ? proto::Status::permission : proto::Status::not_found,
                              req.path + ": " + errno_text(e)));
      return true;
    }
  }
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{fd};
  proto::Message m = response(proto::Status::ok);
  m.size = req.size;
  if (fd >= 0) {
    struct stat sb {};
    ::fstat(fd, &sb);
    if (uint64_t(sb.st_size) != req.size) {
      c.send_message(response(proto::Status::integrity, req.path + ": file changed size during the transfer"));
      return true;
    }
    m.mode = sb.st_mode & 07777;
    m.mtime = sb.st_mtim.tv_sec;
    ::posix_fadvise(fd, off_t(req.offset), off_t(req.length), POSIX_FADV_SEQUENTIAL);
  }
  c.send_message(m);
  try {
    send_file_await_result(c, fd, req.length, StreamOptions{0, false, true, req.offset});
  } catch (const Failure& e) {
    log("peer=" + c.peer() + " get file=" + printable(req.path) + " part=" + std::to_string(req.part) +
        " result=\"failed: " + printable(e.what()) + "\"");
    throw;
  }
  log("peer=" + c.peer() + " get file=" + printable(req.path) + " part=" + std::to_string(req.part) + "/" +
      std::to_string(req.nparts) + " bytes=" + std::to_string(req.length) + " cipher=" + keys.cipher->name +
      " result=ok");
  return true;
}

}  // namespace aesxfer::net
