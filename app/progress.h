// scp-style progress meter: "name  45%  123MB 456.7MB/s   00:03 ETA" (of a stream of unknown
// size, send -: "name  123MB 456.7MB/s   00:03" with the time elapsed, like rsync's), redrawn once a second
// on a terminal by a ticker thread (so a transfer that makes no progress still shows it: after 5 s without a
// byte the ETA field reads "- stalled -", as scp's does); silent otherwise. The ETA is rounded up: it reads
// 00:00 only at the end. Units are scp's: sizes in KB, MB, GB of 1024, the rate in MB/s of 2^20 bytes; the
// summary line, --json, bench and speed use MB/s = 10^6 bytes/s instead (docs/aesxfer.1, UNITS). When the
// summary line follows on the same terminal it takes the meter's place, so each file leaves one line in one
// convention.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace aesxfer::app {

// A total that is not known before the transfer ends (the size of standard input, send -).
constexpr uint64_t kUnknownTotal = UINT64_MAX;

class Progress {
 public:
  Progress(std::string name, bool enabled, std::FILE* out = stdout,
           std::chrono::milliseconds stall_after = std::chrono::seconds(5));
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // total: the file's size (kUnknownTotal: not known before the end, send -; the line then shows
  // the bytes so far, the rate and the time elapsed, with no percentage or ETA); from: bytes
  // already at the receiver (a resumed transfer), which the rate and the ETA leave out.
  void start(uint64_t total, uint64_t from = 0);
  void update(uint64_t done);  // cheap: the ticker draws
  // Ends the meter (on a terminal): `replaced`: clears its line for the summary line that follows
  // on the same stream; else draws the 100% line and ends it.
  void finish(uint64_t done, double seconds, bool replaced = false);

 private:
  void draw(uint64_t done, bool final);
  void stop_ticker();
  std::string name_;
  bool enabled_;
  std::FILE* out_;
  std::chrono::milliseconds stall_after_;
  uint64_t total_ = 0, from_ = 0;
  std::atomic<uint64_t> done_{0};
  uint64_t seen_ = 0;  // done at the last draw that saw it move
  std::chrono::steady_clock::time_point t0_, moved_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread ticker_;
};

std::string human_bytes(uint64_t n);
// The longest start of `text` (UTF-8, made printable already) that fits in `cols` terminal
// columns, never cut inside a character or an escape, padded with spaces to exactly `cols` columns.
std::string fit_columns(const std::string& text, int cols);  // "1024MB" like scp: KB/MB/GB with 1024 steps

}  // namespace aesxfer::app
