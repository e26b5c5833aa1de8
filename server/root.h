// The served directory, held open as one directory fd: every file the server touches is reached
// from it by the kernel, never by a path string checked first and opened later (docs/SECURITY.md,
// "Confinement").
//
//   - Directories are opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//     RESOLVE_NO_MAGICLINKS) from the root fd; where openat2 is missing (Linux < 5.6, or
//     AESXFER_NO_OPENAT2 set, as the tests do) one component at a time with
//     openat(O_NOFOLLOW | O_DIRECTORY). Either way no symlink is ever followed, so a directory
//     swapped for a symlink mid-request fails the request instead of leading out.
//   - The last component is opened with openat(dir fd, name, O_NOFOLLOW | O_NONBLOCK) and checked
//     with fstat (S_ISREG) before any read or write: a FIFO or device never blocks a session.
//   - Files appear by renameat between fds of the same directory: temporary files are created
//     with openat(O_CREAT | O_EXCL), partial files (send --resume) with openat(O_NOFOLLOW) and
//     a lock. Their names never exceed NAME_MAX.
//   - Every path that would leave the root, through a symlink or otherwise, gets one answer
//     (kLeavesRoot), whether or not anything exists where it leads.
//   - The server's own $AESXFER_HOME, when it lies under the root, is neither served, listed nor
//     written.
#pragma once
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/unique_fd.h"
#include "net/conn.h"
#include "proto/messages.h"
#include "server/name_budget.h"

namespace aesxfer::server {

using files::UniqueFd;

// A file operation that failed, with its errno (for refusal_for).
// What a refused request is told: its status and one line of text.
struct Refusal {
  proto::Status status = proto::Status::bad_path;
  std::string text;
};

// The one answer for a path that would leave the root (or passes through a symlink).
inline constexpr const char* kLeavesRoot = "leads outside the server's root or through a symbolic link";

// The one place an errno becomes a reply: "<what>: <reason>" with the matching status. ELOOP and
// EXDEV (a symlink on the way, or an escape) give kLeavesRoot.
Refusal refusal_for(const std::string& what, int err);

// A directory entry held by its directory's fd. An empty name is the directory itself (the root).
struct Place {
  UniqueFd dir;
  std::string name;
  std::string shown;  // relative to the root, for logs and replies ("." for the root)
};

// A regular file opened for reading.
struct Source {
  UniqueFd fd;
  struct stat st {};
  std::string shown;
};

class Root {
 public:
  enum class Resolver { automatic, walk };  // walk: never use openat2 (tests force the fallback)
  // Opens root; each of `hidden` ($AESXFER_HOME, an authorized_keys file kept elsewhere) is never
  // served, listed or overwritten when it lies under it. Throws Failure.
  explicit Root(const std::filesystem::path& root, const std::vector<std::filesystem::path>& hidden = {},
                Resolver r = Resolver::automatic);
  const std::filesystem::path& real() const { return real_; }
  int fd() const { return fd_.get(); }
  bool uses_openat2() const { return openat2_; }
  // True once the root directory has been removed (its link count is 0): the server still holds
  // the deleted directory, while a directory made again at the same path is another one.
  bool removed() const;
  // The hidden paths that lie under the root (serve warns at start).
  const std::vector<std::filesystem::path>& hides() const { return hidden_paths_; }

  // A request's path split into components: refused when empty, absolute, with "..", NUL, CR or
  // LF, or a component longer than NAME_MAX. "." and empty components are dropped.
  static std::optional<std::vector<std::string>> split(const std::string& req, Refusal& why);

  // True when req ends in "/" or "/.": it names a directory, which a put or probe requires to
  // exist (docs/PROTOCOL.md 3.3), where split() alone would drop the empty component.
  static bool names_directory(const std::string& req);

  // get, stat: a regular file, open for reading. /dev/zero is not handled here. When req is a
  // directory (is_directory), *dir gets it, open, unless it is the root or lies under a hidden path:
  // a stat's answer names its identity without walking the path a second time.
  std::optional<Source> open_source(const std::string& req, Refusal& why, UniqueFd* dir = nullptr) const;
  // put, probe: where the file goes (req itself, or req/basename when req is a directory). An
  // existing entry there must be a regular file. A req written as a directory ("iso/") that is
  // not one is refused (not_directory), never taken as a file name.
  // `names`: the client key's name budget (RequestContext::listing_names), charged with the
  // directories the planted-directory walk judges; an empty one refuses as busy before the walk.
  std::optional<Place> put_target(const std::string& req, const std::string& basename, Refusal& why,
                                  NameBudget* names = nullptr) const;
  // mkdir: the directory to create or reuse (req, or req/name when req is a directory and name is
  // not empty); *exists says it is there already (a directory).
  std::optional<Place> mkdir_target(const std::string& req, const std::string& name, bool* exists,
                                    Refusal& why, NameBudget* names = nullptr) const;
  // list: the directory itself, open.
  std::optional<Place> open_directory(const std::string& req, Refusal& why) const;

