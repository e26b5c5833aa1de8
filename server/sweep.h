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
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>

#include "server/name_budget.h"

namespace aesxfer::server {

class Sweeper {
 public:
  Sweeper(std::chrono::seconds partial_max_age, std::chrono::seconds temp_max_age = std::chrono::hours(24))
      : partial_max_age_(partial_max_age), temp_max_age_(temp_max_age) {}
  // Sweeps the directory open as dirfd (`shown` names it in the log) unless it was swept less
  // than 10 minutes ago. Logs one line for the files it removed (how many, the first one's name).
  // `names`: the budget of the client key whose request brought the sweep, charged with the names
  // it reads; an empty one leaves the sweep to a later request (a forty-sixth re-attack, A46-2: a
  // probe of 76 bytes had the server read a directory of 200,000 names outside every budget).
  void maybe_sweep(int dirfd, const std::string& shown, const std::function<void(const std::string&)>& log,
                   NameBudget* names = nullptr);
  // Sweeps the directory now; returns the number of files removed (and the names read in *read).
  size_t sweep(int dirfd, const std::string& shown, const std::function<void(const std::string&)>& log,
               uint64_t* read = nullptr);
  size_t sweep(const std::filesystem::path& dir, const std::function<void(const std::string&)>& log);

 private:
  std::chrono::seconds partial_max_age_, temp_max_age_;
  using Key = std::pair<dev_t, ino_t>;  // a directory
  struct Swept {
    std::chrono::steady_clock::time_point when;
    std::list<Key>::iterator at;  // its place in order_
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
