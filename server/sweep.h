// Expiry of what interrupted transfers leave beside their destinations (docs/DESIGN.md "Files"):
//
//   .NAME.aesxfer-partial
//       kept on purpose for `send --resume`; removed once older than --partial-max-age (default
//       7 days; 0 keeps them for ever), unless a session holds its lock (being resumed right now)
//   .NAME.aesxfer-tmp-XXXXXXXXXX (files::is_temp_name)
//       temporary files of a server SIGKILLed mid-transfer (a live transfer removes its own on
//       every other failure); removed once their last write is more than 24 hours old
//
// The server sweeps a directory when a client writes into it (put, probe), at most once every
// 10 minutes per directory, so a busy directory costs one readdir now and then. Directories that
// are never written again keep their debris; the patterns above are easy to find(1).
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "server/name_budget.h"

namespace aesxfer::server {

// What sweeps may read, over the whole server. Sweeping is the server's housekeeping: the names
// it reads are charged to no client key (a forty-seventh re-attack, A47-1: charged to the key
// whose put brought the sweep, 90,000 names another local user had planted in a shared
// directory locked that key out of every put, probe, mkdir and listing for 40 s, every 10
// minutes). Instead every sweep of the server draws on one allowance, and one visit reads at most
// `chunk` names; a directory with more is swept on by the next puts into it, from where the last
// visit stopped. A client that probes into large directories spends the allowance, and sweeps
// then wait; no request is ever refused for them.
struct SweepLimits {
  uint64_t burst = 1'000'000;    // about 0.5 s of one core's readdir
  uint64_t per_second = 20'000;  // about 1% of a core after that
  uint64_t chunk = 32'768;       // one visit: some 15 ms
};

class Sweeper {
 public:
  Sweeper(std::chrono::seconds partial_max_age, std::chrono::seconds temp_max_age = std::chrono::hours(24),
          SweepLimits limits = {})
      : partial_max_age_(partial_max_age),
        temp_max_age_(temp_max_age),
        chunk_(limits.chunk),
        names_(limits.burst, limits.per_second) {}
  // Sweeps the directory open as dirfd (`shown` names it in the log) unless it was swept less
  // than 10 minutes ago, or goes on with a sweep of it that stopped at its chunk. Logs one line
  // for the files it removed (how many, the first one's name). With the allowance spent it does
  // nothing; a later request tries again.
  void maybe_sweep(int dirfd, const std::string& shown, const std::function<void(const std::string&)>& log);
  // Where a sweep starts (a telldir() position; none: the beginning), how many names it may read,
  // and, after it, how many it read and where the next one goes on (none: it read to the end).
  struct Span {
    std::optional<long> start;
    uint64_t max = UINT64_MAX;
    uint64_t read = 0;
    std::optional<long> next;
  };
  // Sweeps the directory now; returns the number of files removed.
  size_t sweep(int dirfd, const std::string& shown, const std::function<void(const std::string&)>& log,
               Span* span = nullptr);
  size_t sweep(const std::filesystem::path& dir, const std::function<void(const std::string&)>& log);

 private:
  std::chrono::seconds partial_max_age_, temp_max_age_;
  uint64_t chunk_;
  NameBudget names_;
  using Key = std::pair<dev_t, ino_t>;  // a directory
  struct Swept {
    std::chrono::steady_clock::time_point when;
    std::list<Key>::iterator at;  // its place in order_
    std::optional<long> next;     // a sweep stopped at its chunk: where the next visit goes on
  };
  std::mutex mu_;
  std::map<Key, Swept> last_;
  // The keys of last_, the least recently swept first: what is forgotten is taken from the front,
  // O(1), never found by a scan of the whole map under mu_ (a fortieth re-attack, A-F3: with
  // 65,536 remembered, each probe of an unremembered directory cost ~2 ms of CPU under the lock
  // every put and probe of every session takes).
  std::list<Key> order_;
};

}  // namespace aesxfer::server
