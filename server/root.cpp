#include "server/root.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <utility>

#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/link_walk.h"
#include "files/resume.h"
#include "net/conn.h"

namespace aesxfer::server {

using proto::Failure;

using namespace aesxfer::net;    // the layers below: connections and streams,
using namespace aesxfer::files;  // files and keys
namespace fs = std::filesystem;

Refusal refusal_for(const std::string& what, int err) {
  using proto::Status;
  switch (err) {
    case ELOOP:
    case EXDEV:
      return {Status::bad_path, what + ": " + kLeavesRoot};
    case ENOENT:
      return {Status::not_found, what + ": no such file or directory"};
    case ENOTDIR:
      return {Status::not_directory, what + ": not a directory"};
    case EISDIR:
      return {Status::is_directory, what + ": is a directory"};
    case ENAMETOOLONG:
      return {Status::bad_path, what + ": name too long"};
    case EACCES:
    case EPERM:
      return {Status::permission, what + ": permission denied"};
    case ENOSPC:
    case EDQUOT:
      return {Status::no_space, what + ": no space left on device"};
    case EWOULDBLOCK:
      return {Status::busy, what + ": another transfer is writing this file"};
    default:
      return {Status::io_error, what + ": " + errno_text(err)};
  }
}

namespace {

bool bad_name(const std::string& s) {
  return s.empty() || s.find_first_of(std::string("\0\n\r", 3)) != std::string::npos;
}

// A single file name a client gives (put into a directory, mkdir -r): no '/', not "." or "..".
bool bad_leaf(const std::string& s) {
  return bad_name(s) || s == "." || s == ".." || s.find('/') != std::string::npos || s.size() > NAME_MAX;
}

std::string join(const std::vector<std::string>& parts, size_t n) {
  if (n == 0) return ".";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (i) s += '/';
    s += parts[i];
  }
  return s;
}

int dup_fd(int fd) { return ::fcntl(fd, F_DUPFD_CLOEXEC, 0); }

long sys_openat2(int dirfd, const char* path, uint64_t flags) {
  open_how how{};
  how.flags = flags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;

// Every name under which `p` may be opened: its directories resolved, then the name itself and,
// while that name is a symbolic link, the link's target, which may not exist yet (an
// --authorized-keys link to a file `authorize` makes later must hide the name the file will have,
// not only the link's). Bounded like the kernel's 40 links.
std::vector<fs::path> names_of(const fs::path& p) {
  std::vector<fs::path> out;
  files::LinkWalk walk;
  walk.on_name = [&out](const fs::path& name) { out.push_back(name); };
  files::walk_links(p, walk);  // a loop or an unreadable link ends the names, nothing more
  return out;
}

}  // namespace

Root::Root(const fs::path& root, const std::vector<fs::path>& hidden, Resolver r) {
  std::error_code ec;
  real_ = fs::canonical(root, ec);
  if (ec) throw Failure("root " + printable(root.string()) + ": " + errno_text(ec.value()));
  // Opened as typed, through links only by the kernel's rule for sticky directories (another
  // user's link in /tmp chose what `serve --root /tmp/share` served: a twenty-third re-attack, N3),
  // and the same directory as the canonical path the hidden paths are measured against.
  try {
    fd_ = files::open_guarded_dir(root);
  } catch (const Failure& f) {
    throw Failure("root " + std::string(f.what()));
  }
  if (!fd_) throw Failure("root " + printable(root.string()) + ": " + errno_text(errno));
  // Not a root another user planted, or one below it: they could rename or replace what is stored
  // and served (a fortieth re-attack, B-F4: serve --root /tmp/drop, nobody's, started without a
  // word, and a file fetched back was nobody's forgery, "verified").
  if (const std::string why = files::planted_way_text(fd_.get()); !why.empty())
    throw Failure("root " + printable(root.string()) + ": " + why);
  struct stat named {};
  if (::fstat(fd_.get(), &opened_) != 0 || ::stat(real_.c_str(), &named) != 0 ||
      opened_.st_dev != named.st_dev || opened_.st_ino != named.st_ino)
    throw Failure("root " + printable(root.string()) + ": changed while the server opened it");
  const char* off = std::getenv("AESXFER_NO_OPENAT2");
  if (r == Resolver::automatic && !(off && *off && std::string(off) != "0")) {
    const UniqueFd probe(int(sys_openat2(fd_.get(), ".", kDirFlags)));
    openat2_ = bool(probe);
  }
  for (const auto& one : hidden) {
    if (one.empty()) continue;
    bool added = false;
    for (const auto& h : names_of(one)) {
      // A path that does not exist yet (an --authorized-keys file that `authorize` makes later) is
      // hidden by its name, so that no client can create it; one that exists also by its inode.
      struct stat st {};
      const bool exists = ::stat(h.c_str(), &st) == 0;
      fs::path relp = h.lexically_relative(real_);
      Hidden entry{exists, st.st_dev, st.st_ino, {}};
      if (!relp.empty() && *relp.begin() != ".." && relp != ".") {
        for (const auto& c : relp) entry.parts.push_back(c.string());
      } else if (h != real_) {
        continue;  // outside the root: nothing to hide
      }            // else the root itself: nothing at all is served
      if (!hidden_.empty() && under_hidden(entry.parts)) continue;  // inside one hidden already
      hidden_.push_back(std::move(entry));
      added = true;
    }
    if (added) hidden_paths_.push_back(one);
  }
}

bool Root::removed() const {
  struct stat st {};
  return ::fstat(fd_.get(), &st) == 0 && st.st_nlink == 0;
}

std::optional<std::vector<std::string>> Root::split(const std::string& req, Refusal& why) {
  why.status = proto::Status::bad_path;
  if (bad_name(req)) {
    why.text = req.empty() ? "invalid path: empty" : "invalid path: a NUL, CR or LF in it";
    return std::nullopt;
  }
  if (req[0] == '/') {
    why.text = req +
               ": absolute paths are refused (paths are relative to the server's root; /dev/null and "
               "/dev/zero are the only exceptions)";
    return std::nullopt;
  }
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= req.size()) {
    size_t slash = req.find('/', start);
    if (slash == std::string::npos) slash = req.size();
    std::string c = req.substr(start, slash - start);
    start = slash + 1;
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      why.text = req + ": '..' is refused";
      return std::nullopt;
    }
    if (c.size() > NAME_MAX) {
      why.text = req + ": name too long";
      return std::nullopt;
    }
    parts.push_back(std::move(c));
  }
  return parts;
}

