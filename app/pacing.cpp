#include "app/pacing.h"

#include <algorithm>
#include <thread>

#include "app/json.h"
#include "app/progress.h"

namespace aesxfer::app {
using Clock = std::chrono::steady_clock;

RateLimiter::RateLimiter(double kbit_per_s) : bytes_per_s_(kbit_per_s > 0 ? kbit_per_s * 1000 / 8 : 0) {}

void RateLimiter::consume(uint64_t n) {
  if (!enabled() || n == 0) return;
  auto now = Clock::now();
  // Burst: 50 ms worth of the rate, at least 4 KiB (the smallest record; -l low picks it). It was
  // 16 KiB at least: a file that small was never paced, whatever -l said.
  const double burst = std::max(bytes_per_s_ * 0.05, 4096.0);
  if (!started_) {
    started_ = true;
    tokens_ = burst;
    last_ = now;
  }
  tokens_ = std::min(burst, tokens_ + std::chrono::duration<double>(now - last_).count() * bytes_per_s_);
  last_ = now;
  tokens_ -= double(n);
  if (tokens_ < 0) {
    auto wait = std::chrono::duration<double>(-tokens_ / bytes_per_s_);
    std::this_thread::sleep_for(wait);
    last_ = Clock::now();
    tokens_ = 0;
  }
}

JsonProgress::JsonProgress(std::string name, bool enabled, std::FILE* out)
    : name_(std::move(name)), enabled_(enabled), out_(out) {}

void JsonProgress::start(uint64_t total, uint64_t base) {
  total_ = total;
  base_ = reached_ = base;
  started_ = true;
  ended_ = false;  // a retry starts the file again
  t0_ = last_ = Clock::now();
}

void JsonProgress::update(uint64_t done) {
  reached_ = done;
  if (!enabled_) return;
  auto now = Clock::now();
  if (now - last_ < std::chrono::milliseconds(500)) return;
  last_ = now;
  line(done, false);
}

void JsonProgress::finish(uint64_t done, double seconds) {
  if (enabled_ && !ended_) line(done, true, seconds);
  ended_ = true;
}

void JsonProgress::fail(const std::string& why, uint64_t total) {
  if (!enabled_ || ended_) return;
  if (!started_) {
    t0_ = Clock::now();
    if (total != kUnknownTotal) {
      started_ = true;
      total_ = total;
    }
  }
  line(reached_, false, -1, &why);
  ended_ = true;
}

void JsonProgress::line(uint64_t done, bool final, double seconds, const std::string* error) {
  const double secs = seconds >= 0 ? seconds : std::chrono::duration<double>(Clock::now() - t0_).count();
  const double moved = done > base_ ? double(done - base_) : 0;
  Json j;
  set_name(j, "file", name_);
  j["bytes"] = done;
  // A stream of unknown size (send -): null until the final line, which has the size.
  if (!started_)
    j["total_bytes"] = nullptr;
  else if (total_ != kUnknownTotal)
    j["total_bytes"] = total_;
  else
    j["total_bytes"] = final ? Json(done) : Json(nullptr);
  j["mb_per_s"] = rounded(secs > 0 ? moved / secs / 1e6 : 0.0, 2);
  j["seconds"] = rounded(secs, 3);
  j["done"] = final;
  if (error) j["error"] = *error;
  std::fputs(json_line(j).c_str(), out_);
  std::fflush(out_);
}

}  // namespace aesxfer::app
