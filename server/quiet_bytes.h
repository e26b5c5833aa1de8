// The bytes one client key's transfers moved without a line naming their file, by file, shared
// by all the key's sessions (RequestContext::quiet_bytes). A transfer that moves fewer bytes than
// its line takes is within the key's budget of quiet lines (requests.cpp, log_transfer), so that
// the log never grows faster than what the client sent or read; summed here, a file read or
// written in small pieces is named once its pieces are worth a line (a sixtieth re-attack, N60-1:
// 800 ranged gets of 250 bytes read a 200 KB file, and no line named it).
// Apart, what this key's puts left in place there, the latest's: a put that replaced more than
// that is always named, so a file another wrote (or the server's) destroyed is named (a
// sixty-first re-attack, R61-3: reads of the file counted as the key's own bytes; a sixty-second,
// T62-1: so did a withdrawn put's and ranged parts' bytes, which left nothing in place).
//
// Bounded: at most kMaxFiles files, each by its path as the log shows it (server/path_key.h) (a
// sixty-first re-attack, R61-2: by std::hash, whose seed is fixed, a crafted name shared a file's
// sum, and its lines cleared it). Past that, the file touched least recently is forgotten: to push
// a file out between two of its pieces a client must touch every other file first, 4,095 requests
// for each piece. Forgetting the one most recently added to an empty bucket let a 1-byte put to a
// fresh name after each piece keep a file's sum at one piece (R61-1), and forgetting the one with
// the fewest bytes let 4,095 files of 201 bytes do the same, at 240 us of CPU for each new file (a
// sixty-second re-attack, T62-2, T62-3). Safe to share between threads: each call takes the
// ledger's own lock.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "server/path_key.h"

namespace aesxfer::server {

class QuietBytes {
 public:
  static constexpr size_t kMaxFiles = 4096;
  struct Owed {
    uint64_t moved = 0;   // every transfer's, since the file's last line
    uint64_t placed = 0;  // what the latest of this key's puts left in place there
  };
  // Adds a transfer's `moved` bytes to `file`'s; `placed`: a put left that many bytes in place
  // there. Returns the sums before.
  Owed add(const std::string& file, uint64_t moved, std::optional<uint64_t> placed = std::nullopt) {
    const Key k = path_key(file);
    std::lock_guard<std::mutex> g(mu_);
    auto it = index_.find(k);
    if (it == index_.end()) {
      if (moved == 0 && !placed) return {};
      if (index_.size() >= kMaxFiles) {
        index_.erase(order_.back().first);
        order_.pop_back();
      }
      order_.emplace_front(k, Owed{});
      it = index_.emplace(k, order_.begin()).first;
    } else {
      order_.splice(order_.begin(), order_, it->second);  // touched: the most recent
    }
    Owed& o = it->second->second;
    const Owed before = o;
    o.moved = before.moved > UINT64_MAX - moved ? UINT64_MAX : before.moved + moved;
    if (placed) o.placed = *placed;
    return before;
  }
  Owed owed(const std::string& file) const {
    const Key k = path_key(file);
    std::lock_guard<std::mutex> g(mu_);
    const auto it = index_.find(k);
    return it == index_.end() ? Owed{} : it->second->second;
  }
  // A line named `file`: its bytes start again; what the key's puts left there stays (a 1-byte put
  // over the 1-byte file the key's named put left replaced the key's own byte).
  void settle(const std::string& file) {
    const Key k = path_key(file);
    std::lock_guard<std::mutex> g(mu_);
    const auto it = index_.find(k);
    if (it == index_.end()) return;
    it->second->second.moved = 0;
    if (it->second->second.placed == 0) {
      order_.erase(it->second);
      index_.erase(it);
    }
  }
  size_t files() const {
    std::lock_guard<std::mutex> g(mu_);
    return index_.size();
  }

 private:
  using Key = PathKey;
  using Order = std::list<std::pair<Key, Owed>>;  // most recently touched first
  mutable std::mutex mu_;
  Order order_;
  std::unordered_map<Key, Order::iterator, PathKeyHash> index_;
};

}  // namespace aesxfer::server
