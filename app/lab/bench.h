// `aesxfer bench`: the cipher lab. Sends the same data to HOST:/dev/null once per cipher per
// repeat over the real client path (a temporary file of --size, read like any file the user
// sends), and reports MB/s (median, min, max), the CPU each side used, the implementation that ran
// and a one-line verdict on what limited the transfer. With no HOST it starts `aesxfer serve` as a
// child process on an ephemeral 127.0.0.1 port (its own CPU accounting) and stops it afterwards.
// With --vs-scp every cipher OpenSSH offers is also sent with `scp -c` (and scp's defaults as one
// more row), to HOST through the user's ssh setup or, without HOST, to a throwaway sshd on
// 127.0.0.1 (app/lab/bench_scp.h); rows OpenSSH cannot have say why.
// See app/lab/bench.cpp and app/lab/bench_scp.cpp for how each figure is measured, and the verdicts.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace aesxfer::crypto {
struct CipherDesc;
}

namespace aesxfer::app {

// True when a row of cipher c running the implementation `impl` is AES without AES-NI (or VAES):
// the portable code of a cipher that has hardware code, dashed in every chart (app/lab/svg.h).
bool aes_without_aesni(const crypto::CipherDesc& c, const std::string& impl);

struct BenchOptions {
  std::string host;                   // empty: local server child on 127.0.0.1
  std::string address;                // HOST after the config file's HostName (the aesxfer rows connect
                                      // here; scp gets HOST as typed and reads ssh's own config)
  uint16_t port = 7227;               // remote HOST's port (the local server picks its own)
  std::vector<std::string> ciphers;   // names or aliases; empty = every cipher of the table
  std::string mac;                    // for non-AEAD ciphers; empty = hmac-sha256
  uint64_t size = uint64_t(1) << 30;  // bytes per transfer
  int repeat = 3;                     // transfers per cipher (the median is reported)
  bool no_aesni = false;              // already applied by main (proto::init(no_aesni)), just reported
  bool no_aesni_too = false;          // every AES cipher also with the portable code on both sides
  bool json = false;                  // one JSON object with "rows"
  bool csv = false;                   // CSV, see kBenchCsvHeader
  std::string plot;                   // SVG bar chart to write, or empty
  std::string server_binary = "/proc/self/exe";  // what the local server child runs
  double timeout = 60;                           // network timeout per operation, seconds
  bool quiet = false;                            // no per-run progress lines on err
  bool vs_scp = false;                           // also send with `scp -c` (app/lab/bench_scp.h)
  std::vector<std::string> ssh_opts;             // --ssh-opts, each split at spaces, given to scp first
  std::string sshd;                              // --sshd: the sshd to start without HOST (default: found)
  // --record-size LIST: every aesxfer row once per record size (the sweep; --plot then draws MB/s
  // against record size, one line per cipher). Empty: the client's default size.
  std::vector<uint64_t> record_sizes;
};

// The CSV columns, in order (the first line of --csv output).
// tool is "aesxfer" or "scp"; ssh_cipher the OpenSSH cipher of an scp row; vs_scp, on aesxfer
// rows, the median over the median of the scp row of the same cipher. "n/a" where no figure.
// contended: the row is marked "*" (bench_contended); setup_dominates: "+", the median set-up
// (connect, key exchange, authentication) took longer than the median transfer.
inline constexpr const char* kBenchCsvHeader =
    "cipher,mac,impl,no_aesni,mb_per_s_median,mb_per_s_min,mb_per_s_max,client_cpu_pct,server_cpu_pct,"
    "verdict,"
    "tool,ssh_cipher,vs_scp,record_size,contended,setup_dominates";

// A side is "busy" (CPU-bound) at or above this share of one core, in percent.
inline constexpr double kBenchBusyPct = 85.0;

// What each side did over the transfers, in percent of one core (time / wall time): CPU time,
// and time runnable but waiting for a core (other processes had it). server_* < 0: not measured.
struct BenchLoad {
  double client_cpu = 0, client_wait = 0;
  double server_cpu = -1, server_wait = -1;
};

// The verdict for one row. A side is busy when cpu + wait >= kBenchBusyPct:
//   both busy "sender and receiver CPU", client busy "sender cipher CPU", server busy "receiver
//   CPU" (each with " (CPU contended)" appended when a busy side waited kBenchContendedPct or
//   more); neither busy: "CPU contention (other processes)" when the two sides together waited
//   kBenchContendedPct * 2 or more, else "network", or "network or receiver (server CPU not
//   measured)" when the server is remote.
std::string bench_verdict(const BenchLoad& load);
inline constexpr double kBenchContendedPct = 15.0;

// True when the verdict says the CPU was contended (either form above): the row is marked "*" in
// the table, the charts, the JSON ("contended") and the CSV.
bool bench_contended(const BenchLoad& load);

// Runs the lab, prints the table (or JSON/CSV) on out and progress/errors on err; exit code:
// 0 success, 1 a transfer or the local server failed, 2 bad options, 130 interrupted (SIGINT or
// SIGTERM with a local server; the temporary files are removed first).
int run_bench(const BenchOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace aesxfer::app