  // Whether a name in one directory (its path from the root, "" the root itself, as a listing
  // names it) is at or below a hidden path (a hidden file made after the start has no known inode,
  // only its name); a path split() refuses is taken as hidden. Judged by the directory's place
  // among the hidden paths, found once for a listing's top and then a component at a time
  // (child()): a listing asked it of each name with the whole path, split from the root every
  // time, 72 us a name 1,901 levels down, so that the key's name budget bounded names but not the
  // CPU (a forty-fifth re-attack, A45-2).
  struct HiddenIn {
    bool all = false;                                    // the directory is at or below a hidden path
    size_t depth = 0;                                    // the components of its path
    std::vector<const std::vector<std::string>*> below;  // the hidden paths below it
    bool hides(const std::string& name) const {
      if (all || name.empty() || name == "." || name == ".." || name.size() > NAME_MAX) return true;
      for (const auto* h : below)
        if (h->size() == depth + 1 && (*h)[depth] == name) return true;
      return false;
    }
    HiddenIn child(const std::string& name) const {
      HiddenIn c;
      c.depth = depth + 1;
      c.all = hides(name);
      if (!c.all)
        for (const auto* h : below)
          if (h->size() > depth + 1 && (*h)[depth] == name) c.below.push_back(h);
      return c;
    }
  };
  HiddenIn hidden_in(const std::string& dir_path) const;
  // True for a directory (relative to the root, as Place::shown names it) that holds a hidden path
  // somewhere below it: its mode and times are not a client's to change (mkdir -p would open the
  // directory of an --authorized-keys file, or one above $AESXFER_HOME, to other local users).
  bool holds_hidden(const std::string& path) const;
  // True for a hidden entry (listings leave it out).
  bool is_hidden(const struct stat& st) const {
    for (const auto& h : hidden_)
      if (h.exists && st.st_dev == h.dev && st.st_ino == h.ino) return true;
    return false;
  }

  // The directory of components [0, n) beneath the root (n = 0: the root), or -errno.
  int open_dir(const std::vector<std::string>& parts, size_t n) const;

 private:
  std::filesystem::path real_;
  UniqueFd fd_;
  struct stat opened_ {};                // fd_'s, once: where planted_on_way's walk up from a place stops
  mutable files::CleanWays clean_ways_;  // ...or at a directory it judged in the last second
  bool openat2_ = false;
  struct Hidden {
    bool exists;  // at the start: dev and ino are known
    dev_t dev;
    ino_t ino;
    std::vector<std::string> parts;  // its components under the root (none: the root itself)
  };
  std::vector<Hidden> hidden_;
  std::vector<std::filesystem::path> hidden_paths_;
  bool under_hidden(const std::vector<std::string>& parts) const;
  bool planted_on_way(const Place& p, const std::string& req, Refusal& why, NameBudget* names) const;
  std::optional<Place> place(const std::vector<std::string>& parts, const std::string& req,
                             Refusal& why) const;
};

// The size of the regular file `name` in dirfd, 0 for none or another kind: a put that replaces
// more than it moved is always logged (server/requests.cpp).
uint64_t content_size(int dirfd, const std::string& name);

// A file that appears at a Place only when complete: data goes to a temporary file in the same
// directory, renamed over the destination by commit(); without commit() it is removed.

class TempFile {
 public:
  explicit TempFile(const Place& dest);  // throws Failure, errno set
  ~TempFile() { discard(); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_.get(); }
  void commit(files::FileMode mode, long long mtime);  // throws Failure
  void discard() noexcept;
  // The size of the file commit() replaces (content_size), judged when asked: right before it.
  uint64_t replaced_size() const;

 private:
  UniqueFd dir_, fd_;
  std::string name_, tmp_;
};

// ".NAME.aesxfer-partial" beside a Place: kept when a resumable put breaks, renamed over the
// destination by commit(). Locked (flock) so two sessions cannot write it at once. An existing one
// that files::partial_distrust() rejects (another owner, a second link, group or other writable)
// is refused, never written.
class KeptPartial {
 public:
  // Throws Failure, errno set (EWOULDBLOCK: another session holds it); a distrusted partial file:
  // status permission, errno 0, the text names the file and the reason.
  explicit KeptPartial(const Place& dest);
  int fd() const { return fd_.get(); }
  uint64_t length() const;
  void truncate_to(uint64_t n);                        // throws Failure
  void commit(files::FileMode mode, long long mtime);  // throws Failure
  void discard() noexcept;                             // its contents are known bad

 private:
  UniqueFd dir_, fd_;
  std::string name_, partial_;
};

// The kept partial file of a Place, open for reading, or an invalid UniqueFd when there is none
// or when it is distrusted (then `distrust` says which file and why, else it is empty).
UniqueFd open_kept_partial(const Place& dest, std::string& distrust);

}  // namespace aesxfer::server
