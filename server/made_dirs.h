// The directories a client key's sessions made, remembered while the server runs: a mkdir with
// the preserve flag gives a directory its mode and time only if a session made it (PROTOCOL.md
// 3.5), and the session that sends `send -r -p`'s final mkdirs after a lost connection (--retries)
// is not the one that made most of them (a thirtieth re-attack's twin of B-N3: they kept the mode
// they were made with).
// Each by its path and the whole mark of the directory made there (device, inode, owner, birth
// time or generation; server/dir_pins.h): by device and inode alone, a directory the key made and
// another user renamed to another name in a shared directory, or one the inode of a removed copy
// was given again, took the mode a later `send -r -p` asked for (a sixtieth re-attack, M60-1: a
// private 0700 tree opened to 0775 for the group).
// Bounded: the most recent DirPins::kMaxPins of each key, and of each session.
#pragma once
#include <mutex>
#include <string>

#include "server/dir_pins.h"

namespace aesxfer::server {

class MadeDirs {
 public:
  void add(const std::string& shown, const DirMark& mark) {
    std::lock_guard<std::mutex> g(mu_);
    made_.pin(shown, mark);
  }
  // Whether the directory `mark` was read from is the one made at `shown`.
  bool has(const std::string& shown, const DirMark& mark) const {
    std::lock_guard<std::mutex> g(mu_);
    return made_.pinned(shown, mark);
  }

 private:
  mutable std::mutex mu_;
  DirPins made_;
};

}  // namespace aesxfer::server
