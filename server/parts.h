// Parallel streams (--streams N, docs/PROTOCOL.md "Parallel streams"): one file moved as N byte
// ranges over N connections of the same client. This registry does the joining and committing;
// the ranges themselves travel through the request handlers' one receive and one send path
// (server/requests.cpp).
//
//   put:  every part's request names the transfer (a random 16-byte id) and its range. The first
//         part to arrive creates the transfer's temporary file (no space is reserved before data
//         arrives); the others join it (same client key, same destination, size, part count).
//         Each range is verified by its own end record. The client then sends `commit` on one of
//         the transfer's connections; the file is renamed into place only when every part
//         verified and the ranges cover the file exactly. A transfer whose sessions all end
//         without a commit leaves nothing behind: the temporary file goes with the last reference.
//   get:  `stat` gives size, mode and mtime; each connection then asks for one range, which the
//         server checks against the file's current size (a file that changed fails the part).
#pragma once
#include <sys/types.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "proto/handshake.h"
#include "proto/messages.h"
#include "server/root.h"

namespace aesxfer::server {

struct PartsTransfer {
  std::mutex mu;
  std::condition_variable cv;  // a part finished (verified or failed)
  std::array<uint8_t, proto::kXferIdLen> id{};
  std::string client;  // the client key's bytes
  std::string dest;    // dev:ino of the directory, then the name ("/dev/null" for the sink)
  std::string shown;
  bool dev_null = false;
  uint64_t size = 0;
  uint32_t nparts = 0, mode = 0;
  int64_t mtime = 0;
  uint8_t flags = 0;
  std::unique_ptr<TempFile> out;  // removed with the last reference unless committed
  enum State : uint8_t { pending, receiving, verified };
  std::vector<State> state;
  std::vector<std::pair<uint64_t, uint64_t>> range;  // offset, length per part
  bool failed = false, committed = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  int fd() const { return out ? out->fd() : -1; }
  void part_finished(uint32_t part, bool ok);
  // The bytes of the parts that arrived and verified so far.
  uint64_t arrived();
};

class PartsRegistry {
 public:
  // Transfers this session took part in, kept alive until its commit or the session's end.
  using Held = std::vector<std::shared_ptr<PartsTransfer>>;

  // max_uncommitted: declared bytes of a client key's transfers not yet committed (or dropped).
  explicit PartsRegistry(uint64_t max_uncommitted = uint64_t(64) << 30) : max_uncommitted_(max_uncommitted) {}

  // At most this many parallel-stream temporary files open at once, over all sessions (set from
  // RLIMIT_NOFILE at start); a new transfer beyond it is told "busy".
  void set_max_files(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    max_files_ = n;
  }

  // The transfer a ranged put's part belongs to, created by its first part (dest empty with
  // dev_null); nullopt with why set when the part does not fit it or the client's budget.
  std::shared_ptr<PartsTransfer> join(const proto::PublicKey& client, const proto::Message& req,
                                      const Place* dest, Refusal& why);

  // commit: waits (at most `wait` for parts not yet asked for) until every part verified or one
  // failed, then renames the file into place. Returns the refusal, or nullopt when committed.
  static std::optional<Refusal> commit(PartsTransfer& t, const std::string& what,
                                       std::chrono::milliseconds wait);

 private:
  uint64_t max_uncommitted_;
  uint64_t max_files_ = UINT64_MAX;
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<PartsTransfer>> live_;  // key: client key || xfer id
};

}  // namespace aesxfer::server
