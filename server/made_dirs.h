// The directories a client key's sessions made, remembered while the server runs: a mkdir with
// the preserve flag gives a directory its mode and time only if a session made it (PROTOCOL.md
// 3.5), and the session that sends `send -r -p`'s final mkdirs after a lost connection (--retries)
// is not the one that made most of them (a thirtieth re-attack's twin of B-N3: they kept the mode
// they were made with). Bounded: the most recent kMaxDirs of each key; a session also keeps its
// own, unbounded, in RequestContext.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <mutex>
#include <set>
#include <utility>

namespace aesxfer::server {

class MadeDirs {
 public:
  static constexpr size_t kMaxDirs = 65536;  // about 4 MiB per key at most

  void add(dev_t dev, ino_t ino) {
    std::lock_guard<std::mutex> g(mu_);
    if (!set_.insert({dev, ino}).second) return;
    order_.push_back({dev, ino});
    if (order_.size() > kMaxDirs) {
      set_.erase(order_.front());
      order_.pop_front();
    }
  }
  bool has(dev_t dev, ino_t ino) const {
    std::lock_guard<std::mutex> g(mu_);
    return set_.count({dev, ino}) > 0;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::pair<dev_t, ino_t>> set_;
  std::deque<std::pair<dev_t, ino_t>> order_;
};

}  // namespace aesxfer::server
