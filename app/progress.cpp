#include "app/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "proto/failure.h"

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

namespace {
#include "app/columns.inc"

template <size_t N>
bool in_table(const char32_t (&r)[N][2], char32_t c) {
  const auto it = std::upper_bound(std::begin(r), std::end(r), c,
                                   [](char32_t v, const char32_t(&e)[2]) { return v < e[0]; });
  return it != std::begin(r) && c <= (*(it - 1))[1];
}

// The columns a code point takes on a terminal, without the locale's wcwidth (the process runs in
// whatever locale it was given, often "C", where wcwidth knows no character beyond ASCII): from
// Unicode's tables (app/columns.inc, scripts/gen-unicode-tables.py), marks and format characters 0, East
// Asian Wide and Fullwidth 2 (the CJK blocks and the emoji shown as emoji: U+1F680..U+1F6FF and
// U+26A1 counted as one column let a name chosen by the server wrap the progress line, and each
// redraw left a line behind, a forty-fifth re-attack, B-F5), the rest 1.
int columns_of(char32_t c) {
  if (c < 0x80) return 1;
  if (in_table(kZeroColumns, c)) return 0;
  return in_table(kWideColumns, c) ? 2 : 1;
}

// The length of the UTF-8 sequence at s[i] and its code point (a byte that starts none: 1, itself).
size_t next_char(const std::string& s, size_t i, char32_t& c) {
  const auto b = static_cast<unsigned char>(s[i]);
  const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
  if (n == 1 || i + n > s.size()) {
    c = b;
    return 1;
  }
  c = b & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto x = static_cast<unsigned char>(s[i + k]);
    if ((x & 0xc0) != 0x80) {
      c = b;
      return 1;
    }
    c = (c << 6) | (x & 0x3f);
  }
  return n;
}
}  // namespace

std::string fit_columns(const std::string& text, int cols) {
  std::string out;
  int used = 0;
  for (size_t i = 0; i < text.size();) {
    char32_t c = 0;
    // An escape of printable()'s ("\xe2", "\\") is cut whole or not at all: cut after "\x" or
    // "\xe", a name showed as its own escape's start (a fifty-eighth re-attack, H58-3).
    const size_t n =
        text[i] == '\\' ? std::min(proto::escaped_piece(text, i), text.size() - i) : next_char(text, i, c);
    const int w = text[i] == '\\' ? int(n) : columns_of(c);
    if (used + w > cols) break;
    out.append(text, i, n);
    used += w;
    i += n;
  }
  out.append(size_t(std::max(0, cols - used)), ' ');
  return out;
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
  const int pct = total_ && !unknown ? int(double(done) * 100 / double(total_)) : 100;
  char eta[32];
  if (final || (unknown && now - moved_ < stall_after_)) {  // the time so far
    std::snprintf(eta, sizeof eta, "%02d:%02d    ", int(secs) / 60, int(secs) % 60);
  } else if (now - moved_ >= stall_after_) {
    std::snprintf(eta, sizeof eta, "- stalled -");
  } else if (const double left_s = rate > 0 && total_ > done ? std::ceil(double(total_ - done) / rate) : -1;
             left_s >= 0 && left_s < 100 * 3600) {  // 00:00 only at the end; hours as scp shows them
    const int left = int(left_s);
    if (left >= 3600)
      std::snprintf(eta, sizeof eta, "%d:%02d:%02d ETA", left / 3600, left / 60 % 60, left % 60);
    else
      std::snprintf(eta, sizeof eta, "%02d:%02d ETA", left / 60, left % 60);
  } else {  // unknown, or a size that would take 100 hours or more (a forty-third re-attack: 2^63 bytes
            // made the ETA a negative number)
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
  // One line of at most cols - 1 columns, whatever the name (a line that wraps is never redrawn
  // over by "\r"): the name cut at a character, never inside one, and padded by the columns it
  // takes; a terminal too narrow for 8 of them gets the figures alone, cut to fit.
  const int room = std::max(cols - 1, 1), right_w = int(std::strlen(right));
  if (room - right_w >= 8)
    std::fprintf(out_, "\r%s%s", fit_columns(name_, room - right_w).c_str(), right);
  else
    std::fprintf(out_, "\r%.*s", room, right + 1);
  if (final) std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace aesxfer::app
