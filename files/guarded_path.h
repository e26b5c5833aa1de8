// A local path resolved the way the kernel resolves it, one component at a time from descriptors,
// but following a symbolic link only by the kernel's rule for fs.protected_symlinks, whatever the
// sysctl says: in a sticky directory anyone may write to (/tmp), only a link of this user's or of
// the directory owner's is followed. The client writes its destinations through it (a link
// another user planted in /tmp chose where a recv wrote: a twenty-second re-attack, N1), and the
// server opens its --root through it (a twenty-third, N3). Each link is judged on the descriptor
// it was opened as (O_PATH | O_NOFOLLOW, then read by descriptor), so swapping names between the
// check and the use gains nothing (a twenty-third re-attack, N2, won that race against a check
// made on path strings).
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "files/unique_fd.h"

struct stat;

namespace aesxfer::files {

// Why `owner`'s entry in the directory whose fstat is `dir` may not be followed or written
// through, or "" when it may: this user's entries and the directory owner's count; in any
// directory that is not both sticky and writable by others or by its group (or an ACL entry),
// everything does.
std::string planted_by(uid_t owner, const struct stat& dir);
// A directory judged by planted_by() against the directory that holds it: "a directory owned by
// uid N in a sticky directory others can write to", when another user planted it there (a tree
// or a file written into it would be theirs to read, rename or replace), or "". planted_dir takes
// the directory open (its holder is its ".."), planted_dir_at its `name` in parent_fd (nothing
// there, or no directory: "").
std::string planted_dir(int dir_fd);
std::string planted_dir_at(int parent_fd, const std::string& name);
// Calls visit(dir, parent) with the fstat of `dir_fd` and of each directory above it and their
// parents', walked by "..", which no link can redirect, up to and with "/" (whose parent is itself)
// and at most 4096 levels; stops when visit returns true, and returns whether it did.
bool walk_up(int dir_fd, const std::function<bool(const struct stat& dir, const struct stat& parent)>& visit);
// planted_dir() of `dir_fd` and of each directory above it, up to the file system's "/" or up to
// `top` (its device and inode; not judged itself: the server's root), as a refusal in words ("a
// directory owned by uid N ... is on its way: nothing is written into or below it"), or "":
// nothing is written into or below a directory another user planted, wherever it is on the way (a
// thirty-ninth re-attack, B-F5: recv -r host:tree /tmp/backup/today wrote into nobody's
// /tmp/backup, which the check of the last name alone never saw).
class CleanWays;
// `judged`, when given, gets the number of directories the walk judged (those `clean` knew not
// counted): what a server charges to the client key's name budget.
std::string planted_way_text(int dir_fd, const struct stat* top = nullptr, CleanWays* clean = nullptr,
                             size_t* judged = nullptr);

// Directories whose way up planted_way_text() lately found clean, for a server that judges many
// requests: a walk that meets one (its device, inode and change time as when judged, less than
// `ttl` ago) stops there. A probe, mkdir or put 2,043 levels below the root walked them all, ~6,000
// system calls and 12 ms of the server's CPU for a 4 KB request, with no budget (a forty-fifth
// re-attack, A45-1); now the walk stops at the first directory judged in the last second. So what
// changes on the way above a directory so judged (a directory planted there, or one that turned
// sticky) is seen within `ttl`, as a check made `ttl` earlier would have missed it; the directory
// itself is judged again as soon as its change time moved (a rename moves it). Directories found
// planted are never kept. At most `max` directories are kept; a full set starts again empty. Safe
// for concurrent sessions.
class CleanWays {
 public:
  explicit CleanWays(std::chrono::milliseconds ttl = std::chrono::milliseconds(1000), size_t max = 65536)
      : ttl_(ttl), max_(max) {}
  bool known(const struct stat& dir) const;
  void add(const std::vector<struct stat>& dirs);

