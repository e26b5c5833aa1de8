// The bytes one client key's transfers moved without a line naming their file, by file, shared
// by all the key's sessions (RequestContext::quiet_bytes). A transfer that moves fewer bytes than
// its line takes is within the key's budget of quiet lines (requests.cpp, log_transfer), so that
// the log never grows faster than what the client sent or read; summed here, a file read or
// written in small pieces is named once its pieces are worth a line (a sixtieth re-attack, N60-1:
// 800 ranged gets of 250 bytes read a 200 KB file, and no line named it). Of those bytes, the
// ones this key's puts wrote are summed apart: a put that replaced more than them is always
// named, and a file another wrote (or the server's) destroyed is named (a sixty-first re-attack,
// R61-3: reads of the file counted as the key's own bytes, and a put over an 85-byte file of
// another's went unlogged).
//
// Bounded: at most kMaxFiles files are remembered, each by 128 bits of SHA-256 of the path as the
// log shows it (a sixty-first re-attack, R61-2: by std::hash, whose seed is fixed, a crafted name
// shared a file's sum, and its lines cleared it). Past that, the file with the fewest bytes is
// forgotten: the one most recently added was, and a 1-byte put to a fresh name after each piece
// kept a file's sum from ever growing (R61-1). Safe to share between threads: each call takes the
// ledger's own lock.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "crypto/sha256.h"

namespace aesxfer::server {

class QuietBytes {
 public:
  static constexpr size_t kMaxFiles = 4096;
  struct Owed {
    uint64_t moved = 0;  // every transfer's
    uint64_t put = 0;    // this key's puts' (of `moved`)
  };
  // Adds a transfer's `moved` bytes to `file`'s (to its put bytes too when `put`), and returns
  // the sums before them.
  Owed add(const std::string& file, uint64_t moved, bool put) {
    const Key k = key(file);
    std::lock_guard<std::mutex> g(mu_);
    auto it = owed_.find(k);
    if (it == owed_.end()) {
      if (moved == 0) return {};
      if (owed_.size() >= kMaxFiles) forget_least();
      it = owed_.emplace(k, Owed{}).first;
    }
    const Owed before = it->second;
    it->second.moved = sum(before.moved, moved);
    if (put) it->second.put = sum(before.put, moved);
    return before;
  }
  Owed owed(const std::string& file) const {
    const Key k = key(file);
    std::lock_guard<std::mutex> g(mu_);
    const auto it = owed_.find(k);
    return it == owed_.end() ? Owed{} : it->second;
  }
  // A line named `file`: its bytes start again. What this key's puts wrote stays: a 1-byte put
  // over the 1-byte file the key's named put left there replaced the key's own byte.
  void settle(const std::string& file) {
    const Key k = key(file);
    std::lock_guard<std::mutex> g(mu_);
    const auto it = owed_.find(k);
    if (it == owed_.end()) return;
    it->second.moved = 0;
    if (it->second.put == 0) owed_.erase(it);
  }
  size_t files() const {
    std::lock_guard<std::mutex> g(mu_);
    return owed_.size();
  }

 private:
  using Key = std::array<uint8_t, 16>;
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      size_t h;
      std::memcpy(&h, k.data(), sizeof h);
      return h;
    }
  };
  static Key key(const std::string& file) {
    uint8_t d[crypto::Sha256::kDigestLen];
    crypto::Sha256::digest(file.data(), file.size(), d);
    Key k{};
    std::memcpy(k.data(), d, k.size());
    return k;
  }
  static uint64_t sum(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
  void forget_least() {  // under mu_
    auto least = owed_.begin();
    for (auto it = owed_.begin(); it != owed_.end(); ++it)
      if (it->second.moved < least->second.moved) least = it;
    owed_.erase(least);
  }
  mutable std::mutex mu_;
  std::unordered_map<Key, Owed, KeyHash> owed_;
};

}  // namespace aesxfer::server
