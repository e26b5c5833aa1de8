// A file's version: what aesxfer compares to judge "the same file, unchanged since". Device and
// inode (another file renamed over the name is another version), size, and the modification and
// change times to the nanosecond (a write, a truncate, a chmod, a new link), as GNU tar judges
// "file changed as we read it". One definition for the three places that judge it: a sender that
// withdraws a file changed while it read it (net/transfer.cpp), the server's remembered prefix
// digests (server/digests.h), and the version a ranged get names (server/requests.cpp).
#pragma once

#include <sys/stat.h>

#include <compare>
#include <cstdint>

namespace aesxfer::files {

struct FileVersion {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;

  static FileVersion of(const struct stat& st) {
    return FileVersion{uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size),
                       int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                       int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
  }
  auto operator<=>(const FileVersion&) const = default;
};

// True when the file of `st` was changed after `since` (CLOCK_REALTIME_COARSE, as file times
// are): a retry offers and resumes only what its own command wrote. A change in the same tick of
// the clock counts as before, so that such a file is fetched whole, never wrong.
inline bool changed_after(const struct stat& st, const timespec& since) {
  return st.st_ctim.tv_sec > since.tv_sec ||
         (st.st_ctim.tv_sec == since.tv_sec && st.st_ctim.tv_nsec > since.tv_nsec);
}

}  // namespace aesxfer::files
