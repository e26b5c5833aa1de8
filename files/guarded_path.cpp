#include "files/guarded_path.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "files/io.h"
#include "proto/failure.h"

namespace fs = std::filesystem;

namespace aesxfer::files {
using proto::Failure;

std::string planted_by(uid_t owner, const struct stat& dir) {
  // Writable by others or by its group (a team's drop directory, or any ACL entry, which shows as
  // the group bits): the kernel's fs.protected_fifos and protected_regular at 2 judge both, and a
  // group member planted what a world-writable one would have refused (a fortieth re-attack, B-F3).
  if (owner == ::geteuid() || !(dir.st_mode & S_ISVTX) || !(dir.st_mode & (S_IWOTH | S_IWGRP)) ||
      dir.st_uid == owner)
    return "";
  return "owned by uid " + std::to_string(owner) + " in a sticky directory others can write to";
}

namespace {
std::string planted_directory(const struct stat& dir, const struct stat& parent) {
  if (!S_ISDIR(dir.st_mode)) return "";
  const std::string who = planted_by(dir.st_uid, parent);
  return who.empty() ? "" : "a directory " + who;
}
}  // namespace

std::string planted_dir(int dir_fd) {
  struct stat dir {
  }, parent{};
  if (::fstat(dir_fd, &dir) != 0 || ::fstatat(dir_fd, "..", &parent, 0) != 0) return "";
  return planted_directory(dir, parent);
}

bool walk_up(int dir_fd,
             const std::function<bool(const struct stat& dir, const struct stat& parent)>& visit) {
  UniqueFd up;
  int cur = dir_fd;
  for (int level = 0; level < 4096; ++level) {
    struct stat dir {
    }, parent{};
    if (::fstat(cur, &dir) != 0 || ::fstatat(cur, "..", &parent, 0) != 0) return false;
    if (visit(dir, parent)) return true;
    if (dir.st_dev == parent.st_dev && dir.st_ino == parent.st_ino) return false;  // "/"
    UniqueFd next(::openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!next) return false;
    up = std::move(next);
    cur = up.get();
  }
  return false;
}

bool CleanWays::known(const struct stat& dir) const {
  const std::lock_guard<std::mutex> lock(mu_);
  const auto it = seen_.find({dir.st_dev, dir.st_ino});
  return it != seen_.end() && it->second.ctime.tv_sec == dir.st_ctim.tv_sec &&
         it->second.ctime.tv_nsec == dir.st_ctim.tv_nsec &&
         std::chrono::steady_clock::now() - it->second.at < ttl_;
}

void CleanWays::add(const std::vector<struct stat>& dirs) {
  const auto now = std::chrono::steady_clock::now();
  const std::lock_guard<std::mutex> lock(mu_);
  if (seen_.size() + dirs.size() > max_) seen_.clear();
  for (const auto& d : dirs) seen_[{d.st_dev, d.st_ino}] = Seen{d.st_ctim, now};
}

namespace {
// planted_dir() of dir_fd and of each directory above it, up to "/" or `top`, or to one `clean`
// knows: who planted one.
std::string planted_on_way(int dir_fd, const struct stat* top, CleanWays* clean, size_t* count) {
  std::string who;
  std::vector<struct stat> judged;
  const bool ended = walk_up(dir_fd, [&](const struct stat& dir, const struct stat& parent) {
    if ((top && dir.st_dev == top->st_dev && dir.st_ino == top->st_ino) ||
        (dir.st_dev == parent.st_dev && dir.st_ino == parent.st_ino) || (clean && clean->known(dir)))
      return true;  // the server's root, "/", or a directory judged with its way lately: not judged
    who = planted_directory(dir, parent);
    if (count) ++*count;
    if (clean && who.empty()) judged.push_back(dir);
    return !who.empty();
  });
  if (clean && ended && who.empty()) clean->add(judged);  // judged to its end, and clean
  return who;
}
}  // namespace

std::string planted_dir_at(int parent_fd, const std::string& name) {
  struct stat dir {
  }, parent{};
  if (name.empty() || name == "." || ::fstatat(parent_fd, name.c_str(), &dir, AT_SYMLINK_NOFOLLOW) != 0 ||
      ::fstat(parent_fd, &parent) != 0)
    return "";
  return planted_directory(dir, parent);
}

std::string foreign_link(const struct stat& link, const struct stat& target) {
  if (link.st_uid == ::geteuid() || link.st_uid == 0 || link.st_uid == target.st_uid) return "";
  return "a symbolic link of uid " + std::to_string(link.st_uid) + " to a file of uid " +
         std::to_string(target.st_uid) + ", which that user does not own: not followed";
}

std::string unreplaceable(int dirfd, const std::string& name) {
  struct stat st {
  }, dir{};
  const uid_t me = ::geteuid();
  if (me == 0 || ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid == me ||
      ::fstat(dirfd, &dir) != 0 || !(dir.st_mode & S_ISVTX) || dir.st_uid == me)
    return "";
  return "owned by uid " + std::to_string(st.st_uid) +
         " in a sticky directory: only its owner may replace it (aesxfer writes a new file and renames "
         "it into place)";
}

namespace {

constexpr int kMaxLinks = 40;  // as the kernel's MAXSYMLINKS

// Components of p, the next one last.
void push_parts(std::vector<std::string>& todo, const fs::path& p) {
  std::vector<std::string> parts;
  for (const auto& c : p.relative_path()) parts.push_back(c.string());
  todo.insert(todo.end(), parts.rbegin(), parts.rend());
}

bool on_procfs(int fd) {
  struct statfs sf {};
  return ::fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
}

// A link's target, read from its O_PATH descriptor (the link examined, not one put in its place).
std::string link_target(int link_fd) {
  std::string buf(4096, '\0');
  const ssize_t n = ::readlinkat(link_fd, "", buf.data(), buf.size());
  if (n < 0 || size_t(n) >= buf.size()) return {};
  buf.resize(size_t(n));
  return buf;
}

// A directory reached as O_PATH, opened for reading when this user may read it; else the O_PATH
// descriptor itself, which every *at call takes (a directory one may search and not list: a
// server run as another user, under a root-owned 0711 directory).
UniqueFd reopen_dir(UniqueFd& path_fd) {
  UniqueFd d(::openat(path_fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d && errno == EACCES) return std::move(path_fd);
  return d;
}

// Only "" and "." left: the path ends in "/" or "/." after the component just taken.
bool only_dots(const std::vector<std::string>& todo) {
  for (const auto& c : todo)
    if (!c.empty() && c != ".") return false;
  return true;
}

}  // namespace

GuardedEntry resolve_guarded(const fs::path& path) {
  std::error_code ec;
  return resolve_guarded_at(AT_FDCWD, path.is_absolute() ? fs::path("/") : fs::current_path(ec), path);
}

GuardedEntry resolve_guarded_at(int dirfd, const fs::path& where, const fs::path& path) {
  const std::string shown =
      proto::printable((dirfd == AT_FDCWD || path.is_absolute() ? path : where / path).string());
  const auto fail = [&](const std::string& why) { return Failure(shown + ": " + why); };
  std::vector<std::string> todo;
  push_parts(todo, path);
  UniqueFd cur(path.is_absolute() ? ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)
                                  : ::openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!cur) throw fail(errno_text(errno));
  fs::path at = path.is_absolute() ? fs::path("/") : where;  // cur's path, for messages
  bool followed = false, proc_way = false;
  std::vector<uid_t> owners;
  const auto entry = [&](UniqueFd dir, const std::string& name, bool magic) {
    if (!dir) throw fail(errno_text(errno));
    return GuardedEntry{std::move(dir), name,    magic, followed, false, name == "." ? at : at / name,
                        owners,         proc_way};
  };
  // A path ending in "/" has an empty last component (std::filesystem): the one before it must
  // be a directory, and the walk ends in it, as with a trailing ".".
  for (int links = 0; !todo.empty();) {
    const std::string c = todo.back();
    todo.pop_back();
    const bool last = todo.empty();
    if (c.empty() || c == ".") continue;
    UniqueFd e(::openat(cur.get(), c.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!e) {
      // Missing, as the last component or the last before a trailing "/": created by the caller.
      if ((last || only_dots(todo)) && errno == ENOENT) {
        const bool proc = on_procfs(cur.get());  // /proc/self/fd/7 with 7 closed: still a descriptor's name
        GuardedEntry g = entry(reopen_dir(cur), c, proc);
        g.dir_form = !last;  // "missing/": a directory to make, never a file of that name
        return g;
      }
      throw fail(errno_text(errno));
    }
    struct stat st {
    }, ds{};
    if (::fstat(e.get(), &st) != 0 || ::fstat(cur.get(), &ds) != 0) throw fail(errno_text(errno));
    if (S_ISLNK(st.st_mode)) {
      if (on_procfs(cur.get())) {  // /proc/self/fd/N: only the kernel can follow it
        if (last) return entry(reopen_dir(cur), c, true);
        UniqueFd through(::openat(cur.get(), c.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!through) throw fail(errno_text(errno));
        proc_way = true;
        cur = std::move(through);
        at /= c;
        continue;
      }
      if (std::string why = planted_by(st.st_uid, ds); !why.empty())
        throw Failure(proto::printable((at / c).string()) + ": a symbolic link " + why +
                      " (not followed, as fs.protected_symlinks refuses it)");
      if (st.st_uid != ::geteuid() && st.st_uid != 0) owners.push_back(st.st_uid);
      if (++links > kMaxLinks) throw fail("too many levels of symbolic links");
      const std::string target = link_target(e.get());
      if (target.empty()) throw fail("cannot read a symbolic link on the way");
      followed = true;
      if (target[0] == '/') {
        cur.reset(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!cur) throw fail(errno_text(errno));
        at = "/";
      }
      push_parts(todo, fs::path(target));  // on top of the rest: the target's last part is last
      continue;
    }
    if (last) return entry(reopen_dir(cur), c, false);
    if (!S_ISDIR(st.st_mode)) throw fail(errno_text(ENOTDIR));
    cur = std::move(e);
    at = c == ".." ? at.parent_path() : at / c;
  }
  return entry(reopen_dir(cur), ".", false);
}

std::string foreign_reach(const GuardedEntry& g) {
  if (g.link_owners.empty() || !g.dir) return "";
  // A /proc link (a descriptor or the directory of a process) is not judged by its owner, which is
  // the process's, but opens what that process holds, as this user: never through another user's
  // link (a thirty-ninth re-attack, A-F1: nobody's link to /proc/PID/fd/N of its own process,
  // holding root's private directory by O_PATH, had send -r upload it and recv -r write into it).
  if (g.magic || g.through_proc)
    return "reached through a symbolic link of uid " + std::to_string(g.link_owners.front()) +
           " to a link of /proc (what another process holds): not followed";
  struct stat st {};
  if (g.name == "." || ::fstatat(g.dir.get(), g.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    if (::fstat(g.dir.get(), &st) != 0) return "";
  for (const uid_t owner : g.link_owners)
    if (owner != st.st_uid)
      return "reached through a symbolic link of uid " + std::to_string(owner) + " to what uid " +
             std::to_string(st.st_uid) + " owns: not followed";
  return "";
}

UniqueFd open_guarded_dir(const fs::path& path) {
  GuardedEntry g = resolve_guarded(path);
  if (!g.dir) return {};
  if (const std::string why = foreign_reach(g); !why.empty())
    throw Failure(proto::printable(path.string()) + ": " + why);
  if (g.name == ".") return std::move(g.dir);
  if (g.magic) return UniqueFd(::openat(g.dir.get(), g.name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return UniqueFd(::openat(g.dir.get(), g.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

UniqueFd open_guarded_parent(const fs::path& file) {
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  UniqueFd d = open_guarded_dir(dir);
  if (!d) throw Failure(proto::printable(dir.string()) + ": " + errno_text(errno));
  // Nothing made in or below a directory another user planted, who could rename or replace it: a
  // port file swapped for another port sent clients to their server (a fortieth re-attack, A-F4,
  // B-F5).
  if (const std::string why = planted_way_text(d.get()); !why.empty())
    throw Failure(proto::printable(dir.string()) + ": " + why);
  return d;
}

std::string planted_way_text(int dir_fd, const struct stat* top, CleanWays* clean, size_t* judged) {
  const std::string who = planted_on_way(dir_fd, top, clean, judged);
  return who.empty() ? "" : who + " is on its way: nothing is written into or below it";
}

TrustedText read_trusted_text(const fs::path& path, size_t max_bytes) {
  TrustedText t;
  UniqueFd fd;
  try {
    const GuardedEntry g = resolve_guarded(path);
    if (const std::string why = foreign_reach(g); !why.empty()) {
      t.problem = TrustedText::Problem::unreachable;
      t.detail = proto::printable(path.string()) + ": " + why;
      return t;
    }
    fd.reset(::openat(g.dir.get(), g.name.c_str(),
                      O_RDONLY | O_CLOEXEC | O_NONBLOCK | (g.magic ? 0 : O_NOFOLLOW)));
  } catch (const Failure& f) {
    t.problem = TrustedText::Problem::unreachable;
    t.detail = f.what();
    return t;
  }
  using P = TrustedText::Problem;
  if (!fd || ::fstat(fd.get(), &t.st) != 0) {
    t.problem = P::missing;
    t.error = errno;
    t.detail = errno_text(t.error);
    return t;
  }
  t.problem = !S_ISREG(t.st.st_mode)                          ? P::not_regular
              : t.st.st_uid != 0 && t.st.st_uid != ::getuid() ? P::owner
              : (t.st.st_mode & 022)                          ? P::writable
              : uint64_t(t.st.st_size) > max_bytes            ? P::too_large
                                                              : P::none;
  if (t.problem != P::none) return t;
  if (const int e = read_small_file(fd.get(), t.text, max_bytes); e != 0) {
    t.problem = P::missing;
    t.error = e;
    t.detail = errno_text(e);
  } else if (t.text.size() > max_bytes) {  // grew since its fstat
    t.problem = P::too_large;
  }
  return t;
}

}  // namespace aesxfer::files
