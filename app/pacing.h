// Client helpers for the CLI: the -l bandwidth limit and --json-progress lines (the directory
// walk of -r is client/send_tree.h's walk_tree).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "app/progress.h"

namespace aesxfer::app {

// -l LIMIT (Kbit/s, like scp): a token bucket with a burst of 50 ms of the rate (4 KiB at least),
// fed from the progress callback (after each record is handed to the socket). The sender sleeps
// whenever it is ahead of LIMIT * elapsed + burst. Granularity is one record (app/cli.cpp makes
// records small at low rates): a finer limit needs a hook in the send loop (net/transfer.cpp).
class RateLimiter {
 public:
  explicit RateLimiter(double kbit_per_s);  // <= 0: unlimited
  bool enabled() const { return bytes_per_s_ > 0; }
  // `n` more bytes were sent; sleeps as long as the bucket is overdrawn.
  void consume(uint64_t n);

 private:
  double bytes_per_s_;
  double tokens_ = 0;
  std::chrono::steady_clock::time_point last_;
  bool started_ = false;
};

// --json-progress: one JSON object per line on `out`, about every 0.5 s and once at the end:
// {"file":..,["file_hex":..,]"bytes":..,"total_bytes":..,"mb_per_s":..,"seconds":..,"done":false|true}
// bytes counts the whole file (a resumed transfer starts at its offset); mb_per_s is the rate of
// this run (bytes moved since start / seconds since start). A stream of unknown size (send -,
// started with kUnknownTotal) has "total_bytes":null until its final line, which has the size.
// A file that fails ends with a line of "done":false and "error" instead (fail()), so that every
// file named gets one final line. The final line's seconds are the transfer's own when given (the ones --json
// and the summary line divide by), so that every output states one rate for the file, a tiny pipelined one
// included.
class JsonProgress {
 public:
  JsonProgress(std::string name, bool enabled, std::FILE* out = stdout);
  void start(uint64_t total, uint64_t base = 0);
  void update(uint64_t done);
  void finish(uint64_t done, double seconds = -1);
  // The final line of a file that failed (or was not moved because an earlier one ended the
  // session): "done":false and "error":why, at the bytes it had reached ("total_bytes" null when it
  // never started). Nothing when finish() or fail() already gave the final line.
  // `total`: the file's size when it is known although the file never started (a get refused for
  // room before its data: proto::Failure::size).
  void fail(const std::string& why, uint64_t total = kUnknownTotal);

 private:
  void line(uint64_t done, bool final, double seconds = -1, const std::string* error = nullptr);
  std::string name_;
  bool enabled_;
  std::FILE* out_;
  bool started_ = false, ended_ = false;
  uint64_t total_ = 0, base_ = 0, reached_ = 0;
  std::chrono::steady_clock::time_point t0_, last_;
};

}  // namespace aesxfer::app
