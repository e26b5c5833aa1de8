// The directories a session's mkdirs answered for, made or found, by their path from the root: a
// later put or mkdir whose directory has that path must reach that same directory (device and
// inode), or it is refused. Every request is resolved from the root again, so without this a
// directory renamed away and replaced by another user's, in a directory they may write to, took
// the rest of a tree into theirs (a fifty-eighth re-attack, G58-1: a team's 2775 directory, the
// client said ok, exit 0). Bounded: the most recent kMaxPins paths, kept as 128 bits of SHA-256.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>

namespace aesxfer::server {

class DirPins {
 public:
  static constexpr size_t kMaxPins = 65536;  // about 5 MiB per session at most

  // `shown`, the directory's path from the root as a Place shows it ("." for the root), is `st`'s.
  void pin(const std::string& shown, const struct stat& st);
  // False when `shown` is pinned to another directory than `dirfd`'s.
  bool holds(const std::string& shown, int dirfd) const;
  size_t size() const { return pins_.size(); }

 private:
  using Key = std::array<uint8_t, 16>;
  static Key key(const std::string& shown);
  std::map<Key, std::pair<dev_t, ino_t>> pins_;
  std::deque<Key> order_;
};

}  // namespace aesxfer::server
