#include "server/parts.h"

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <string>

#include "files/resume.h"

namespace aesxfer::server {

using proto::Failure;

using namespace aesxfer::net;    // the layers below: connections and streams,
using namespace aesxfer::files;  // files and keys
using Clock = std::chrono::steady_clock;

void PartsTransfer::part_finished(uint32_t part, bool ok) {
  {
    std::lock_guard<std::mutex> g(mu);
    if (ok)
      state[part] = verified;
    else
      failed = true;
  }
  cv.notify_all();
}

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

std::string dest_key(const Place* dest) {
  if (!dest) return "/dev/null";
  struct stat st {};
  ::fstat(dest->dir.get(), &st);
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + "/" + dest->name;
}

// Why part req cannot join t (under t.mu), or nothing.
std::optional<Refusal> unfit_part(const PartsTransfer& t, const proto::Message& req, const Place* dest,
                                  const std::string& where) {
  // Its directory is not the one the transfer's first part reached: moved or replaced since (a
  // sixtieth re-attack, M60-4: "part 4 does not match its transfer" named no reason).
  if (t.dest != where && t.shown == (dest ? dest->shown : "/dev/null"))
    return Refusal{
        proto::Status::permission,
        req.path +
            ": the directory it goes into is not the one the transfer's first part reached (it was "
            "moved or replaced meanwhile); nothing is written into it"};
  if (t.dest != where || t.size != req.size || t.nparts != req.nparts || t.mode != req.mode ||
      t.mtime != req.mtime || t.flags != req.flags)
    return Refusal{proto::Status::refused,
                   req.path + ": part " + std::to_string(req.part) + " does not match its transfer"};
  if (t.state[req.part] != PartsTransfer::pending || t.failed || t.committed)
    return Refusal{proto::Status::refused,
                   req.path + ": part " + std::to_string(req.part) + " was sent already"};
  return std::nullopt;
}

}  // namespace

std::shared_ptr<PartsTransfer> PartsRegistry::join(const proto::PublicKey& client, const proto::Message& req,
                                                   const Place* dest, Refusal& why) {
  std::string who(client.begin(), client.end());
  std::string key = who;
  key.append(req.xfer_id.begin(), req.xfer_id.end());
  const std::string where = dest_key(dest);
  std::lock_guard<std::mutex> g(mu_);
  uint64_t uncommitted = 0, open_files = 0;
  std::shared_ptr<PartsTransfer> t;
  for (auto it = live_.begin(); it != live_.end();) {
    auto l = it->second.lock();
    if (!l) {
      it = live_.erase(it);
      continue;
    }
    if (it->first == key) t = l;
    if (!l->dev_null) {
      std::lock_guard<std::mutex> tg(l->mu);
      if (!l->committed) {
        ++open_files;
        if (l->client == who) uncommitted += l->size;
      }
    }
    ++it;
  }
  if (!t) {
    if (dest && req.size > max_uncommitted_ - std::min(uncommitted, max_uncommitted_)) {
      why = {proto::Status::busy,
             req.path + ": this client key has " + std::to_string(uncommitted >> 20) +
                 " MiB of parallel-stream transfers not yet committed (the server's limit is " +
                 std::to_string(max_uncommitted_ >> 20) + " MiB)"};
      return nullptr;
    }
    if (dest && open_files >= max_files_) {
      why = {proto::Status::busy, req.path + ": server busy: " + std::to_string(open_files) +
                                      " parallel-stream files open already (its open-file limit)"};
      return nullptr;
    }
    t = std::make_shared<PartsTransfer>();
    t->id = req.xfer_id;
    t->client = who;
    t->dest = where;
    t->shown = dest ? dest->shown : "/dev/null";
    t->dev_null = !dest;
    t->size = req.size;
    t->nparts = req.nparts;
    t->mode = req.mode;
    t->mtime = req.mtime;
    t->flags = req.flags;
    t->state.assign(req.nparts, PartsTransfer::pending);
    t->range.assign(req.nparts, {0, 0});
    if (dest) {
      try {
        t->out = std::make_unique<TempFile>(*dest);
      } catch (const Failure& f) {
        why = refusal_for(req.path, f.err);
        return nullptr;
      }
    }
    live_[key] = t;
  }
  std::lock_guard<std::mutex> tg(t->mu);
  if (auto no = unfit_part(*t, req, dest, where)) {
    why = *no;
    return nullptr;
  }
  t->state[req.part] = PartsTransfer::receiving;
  t->range[req.part] = {req.offset, req.length};
  return t;
}

uint64_t PartsTransfer::arrived() {
  std::lock_guard<std::mutex> g(mu);
  uint64_t n = 0;
  for (size_t i = 0; i < state.size() && i < range.size(); ++i)
    if (state[i] == verified) n += range[i].second;
  return n;
}

std::optional<Refusal> PartsRegistry::commit(PartsTransfer& t, const std::string& what,
                                             std::chrono::milliseconds wait) {
  // The client sends commit right behind its own part, so the other parts may still be arriving:
  // wait until every part verified or one failed. Each part's session has its own idle timeout;
  // a part that has not even been asked for gets one `wait` from now.
  std::unique_lock<std::mutex> g(t.mu);
  // A second commit of a transfer already in place (only a hand-made client sends one) is told so,
  // not "no such file" from renaming the temporary file again (a twenty-first re-attack, N5).
  if (t.committed) return Refusal{proto::Status::refused, what + ": this transfer is already committed"};
  auto verified = [&] {
    return std::all_of(t.state.begin(), t.state.end(), [](auto s) { return s == PartsTransfer::verified; });
  };
  const auto deadline = Clock::now() + wait;
  while (!t.failed && !verified()) {
    bool pending =
        std::any_of(t.state.begin(), t.state.end(), [](auto s) { return s == PartsTransfer::pending; });
    if (pending && Clock::now() >= deadline) break;
    t.cv.wait_for(g, std::chrono::milliseconds(200));
  }
  if (t.failed || !verified() || !covers(t))
    return Refusal{proto::Status::integrity, what + ": not every part arrived and verified"};
  try {
    if (t.out) {
      bool preserve = t.flags & proto::kFlagPreserve;
      t.out->commit(stored_mode(t.mode, preserve), effective_mtime(t.mtime, preserve));
    }
  } catch (const Failure& f) {
    // Its own words ("cannot rename into place: ...; its temporary file ... stays beside it"), as a
    // single stream's: refusal_for's said "permission denied" of an append-only directory and named
    // no temporary file (a fifty-seventh re-attack, E57-2).
    return Refusal{refusal_for(what, f.err).status, what + ": " + f.what()};
  }
  t.committed = true;
  return std::nullopt;
}

}  // namespace aesxfer::server
