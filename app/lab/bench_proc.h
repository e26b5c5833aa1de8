// Process plumbing for `aesxfer bench` (app/lab/bench.cpp, app/lab/bench_scp.cpp): starting children
// (with a log file or a pseudo-terminal), stopping them by PID, and reading what /proc says about
// their CPU time and the time they waited for a core.
#pragma once
#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace aesxfer::app::proc {

// utime + stime of a process (all threads) in seconds, from /proc/PID/stat; with_children adds
// cutime + cstime (the children it has reaped). -1 if unreadable.
double cpu_seconds_of(pid_t pid, bool with_children = false);

// Seconds the threads of `pid` spent runnable but not running (schedstat run_delay); -1 if unknown.
double run_delay_seconds(pid_t pid);

// The direct children of pid (/proc/PID/task/*/children); empty when none or unknown.
std::vector<pid_t> children_of(pid_t pid);

// pid and all its descendants, pid first.
std::vector<pid_t> tree_of(pid_t pid);

// CPU seconds of a process tree: cpu_seconds_of(p, true) summed over tree_of(root). After every
// process but root has exited and been reaped, the root's own figure covers them all.
double tree_cpu_seconds(pid_t root);

// The end of a log file for an error message: at most the last 400 characters, trailing newlines
// dropped, "(no log)" when empty or missing.
std::string log_tail(const std::string& path);

// An executable: `name` itself when it contains a '/', else the first of `dirs`, then of $PATH,
// that holds an executable file of that name. Absolute when found; empty when not.
std::string find_program(const std::string& name, const std::vector<std::string>& dirs = {});

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0]: the program's path (no $PATH search)
  std::vector<std::string> env;   // NAME=value; empty: this process's environment
  std::string log;                // stdout and stderr to this file (0600, truncated); empty: /dev/null
  int out_fd = -1;                // or to this descriptor (a pipe's write end)
  int tty = -1;                   // or a pty slave: new session, controlling terminal, fds 0-2
};

// fork + exec. The child gets SIGTERM when this thread dies, and exits 127 when exec fails.
// Everything the child needs is prepared before fork (only async-signal-safe calls after it).
pid_t spawn(const SpawnOptions& o);

// Stops a child by its PID: SIGTERM, SIGKILL after grace_s; reaps it. Returns its exit status
// (128 + signal when killed), -1 when pid <= 0.
int stop(pid_t pid, double grace_s = 5) noexcept;

// Runs argv (argv[0] a path) to completion with stdout and stderr captured in `out`; returns the
// exit status, 128 + signal when killed (after timeout_s it is).
int run_capture(const std::vector<std::string>& argv, std::string& out, double timeout_s = 30);

// Time a tree of processes spent waiting for a core, by sampling: each process counts its last
// sampled run_delay minus its value when first seen (processes already there at start() keep that
// as their baseline, later ones start from 0). Waiting after the last sample of a process that
// then exits is lost, so sample often (bench: every 50 ms).
class TreeWait {
 public:
  void start(pid_t root);
  void sample(pid_t root);
  double seconds() const;  // -1 when nothing could be read

 private:
  std::map<pid_t, std::pair<double, double>> seen_;  // pid -> (baseline, last)
};

}  // namespace aesxfer::app::proc