bool Root::names_directory(const std::string& req) {
  const size_t slash = req.rfind('/');
  return slash != std::string::npos &&
         (slash + 1 == req.size() || req.compare(slash + 1, std::string::npos, ".") == 0);
}

bool Root::under_hidden(const std::vector<std::string>& parts) const {
  for (const auto& h : hidden_)
    if (parts.size() >= h.parts.size() && std::equal(h.parts.begin(), h.parts.end(), parts.begin()))
      return true;
  return false;
}

// Takes paths the server itself made (a listing's directories), split as a request is.
Root::HiddenIn Root::hidden_in(const std::string& dir_path) const {
  HiddenIn in;
  std::vector<std::string> parts;
  if (!dir_path.empty()) {
    Refusal why;
    auto p = split(dir_path, why);
    if (!p) {
      in.all = true;
      return in;
    }
    parts = std::move(*p);
  }
  in.depth = parts.size();
  for (const auto& h : hidden_) {
    if (h.parts.size() <= parts.size()) {
      if (std::equal(h.parts.begin(), h.parts.end(), parts.begin())) in.all = true;  // at or above it
    } else if (std::equal(parts.begin(), parts.end(), h.parts.begin())) {
      in.below.push_back(&h.parts);
    }
  }
  return in;
}

bool Root::holds_hidden(const std::string& path) const {
  Refusal why;
  const auto parts = split(path, why);
  if (!parts) return true;
  for (const auto& h : hidden_)
    if (h.parts.size() > parts->size() && std::equal(parts->begin(), parts->end(), h.parts.begin()))
      return true;
  return false;
}

