// How many lines of one kind a peer can make the server write: at most `per_second` a second, and
// the first line let through after some were left out carries their count (" KEY=N"). Used for
// the lines a peer who has not logged in causes (server.cpp) and for the lines of one client key's
// requests that move no data, shared by all its sessions (requests.cpp). Safe to share between
// threads: each call takes the budget's own lock.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace aesxfer::server {

class LineBudget {
 public:
  // bytes_key: the key of the data bytes the lines left out moved (" BYTES_KEY=B" after the
  // count, when there were some), or nullptr.
  LineBudget(int per_second, const char* key, const char* bytes_key = nullptr)
      : per_second_(per_second), key_(key), bytes_key_(bytes_key) {}
  // nullopt when this line is left out (counted, with the data bytes its request moved), else the
  // suffix to append to it ("" or " KEY=N").
  std::optional<std::string> take(uint64_t moved = 0) {
    std::lock_guard<std::mutex> g(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_ >= std::chrono::seconds(1)) {
      window_ = now;
      used_ = 0;
    }
    if (used_ >= per_second_) {
      ++left_out_;
      left_out_bytes_ += moved;
      return std::nullopt;
    }
    ++used_;
    return suffix_locked();
  }
  // Counts data bytes left out with those of the lines left out, without a line of their own.
  void add_bytes(uint64_t moved) {
    std::lock_guard<std::mutex> g(mu_);
    left_out_bytes_ += moved;
  }
  // " KEY=N" for the lines left out since the last one written (and forgets them), or "".
  std::string left_out_suffix() {
    std::lock_guard<std::mutex> g(mu_);
    return suffix_locked();
  }

 private:
  std::string suffix_locked() {
    const uint64_t n = std::exchange(left_out_, 0), bytes = std::exchange(left_out_bytes_, 0);
    if (!n && !(bytes_key_ && bytes)) return std::string();
    std::string s = " " + std::string(key_) + "=" + std::to_string(n);
    if (bytes_key_ && bytes) s += " " + std::string(bytes_key_) + "=" + std::to_string(bytes);
    return s;
  }
  std::mutex mu_;
  int per_second_;
  const char* key_;
  const char* bytes_key_;
  std::chrono::steady_clock::time_point window_{};
  int used_ = 0;
  uint64_t left_out_ = 0;
  uint64_t left_out_bytes_ = 0;
};

}  // namespace aesxfer::server
