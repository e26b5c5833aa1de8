#include "app/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>

namespace aesxfer::app {
using Clock = std::chrono::steady_clock;

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = double(n);
  int u = 0;
  while (v >= 100000 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%s", v, units[u]);
  return buf;
}

Progress::Progress(std::string name, bool enabled, std::FILE* out, std::chrono::milliseconds stall_after)
    : name_(std::move(name)), enabled_(enabled), out_(out), stall_after_(stall_after) {}

Progress::~Progress() { stop_ticker(); }

void Progress::start(uint64_t total, uint64_t from) {
  total_ = total;
  from_ = seen_ = from;
  done_ = from;
  t0_ = moved_ = Clock::now();
  if (!enabled_) return;
  std::lock_guard<std::mutex> g(mu_);
  draw(from, false);
  if (ticker_.joinable()) return;
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> lk(mu_);
    while (!cv_.wait_for(lk, std::chrono::seconds(1), [this] { return stop_; })) draw(done_.load(), false);
  });
}

void Progress::update(uint64_t done) { done_.store(done, std::memory_order_relaxed); }

void Progress::stop_ticker() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

void Progress::finish(uint64_t done, double, bool replaced) {
  stop_ticker();
  if (!enabled_) return;
  std::lock_guard<std::mutex> g(mu_);
  if (!replaced) return draw(done, true);
  std::fputs("\r\033[K", out_);  // the summary line is written where the meter was
  std::fflush(out_);
}

// Called with mu_ held.
void Progress::draw(uint64_t done, bool final) {
  const auto now = Clock::now();
  if (done != seen_) {
    seen_ = done;
    moved_ = now;
  }
  const double secs = std::chrono::duration<double>(now - t0_).count();
  const double rate = secs > 0 && done > from_ ? double(done - from_) / secs : 0;
  const bool unknown = total_ == kUnknownTotal;
  const int pct = total_ && !unknown ? int(done * 100 / total_) : 100;
  char eta[32];
  if (final || (unknown && now - moved_ < stall_after_)) {  // the time so far
    std::snprintf(eta, sizeof eta, "%02d:%02d    ", int(secs) / 60, int(secs) % 60);
  } else if (now - moved_ >= stall_after_) {
    std::snprintf(eta, sizeof eta, "- stalled -");
  } else if (rate > 0 && total_ > done) {
    const int left = int(std::ceil(double(total_ - done) / rate));  // 00:00 only at the end
    std::snprintf(eta, sizeof eta, "%02d:%02d ETA", left / 60, left % 60);
  } else {
    std::snprintf(eta, sizeof eta, "--:-- ETA");
  }
  winsize ws{};
  const int cols = (::ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) ? ws.ws_col : 80;
  char right[96];
  if (unknown)
    std::snprintf(right, sizeof right, " %8s %7.1fMB/s %11s", human_bytes(done).c_str(), rate / 1048576.0,
                  eta);
  else
    std::snprintf(right, sizeof right, " %3d%% %8s %7.1fMB/s %11s", pct, human_bytes(done).c_str(),
                  rate / 1048576.0, eta);
  int name_w = cols - int(std::string(right).size()) - 1;
  if (name_w < 8) name_w = 8;
  const std::string name = name_.size() > size_t(name_w) ? name_.substr(0, size_t(name_w)) : name_;
  std::fprintf(out_, "\r%-*s%s", name_w, name.c_str(), right);
  if (final) std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace aesxfer::app