 private:
  struct Seen {
    struct timespec ctime;
    std::chrono::steady_clock::time_point at;
  };
  const std::chrono::milliseconds ttl_;
  const size_t max_;
  mutable std::mutex mu_;
  std::map<std::pair<dev_t, ino_t>, Seen> seen_;
};

// Why a symbolic link `link` (its lstat) inside a tree that send -r reads may not be followed to
// `target` (the fstat of what it leads to), or "": a link of another user than this one or root to
// a file that user does not own. Whoever can write in a tree could otherwise plant a link there to
// a file of the user who sends it (a thirty-seventh re-attack, A8: root's send -r of a tree nobody
// could write to uploaded root's 0600 file through nobody's link, exit 0). The kernel's
// fs.protected_symlinks judges links this way only in sticky directories.
std::string foreign_link(const struct stat& link, const struct stat& target);

// Why `name` in dirfd, an existing entry of another user's in a sticky directory that is not this
// user's, cannot be replaced by a rename (the sticky bit lets only the entry's or the directory's
// owner, or a process with CAP_FOWNER, here taken to be root, remove or rename over it), or "".
// Checked before a transfer whose end is that rename (a twenty-ninth re-attack, N4: the whole file
// came, then "operation not permitted").
std::string unreplaceable(int dirfd, const std::string& name);

// The directory that holds the last component of `path` and that component's name. Every link on
// the way, the last component's too, is followed (a link to a file: the file it names), each only
// when planted_by() accepts it; at most 40. The last name is never a link, except a /proc magic
// link (/proc/self/fd/N), for which `magic` is set: the kernel opens it. A path that ends in "/"
// or names "." has name "." (dir is that directory itself). A missing last component is returned
// as it is; a missing directory on the way, a link refused, or too many links throw Failure with
// `path` named printable. dir is open O_RDONLY | O_DIRECTORY.
struct GuardedEntry {
  UniqueFd dir;
  std::string name;
  bool magic = false;
  bool followed = false;       // a link was followed on the way (the entry is not where typed)
  bool dir_form = false;       // missing, and named with a trailing "/" (by the path or a link)
  std::filesystem::path path;  // where the entry is, absolute, for messages
  // The owners of the links followed on the way that are neither this user nor root: what the
  // walk reached must be theirs (foreign_reach).
  std::vector<uid_t> link_owners;
  bool through_proc = false;  // a /proc link (a process's descriptor or directory) was passed through
};
// Why what `g` reached (its entry, or its directory when the entry is missing or ".") may not be
// used: a link of another user than this one and root led there, to something that user does not
// own (files::foreign_link's rule for the path the user typed, any directory, not only sticky
// ones: a thirty-eighth re-attack, A-F1 and A-F2: nobody's link in nobody's own directory sent
// root's private files, and a download replaced root's file through one). "" when it may.
std::string foreign_reach(const GuardedEntry& g);
GuardedEntry resolve_guarded(const std::filesystem::path& path);
// The same walk begun in dirfd, whose path is `where` (for messages), for a relative `path`: an
// entry of a tree the client sends, each link on its way judged as above, not only its own (a
// thirty-fourth re-attack, A-N2: the user's link in the tree to another user's link in /tmp was
// followed whole by the kernel).
GuardedEntry resolve_guarded_at(int dirfd, const std::filesystem::path& where,
                                const std::filesystem::path& path);

// The directory `path` names, opened through resolve_guarded (O_RDONLY | O_DIRECTORY), or an
// invalid descriptor with errno set when it is not there or not a directory. Throws Failure as
// resolve_guarded does for a refused link.
UniqueFd open_guarded_dir(const std::filesystem::path& path);
// The directory that holds `file` ("." when the path names none), opened as open_guarded_dir()
// does: where a file the user names (a key log, a port file, a chart) is then made with openat.
// Throws Failure "DIR: why" when it cannot be opened, or when it is or lies below a directory
// another user planted (planted_way_text).
UniqueFd open_guarded_parent(const std::filesystem::path& file);

// A small file whose words aesxfer acts on (a client's config, a key file to authorize), read
// whole: reached by resolve_guarded's walk and foreign_reach's rule, its last component opened
// without following a link, a regular file of this user's or root's that group and others cannot
// write (the link, owner and mode rules ssh applies to its config), of at most `max_bytes`. Each
// caller words the refusal: `problem` says which rule failed.
struct TrustedText {
  enum class Problem { none, missing, unreachable, not_regular, owner, writable, too_large };
  Problem problem = Problem::none;
  std::string text;    // none: the file's bytes
  std::string detail;  // missing, unreachable: why (errno's words, or the walk's with the path)
  int error = 0;       // missing: errno (ENOENT when there is no such file)
  struct stat st {};   // not_regular, owner, writable, too_large: the file's
};
TrustedText read_trusted_text(const std::filesystem::path& path, size_t max_bytes);

}  // namespace aesxfer::files
