// `aesxfer speed`: throughput of the raw cipher and MAC operations, in the manner of
// `openssl speed -evp`. The top of app/lab/speed.cpp says exactly what each cell measures.
#pragma once
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace aesxfer::app {

struct SpeedOptions {
  std::vector<std::string>
      ciphers;  // names or aliases from crypto::find_cipher / find_mac; empty = all ciphers and all MACs
  double seconds = 1.0;   // per cell (openssl uses 3; default 1 to keep it quick; fractions like 0.1 work)
  bool no_aesni = false;  // already applied by main (proto::init(no_aesni)), just reported
  bool no_aesni_too = false;  // every AES row once more with the portable code (same colour, dashed)
  int multi = 1;              // N threads, each running the same work; figures are summed
  bool elapsed = false;  // divide by wall time, not by the measuring thread's CPU time (openssl -elapsed)
  bool json = false;
  std::string plot;  // when set, also write the table as an SVG chart there, a panel per family (svg.h)
  std::vector<size_t> sizes = {16, 64, 256, 1024, 8192, 16384, 1 << 20};
};

// Runs the benchmark, prints the table (or JSON) to out, returns a process exit code.
// Unknown names or bad options: one-line error on err, return 2.
int run_speed(const SpeedOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace aesxfer::app
