// scp-style progress meter: "name  45%  123MB 456.7MB/s   00:03 ETA", redrawn about once a second
// on a terminal; silent otherwise.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace aesxfer::app {

class Progress {
 public:
  Progress(std::string name, bool enabled, std::FILE* out = stdout);
  void start(uint64_t total);
  void update(uint64_t done);
  // Draws the 100% line (on a terminal) and ends it.
  void finish(uint64_t done, double seconds);

 private:
  void draw(uint64_t done, bool final);
  std::string name_;
  bool enabled_;
  std::FILE* out_;
  uint64_t total_ = 0;
  std::chrono::steady_clock::time_point t0_, last_;
};

std::string human_bytes(uint64_t n);  // "1024MB" like scp: KB/MB/GB with 1024 steps

}  // namespace aesxfer::app
