// The directories a session's mkdirs answered for, made or found, by their path from the root: a
// later put or mkdir whose directory has that path must reach that same directory, or it is
// refused. Every request is resolved from the root again, so without this a directory renamed
// away and replaced by another user's, in a directory they may write to, took the rest of a tree
// into theirs (a fifty-eighth re-attack, G58-1: a team's 2775 directory, the client said ok, exit
// 0). "The same" is the device, the inode, the owner and the birth time (or, without one, the
// inode's generation): a directory removed and made again at once gets the inode number back
// (a fifty-ninth re-attack, K59-1: 6 of 8 swaps won against device and inode alone).
// Bounded: the most recent kMaxPins paths, each kept as its path_key (server/path_key.h).
#pragma once
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <deque>
#include <map>
#include <string>
#include <utility>

#include "server/path_key.h"

namespace aesxfer::server {

// What tells one directory from another that took its place, read once from its descriptor: what
// DirPins compares, and what a mkdir's or stat's answer hashes into the directory's identity
// (server/requests.cpp, dir_identity). Zeros where unknown; the generation only without a birth time.
struct DirMark {
  bool read = false;  // statx answered
  bool is_dir = false, has_btime = false;
  uint64_t dev = 0, ino = 0;
  uint32_t uid = 0;
  int64_t btime_sec = 0;
  uint32_t btime_nsec = 0, generation = 0;
  bool operator==(const DirMark&) const = default;
  static DirMark of(int fd);
};

// Whether the directory open as `fd` can be the one a mkdir made at `before` (CLOCK_REALTIME, read
// before the mkdir): empty (no entry but "." and ".."), and born then where the file system keeps
// birth times. Its descriptor's position is left at the start.
bool freshly_made_dir(int fd, const timespec& before);

class DirPins {
 public:
  static constexpr size_t kMaxRefused = 1024;
  static constexpr size_t kMaxPins = 65536;  // 9.7 MB per session at most (measured, N60-7)

  // `shown`, the directory's path from the root as a Place shows it ("." for the root), is the
  // directory `mark` was read from.
  void pin(const std::string& shown, const DirMark& mark);
  // False when `shown` is pinned to another directory than `dirfd`'s (read only when it is pinned),
  // or than the one `mark` was read from.
  bool holds(const std::string& shown, int dirfd) const;
  bool holds(const std::string& shown, const DirMark& mark) const;
  // `shown` and everything below it hold no directory for the rest of the session: the mkdir that
  // was to make it found another directory in its place (a sixty-first re-attack, Q61-3).
  void refuse_below(const std::string& shown);
  // True when the directory `mark` was read from is pinned at another path than `shown`: moved
  // there meanwhile (a sixty-second re-attack, U62-2: the session's own directory, renamed or
  // exchanged into another path's place, took that path's subtree).
  bool pinned_elsewhere(const std::string& shown, const DirMark& mark) const;
  // True only when `shown` is pinned, to the directory `mark` was read from.
  bool pinned(const std::string& shown, const DirMark& mark) const;
  size_t size() const { return pins_.size(); }

 private:
  using Key = PathKey;
  bool refused(const std::string& shown) const;
  std::map<Key, DirMark> pins_;
  std::map<std::pair<uint64_t, uint64_t>, Key> at_;  // each pinned directory's (device, inode): where
  std::deque<std::string> refused_;                  // refuse_below's, at most kMaxRefused
  std::deque<Key> order_;
};

}  // namespace aesxfer::server
