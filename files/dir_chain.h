// Directories below a top directory fd, reached one component at a time, for walks in listing
// order (parents before their contents, depth first): the server's tree listing and the client's
// recv -r.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "files/unique_fd.h"

namespace aesxfer::files {

// Every component is opened by the caller's `open` (which refuses symbolic links: openat with
// O_NOFOLLOW | O_DIRECTORY, and says why in its own words), relative to its parent's fd, never by a
// path string. The last directory's ancestors stay open, but only a bounded number of them: the
// first kNear levels and every kStride-th level below. Going down then costs one openat per
// directory, and going back up at most kStride, where opening each directory from the top cost one
// per ancestor (a chain N deep: N^2/2 openat calls, 10 s of server CPU for N = 2000). A path of
// proto::kMaxPath bytes (at most 2048 levels) holds at most kNear + 2048 / kStride + 2 fds: the
// last directory's parent stays open too, so that its siblings cost one open each.
class DirChain {
 public:
  static constexpr size_t kNear = 8;
  static constexpr size_t kStride = 64;
  // open(at, name, prefix): the directory `name` inside fd `at`; prefix is its path below the top
  // ("a/b/name"), for messages. Returns an open fd or throws.
  using Opener = std::function<UniqueFd(int at, const std::string& name, const std::string& prefix)>;

  DirChain(int top, Opener open) : top_(top), open_(std::move(open)) {}

  // The fd of directory `rel` below the top ("" is the top itself; components split on '/', none
  // empty), valid until the next call (current() keeps it longer).
  int open(const std::string& rel);
  // The directory the last open() returned below the top (null before any, or after "").
  const std::shared_ptr<UniqueFd>& current() const { return cur_; }
  // How many fds the chain holds now (for tests).
  size_t held() const;

 private:
  static bool keep(size_t level) { return level < kNear || (level + 1) % kStride == 0; }
  int top_;
  Opener open_;
  std::string path_;                            // the last directory opened below the top
  std::vector<size_t> ends_;                    // where each of its components ends in path_
  std::vector<std::shared_ptr<UniqueFd>> fds_;  // fds_[i]: path_ up to ends_[i] when kept, else null
  std::shared_ptr<UniqueFd> cur_;
};

}  // namespace aesxfer::files
