// The names one client key's listings (recv -r) may have the server read, over all its sessions:
// a token bucket of `burst` names, refilled at `per_second`. A listing over --max-list is refused
// only once its walk has read twice that many names, so a key that pipelined list requests for a
// tree just over the limit had the server walk it again for each, 7 s of CPU for 20 requests of
// 44 bytes (a forty-third re-attack, A-F1). The server gives each key 4 x --max-list names at once
// and --max-list every 10 s after: two full walks, then one every 20 s.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace aesxfer::server {

class NameBudget {
 public:
  NameBudget(uint64_t burst, uint64_t per_second)
      : burst_(burst), per_second_(per_second), left_(double(burst)), at_(std::chrono::steady_clock::now()) {}
  // Takes n names; false (nothing taken) when fewer are left.
  bool take(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    refill();
    if (left_ < double(n)) return false;
    left_ -= double(n);
    return true;
  }
  // Takes up to n names, as many as are left (whole ones); returns how many (0: none left).
  uint64_t take_up_to(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    refill();
    const uint64_t got = left_ < 1 ? 0 : std::min(n, uint64_t(left_));
    left_ -= double(got);
    return got;
  }
  // Gives back n names taken and not used.
  void give_back(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    left_ = std::min(double(burst_), left_ + double(n));
  }
  // Takes n names that were read already (a walk judged them before it knew how many): the budget
  // may go below zero, down to -burst, and take() fails until it has refilled.
  void charge(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    left_ = std::max(-double(burst_), left_ - double(n));
  }

 private:
  void refill() {  // under mu_
    const auto now = std::chrono::steady_clock::now();
    left_ = std::min(double(burst_),
                     left_ + std::chrono::duration<double>(now - at_).count() * double(per_second_));
    at_ = now;
  }
  std::mutex mu_;
  uint64_t burst_, per_second_;
  double left_;
  std::chrono::steady_clock::time_point at_;
};

}  // namespace aesxfer::server
