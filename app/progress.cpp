#include "app/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

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

Progress::Progress(std::string name, bool enabled, std::FILE* out)
    : name_(std::move(name)), enabled_(enabled), out_(out) {}

void Progress::start(uint64_t total) {
  total_ = total;
  t0_ = last_ = Clock::now();
  if (enabled_) draw(0, false);
}

void Progress::update(uint64_t done) {
  if (!enabled_) return;
  auto now = Clock::now();
  if (now - last_ < std::chrono::seconds(1)) return;
  last_ = now;
  draw(done, false);
}

void Progress::finish(uint64_t done, double) {
  if (enabled_) draw(done, true);
}

void Progress::draw(uint64_t done, bool final) {
  double secs = std::chrono::duration<double>(Clock::now() - t0_).count();
  double rate = secs > 0 ? done / secs : 0;
  int pct = total_ ? int(done * 100 / total_) : 100;
  char eta[32];
  if (final) {
    std::snprintf(eta, sizeof eta, "%02d:%02d    ", int(secs) / 60, int(secs) % 60);
  } else if (rate > 0 && total_ > done) {
    int left = int((total_ - done) / rate);
    std::snprintf(eta, sizeof eta, "%02d:%02d ETA", left / 60, left % 60);
  } else {
    std::snprintf(eta, sizeof eta, "--:-- ETA");
  }
  winsize ws{};
  int cols = (::ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) ? ws.ws_col : 80;
  char right[96];
  std::snprintf(right, sizeof right, " %3d%% %8s %7.1fMB/s   %s", pct, human_bytes(done).c_str(), rate / 1e6, eta);
  int name_w = cols - int(std::string(right).size()) - 1;
  if (name_w < 8) name_w = 8;
  std::string name = name_.size() > size_t(name_w) ? name_.substr(0, name_w) : name_;
  std::fprintf(out_, "\r%-*s%s", name_w, name.c_str(), right);
  if (final) std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace aesxfer::app