int Root::open_dir(const std::vector<std::string>& parts, size_t n) const {
  int fd = -1;
  if (n == 0) {
    fd = dup_fd(fd_.get());
  } else if (openat2_) {
    std::string path = join(parts, n);
    long r;
    int tries = 0;
    do r = sys_openat2(fd_.get(), path.c_str(), kDirFlags);
    while (r < 0 && errno == EAGAIN && ++tries < 8);
    fd = int(r);
  } else {
    // The fallback: one component at a time, never following a symlink (O_NOFOLLOW with
    // O_DIRECTORY reports a symlink as ENOTDIR; tell it apart so it gets kLeavesRoot).
    UniqueFd dir(dup_fd(fd_.get()));
    for (size_t i = 0; i < n && dir; ++i) {
      UniqueFd next(::openat(dir.get(), parts[i].c_str(), kDirFlags | O_NOFOLLOW));
      int e = errno;
      if (!next && e == ENOTDIR) {
        struct stat st {};
        if (::fstatat(dir.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
          e = ELOOP;
      }
      dir = std::move(next);
      errno = e;
    }
    fd = dir.release();
  }
  if (fd < 0) return -errno;
  UniqueFd dir(fd);
  struct stat st {};
  if (!hidden_.empty() && ::fstat(dir.get(), &st) == 0 && is_hidden(st)) return -EACCES;
  return dir.release();
}

std::optional<Place> Root::place(const std::vector<std::string>& parts, const std::string& req,
                                 Refusal& why) const {
  if (under_hidden(parts)) {
    why = refusal_for(req, EACCES);
    return std::nullopt;
  }
  int d = open_dir(parts, parts.size() - 1);
  if (d < 0) {
    why = refusal_for(req, -d);
    return std::nullopt;
  }
  return Place{UniqueFd(d), parts.back(), join(parts, parts.size())};
}

// False (why set) when something other than a `type` (S_IFREG or S_IFDIR) already stands at p: a
// symlink gets kLeavesRoot. *found says whether anything is there.
// The refusal names the place itself (a file sent into directory "d" as "name" is "d/name"), not
// the request's path (a fifteenth re-attack: "e5/t5/: is a directory" about a tree's file).
static bool existing_is(const Place& p, mode_t type, bool* found, Refusal& why) {
  const std::string& req = p.shown;
  struct stat st {};
  *found = ::fstatat(p.dir.get(), p.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (!*found || (st.st_mode & S_IFMT) == type) return true;
  if (S_ISLNK(st.st_mode))
    why = refusal_for(req, ELOOP);
  else if (type == S_IFDIR)
    why = {proto::Status::bad_path, req + ": exists and is not a directory"};
  else if (S_ISDIR(st.st_mode))
    why = refusal_for(req, EISDIR);
  else
    why = {proto::Status::bad_path, req + ": not a regular file"};
  return false;
}

// The refusal of a name of the shapes the server gives its own temporary and partial files, which
// its sweep removes once old and --resume takes for its own: neither a file (a thirteenth
// re-attack, H3) nor a directory (a fourteenth, J3: one blocked every later resume of its file).
static Refusal reserved_shape(const std::string& shown) {
  return {proto::Status::bad_path,
          shown + ": a name of the shape the server keeps for its own temporary and partial files " +
              files::kReservedShapes + "; rename it"};
}

// A directory on the way with a name of those shapes: a path through it is refused as the name
// itself is, so that nothing is stored or served where recv -r skips (a thirty-sixth re-attack,
// B8: a put to .dd.aesxfer-partial/x was stored and a get served it, but recv -r could never
// fetch it back). The last name is judged by each caller.
static bool reserved_on_the_way(const std::vector<std::string>& parts, Refusal& why) {
  std::string shown;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    shown += (i ? "/" : "") + parts[i];
    if (files::is_reserved_name(parts[i])) {
      why = reserved_shape(shown);
      return true;
    }
  }
  return false;
}

std::optional<Source> Root::open_source(const std::string& req, Refusal& why, UniqueFd* dir) const {
  auto parts = split(req, why);
  if (!parts || reserved_on_the_way(*parts, why)) return std::nullopt;
  if (parts->empty()) {
    why = refusal_for(req, EISDIR);
    return std::nullopt;
  }
  auto p = place(*parts, req, why);
  if (!p) return std::nullopt;
  // Not served either: no request may name one (PROTOCOL.md 3.7; a thirtieth re-attack, N1: a get
  // of one was answered, and the client's next recv of the file took it for its own partial file).
  if (files::is_reserved_name(p->name)) {
    why = reserved_shape(p->shown);
    return std::nullopt;
  }
  Source s;
  s.fd.reset(::openat(p->dir.get(), p->name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!s.fd || ::fstat(s.fd.get(), &s.st) != 0) {
    const int e = errno;
    struct stat st {};
    // A socket cannot be opened (ENXIO): "not a regular file", as a FIFO or a device is told,
    // not "no such device or address" (a twenty-first re-attack, N4).
    if (e == ENXIO && ::fstatat(p->dir.get(), p->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISSOCK(st.st_mode))
      why = {proto::Status::bad_path, req + ": not a regular file"};
    else if (e == EWOULDBLOCK)  // a read meets only another process's lease, never a transfer's
      why = {proto::Status::busy,
             req + ": it is held under a lease by another process (it may be let go soon)"};
    else
      why = refusal_for(req, e);
    return std::nullopt;
  }
  if (is_hidden(s.st)) {  // reached by another name (a case-folding file system, a hard link)
    why = refusal_for(req, EACCES);
    return std::nullopt;
  }
  if (!S_ISREG(s.st.st_mode)) {  // a FIFO or device would block or never end
    why = S_ISDIR(s.st.st_mode) ? refusal_for(req, EISDIR)
                                : Refusal{proto::Status::bad_path, req + ": not a regular file"};
    if (dir && S_ISDIR(s.st.st_mode) && !under_hidden(*parts)) *dir = std::move(s.fd);
    return std::nullopt;
  }
  if (names_directory(req)) {  // "f/" names a directory, as cp and scp say (a twelfth re-attack, G8)
    why = refusal_for(req, ENOTDIR);
    return std::nullopt;
  }
  s.shown = p->shown;
  return s;
}

// True (why set) when p's directory, or one above it below the root, is one another user planted
// in a sticky directory others can write to, who could read, rename or replace what lands below
// it: a put or a mkdir goes nowhere under it (a thirty-eighth re-attack, B-F1: send f
// host:pub/up.txt stored pub/up.txt/f in nobody's directory; a thirty-ninth, B-F5: the same
// through pub/up/f, or with a trailing "/").
// The directories judged are charged to the key's name budget: the set of those judged lately
// spares a walk only what it judged in the last second, and a client that probed the bottoms of 40
// chains 2,040 levels deep in turn, each after its second, had every walk made again: 5.4 s of
// CPU for 400 probes (a forty-sixth re-attack, A46-1).
bool Root::planted_on_way(const Place& p, const std::string& req, Refusal& why, NameBudget* names) const {
  if (names && !names->take(1)) {
    why = {proto::Status::busy,
           "server busy: this key's requests have had the server read their most names lately (serve "
           "--max-list); try again in a minute"};
    return true;
  }
  size_t judged = 0;
  const std::string text = files::planted_way_text(p.dir.get(), &opened_, &clean_ways_, &judged);
  if (names && judged > 1) names->charge(judged - 1);
  if (text.empty()) return false;
  why = {proto::Status::permission, req.substr(0, 256) + ": " + text};
  return true;
}

// A name a put or mkdir cannot take, named (raw, cut to 256 bytes: the client and the log escape
// it), not only the directory it was to go in (a twelfth re-attack, G6: "host:dd: invalid file
// name"), with the rule it breaks.
static Refusal invalid_name(const std::string& name, const char* kind) {
  return {proto::Status::bad_path, name.substr(0, 256) + ": invalid " + kind +
                                       " name (no CR, LF, NUL or /, not . or .., at most 255 bytes)"};
}

std::optional<Place> Root::put_target(const std::string& req, const std::string& basename, Refusal& why,
                                      NameBudget* names) const {
  auto parts = split(req, why);
  if (!parts || reserved_on_the_way(*parts, why)) return std::nullopt;
  std::optional<Place> p;
  int d = open_dir(*parts, parts->size());
  if (d < 0 && names_directory(req)) {  // "iso/": a directory that must exist, as cp and scp say
    why = refusal_for(req, -d == ENOENT ? ENOTDIR : -d);
    return std::nullopt;
  }
  if (d >= 0) {  // a directory: the file goes in it under the sender's name
    UniqueFd dir(d);
    if (bad_leaf(basename)) {
      why = invalid_name(basename, "file");
      return std::nullopt;
    }
    parts->push_back(basename);
    if (reserved_on_the_way(*parts, why)) return std::nullopt;  // DEST itself is on the way now
    if (under_hidden(*parts)) {
      why = refusal_for(req, EACCES);
      return std::nullopt;
    }
    p = Place{std::move(dir), basename, join(*parts, parts->size())};
  } else if (-d == ENOENT || -d == ENOTDIR) {
    if (parts->empty()) {
      why = refusal_for(req, -d);
      return std::nullopt;
    }
    p = place(*parts, req, why);
    if (!p) return std::nullopt;
  } else {
    why = refusal_for(req, -d);
    return std::nullopt;
  }
  // The shapes of the server's own temporary and partial files, which its sweep removes once they
  // are old (a thirteenth re-attack, H3: a client's file so named, stored on purpose, went with
  // the next sweep). Refused here, so nothing of a client's is ever taken for debris.
  if (files::is_reserved_name(p->name)) {
    why = reserved_shape(p->shown);
    return std::nullopt;
  }
  if (planted_on_way(*p, req, why, names)) return std::nullopt;
  bool found = false;
  if (!existing_is(*p, S_IFREG, &found, why)) return std::nullopt;
  struct stat st {};
  if (found && !hidden_.empty() && ::fstatat(p->dir.get(), p->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      is_hidden(st)) {  // a hidden file reached by another name: never overwritten
    why = refusal_for(req, EACCES);
    return std::nullopt;
  }
  return p;
}

std::optional<Place> Root::mkdir_target(const std::string& req, const std::string& name, bool* exists,
                                        Refusal& why, NameBudget* names) const {
  *exists = false;
  // The sink and the source of zeros take files only: a tree sent to /dev/null was told "absolute
  // paths are refused (... /dev/null and /dev/zero are the only exceptions)" (a fifty-sixth
  // re-attack's note), which said both.
  if (req == "/dev/null" || req == "/dev/zero") {
    why = {proto::Status::not_directory, req + ": not a directory (only a file can be sent to " + req + ")"};
    return std::nullopt;
  }
  auto parts = split(req, why);
  if (!parts || reserved_on_the_way(*parts, why)) return std::nullopt;
  if (!name.empty()) {
    // Judged only where it is used (req a directory), and named, as put_target names a file's: a
    // tree whose name held a line feed was refused as "HOST:DEST: invalid directory name" also
    // when DEST was missing and the name unused (a fifty-eighth re-attack, H58-2).
    if (const UniqueFd d(open_dir(*parts, parts->size())); d) {
      if (bad_leaf(name)) {
        why = invalid_name(name, "directory");
        return std::nullopt;
      }
      parts->push_back(name);
    }
    if (reserved_on_the_way(*parts, why)) return std::nullopt;
  }
  if (parts->empty()) {  // the root itself
    *exists = true;
    int d = open_dir(*parts, 0);
    if (d < 0) {
      why = refusal_for(req, -d);
      return std::nullopt;
    }
    return Place{UniqueFd(d), "", "."};
  }
  auto p = place(*parts, req, why);
  if (!p || planted_on_way(*p, req, why, names)) return std::nullopt;
  if (files::is_reserved_name(p->name)) {
    why = reserved_shape(p->shown);
    return std::nullopt;
  }
  if (!existing_is(*p, S_IFDIR, exists, why)) return std::nullopt;
  return p;
}

std::optional<Place> Root::open_directory(const std::string& req, Refusal& why) const {
  auto parts = split(req, why);
  if (!parts) return std::nullopt;
  if (under_hidden(*parts)) {
    why = refusal_for(req, EACCES);
    return std::nullopt;
  }
  int d = open_dir(*parts, parts->size());
  if (d < 0) {
    why = refusal_for(req, -d);
    return std::nullopt;
  }
  return Place{UniqueFd(d), "", join(*parts, parts->size())};
}

// ---- TempFile --------------------------------------------------------------------------------

TempFile::TempFile(const Place& dest) : dir_(dup_fd(dest.dir.get())), name_(dest.name) {
  if (!dir_)
    throw Failure("cannot create a temporary file: " + errno_text(errno), proto::Status::io_error, errno);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string t = files::random_temp_name(name_);
    int fd = ::openat(dir_.get(), t.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      fd_.reset(fd);
      tmp_ = t;
      // Held while a session writes it (a producer may be silent for a day): the sweeper leaves a
      // locked file, as it does a partial file being resumed (a nineteenth re-attack, N1: a live
      // send -'s temporary file was swept as expired and the whole stream lost).
      ::flock(fd, LOCK_EX | LOCK_NB);
      return;
    }
    if (errno != EEXIST) break;
  }
  int e = errno;
  throw Failure("cannot create a temporary file: " + errno_text(e), proto::Status::io_error, e);
}

namespace {
// Applies mode and mtime, closes fd and renames `from` over `to` in dir, its lock held until the
// rename is done (files::close_and_rename_locked). Throws Failure (err set).
void finish_and_rename(UniqueFd& fd, const UniqueFd& dir, const std::string& from, const std::string& to,
                       FileMode mode, long long mtime) {
  apply_mode_mtime(fd.get(), mode.resolve(dir.get(), to), mtime);
  bool closed = false;
  if (int e = files::close_and_rename_locked(fd, dir.get(), from, to, &closed); e != 0)
    throw Failure((closed ? "cannot rename into place: " : "cannot finish writing: ") + errno_text(e),
                  proto::Status::io_error, e);
}
}  // namespace

void TempFile::commit(FileMode mode, long long mtime) {
  try {
    finish_and_rename(fd_, dir_, tmp_, name_, mode, mtime);
  } catch (const Failure& f) {
    fd_.reset();
    const std::string left = files::remove_failed_temp(dir_.get(), tmp_);
    tmp_.clear();
    throw Failure(f.what() + left, f.status, f.err);
  }
  files::drop_stale_partial(dir_.get(), name_);
  tmp_.clear();
}

void TempFile::discard() noexcept {
  fd_.reset();
  if (!tmp_.empty() && dir_) ::unlinkat(dir_.get(), tmp_.c_str(), 0);
  tmp_.clear();
}

// ---- KeptPartial -----------------------------------------------------------------------------

namespace {
// Raw: the client and the log make a refusal's text printable where they show it (escaped here
// too, a name came out escaped twice: an eighth re-attack, F5).
// Why a partial file is passed over. Not "remove it": the client cannot, and another user's file in
// a sticky directory not even the server's user can (a fourteenth re-attack, H6); such a put runs
// from the start instead (server/requests.cpp, put_resumed).
std::string partial_refusal(const std::string& partial, const std::string& why) {
  return "not resuming from the partial file " + partial + ": " + why;
}
}  // namespace

// The partial file of `dest` as the client names it: relative to the root.
std::string shown_partial(const Place& dest) {
  const auto slash = dest.shown.rfind('/');
  return (slash == std::string::npos ? "" : dest.shown.substr(0, slash + 1)) + files::partial_name(dest.name);
}

KeptPartial::KeptPartial(const Place& dest)
    : dir_(dup_fd(dest.dir.get())), name_(dest.name), partial_(files::partial_name(dest.name)) {
  const std::string shown = shown_partial(dest);
  if (!dir_)
    throw Failure("cannot open the partial file: " + errno_text(errno), proto::Status::io_error, errno);
  // Locked, and still the file of that name: never one another session is renaming into place.
  files::OpenedPartial p = files::open_partial(dir_.get(), partial_, O_NONBLOCK);
  if (!p.unfit.empty()) throw Failure(partial_refusal(shown, p.unfit), proto::Status::permission, 0);
  if (p.busy) throw Failure("another transfer is writing this file", proto::Status::io_error, EWOULDBLOCK);
  if (!p.fd)
    throw Failure("cannot open the partial file: " + errno_text(p.err), proto::Status::io_error, p.err);
  fd_ = std::move(p.fd);
}

uint64_t KeptPartial::length() const {
  struct stat st {};
  ::fstat(fd_.get(), &st);
  return uint64_t(st.st_size);
}

uint64_t content_size(int dirfd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)
             ? uint64_t(st.st_size)
             : 0;
}

uint64_t TempFile::replaced_size() const { return content_size(dir_.get(), name_); }

void KeptPartial::truncate_to(uint64_t n) {
  // Not at its length already: a truncation changes the file's change time, and with it the
  // version its remembered digest is kept under (server/digests.h), so that each resumed put at
  // the same offset hashed the whole prefix again (a fiftieth re-attack, A50-1).
  struct stat st {};
  const bool same = ::fstat(fd_.get(), &st) == 0 && uint64_t(st.st_size) == n;
  if ((!same && ::ftruncate(fd_.get(), off_t(n)) != 0) || ::lseek(fd_.get(), off_t(n), SEEK_SET) < 0) {
    int e = errno;
    throw Failure("cannot prepare the partial file: " + errno_text(e), proto::Status::io_error, e);
  }
}

void KeptPartial::commit(FileMode mode, long long mtime) {
  try {
    finish_and_rename(fd_, dir_, partial_, name_, mode, mtime);
  } catch (const Failure& f) {
    // What arrived stays, whole, as the partial file (for --resume): private again (the final mode
    // was applied before the rename) and named, as a temporary file that stays is (a fifty-seventh
    // re-attack, E57-3: left 0644, which the sweep never takes, and named nowhere but the log).
    if (::fchmodat(dir_.get(), partial_.c_str(), 0600, 0) != 0) {  // best effort
    }
    throw Failure(std::string(f.what()) + "; what arrived stays as its partial file " + printable(partial_),
                  f.status, f.err);
  }
}

void KeptPartial::discard() noexcept {
  if (fd_) ::unlinkat(dir_.get(), partial_.c_str(), 0);  // while locked: nobody else's file yet
  fd_.reset();
}

UniqueFd open_kept_partial(const Place& dest, std::string& distrust) {
  distrust.clear();
  const std::string name = files::partial_name(dest.name);
  UniqueFd fd(::openat(dest.dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (std::string why = files::partial_unfit(dest.dir.get(), name, fd.get(), errno); !why.empty()) {
    distrust = partial_refusal(shown_partial(dest), why);
    fd.reset();
  }
  return fd;
}

}  // namespace aesxfer::server
