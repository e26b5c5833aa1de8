// The bytes one client key's transfers moved without a line naming their file, by file, shared
// by all the key's sessions (RequestContext::quiet_bytes). A transfer that moves fewer bytes than
// its line takes is within the key's budget of quiet lines (requests.cpp, log_transfer), so that
// the log never grows faster than what the client sent or read; summed here, a file read or
// written in small pieces is named once its pieces are worth a line (a sixtieth re-attack, N60-1:
// 800 ranged gets of 250 bytes read a 200 KB file, and no line named it).
//
// Bounded: at most kMaxFiles files are remembered, by a hash of the path as the log shows it; past
// that one is forgotten (a client that spreads its pieces over thousands of files pays a request
// for each). Two paths with the same hash share a sum, which only names a file sooner. Safe to
// share between threads: each call takes the ledger's own lock.
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace aesxfer::server {

class QuietBytes {
 public:
  static constexpr size_t kMaxFiles = 4096;
  // Adds `moved` to the bytes `file` moved without its line, and returns that sum.
  uint64_t add(const std::string& file, uint64_t moved) {
    const size_t h = std::hash<std::string>{}(file);
    std::lock_guard<std::mutex> g(mu_);
    auto it = owed_.find(h);
    if (it == owed_.end()) {
      if (moved == 0) return 0;
      if (owed_.size() >= kMaxFiles) owed_.erase(owed_.begin());
      it = owed_.emplace(h, 0).first;
    }
    it->second = it->second > UINT64_MAX - moved ? UINT64_MAX : it->second + moved;
    return it->second;
  }
  // The sum so far.
  uint64_t owed(const std::string& file) const {
    const size_t h = std::hash<std::string>{}(file);
    std::lock_guard<std::mutex> g(mu_);
    const auto it = owed_.find(h);
    return it == owed_.end() ? 0 : it->second;
  }
  // A line named `file`: its sum starts again.
  void settle(const std::string& file) {
    const size_t h = std::hash<std::string>{}(file);
    std::lock_guard<std::mutex> g(mu_);
    owed_.erase(h);
  }
  size_t files() const {
    std::lock_guard<std::mutex> g(mu_);
    return owed_.size();
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<size_t, uint64_t> owed_;
};

}  // namespace aesxfer::server
