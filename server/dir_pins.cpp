#include "server/dir_pins.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace aesxfer::server {

DirMark DirMark::of(int fd) {
  DirMark m;
  struct statx sx {};
  m.read = ::statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_INO | STATX_UID | STATX_BTIME, &sx) == 0;
  if (!m.read) return m;
  m.is_dir = S_ISDIR(sx.stx_mode);
  m.dev = (uint64_t(sx.stx_dev_major) << 32) | sx.stx_dev_minor;
  m.ino = sx.stx_ino;
  m.uid = sx.stx_uid;
  m.has_btime = sx.stx_mask & STATX_BTIME;
  if (m.has_btime) {
    m.btime_sec = sx.stx_btime.tv_sec;
    m.btime_nsec = sx.stx_btime.tv_nsec;
  } else if (long generation = 0; ::ioctl(fd, FS_IOC_GETVERSION, &generation) == 0) {
    m.generation = uint32_t(generation);  // the kernel writes an int
  }
  return m;
}

void DirPins::pin(const std::string& shown, const DirMark& mark) {
  const Key k = path_key(shown);
  const auto [it, added] = pins_.insert_or_assign(k, mark);
  (void)it;
  at_.insert_or_assign({mark.dev, mark.ino}, k);
  if (!added) return;
  order_.push_back(k);
  if (order_.size() > kMaxPins) {
    const auto gone = pins_.find(order_.front());
    if (gone != pins_.end()) {
      const auto where = at_.find({gone->second.dev, gone->second.ino});
      if (where != at_.end() && where->second == gone->first) at_.erase(where);
      pins_.erase(gone);
    }
    order_.pop_front();
  }
}

bool DirPins::pinned_elsewhere(const std::string& shown, const DirMark& mark) const {
  const auto it = at_.find({mark.dev, mark.ino});
  if (it == at_.end() || it->second == path_key(shown)) return false;
  const auto pin = pins_.find(it->second);
  return pin != pins_.end() && pin->second == mark;
}

void DirPins::refuse_below(const std::string& shown) {
  refused_.push_back(shown);
  if (refused_.size() > kMaxRefused) refused_.pop_front();
}

bool DirPins::refused(const std::string& shown) const {
  for (const auto& r : refused_)
    if (shown.size() >= r.size() && shown.compare(0, r.size(), r) == 0 &&
        (shown.size() == r.size() || shown[r.size()] == '/'))
      return true;
  return false;
}

bool DirPins::holds(const std::string& shown, int dirfd) const {
  if (refused(shown)) return false;
  if (pins_.empty()) return true;  // no mkdir yet: nothing to hash or read
  const auto it = pins_.find(path_key(shown));
  if (it == pins_.end()) return true;
  const DirMark m = DirMark::of(dirfd);
  return m.read && m == it->second;
}

bool DirPins::holds(const std::string& shown, const DirMark& mark) const {
  if (refused(shown)) return false;
  if (pins_.empty()) return true;
  const auto it = pins_.find(path_key(shown));
  return it == pins_.end() || (mark.read && mark == it->second);
}

bool freshly_made_dir(int fd, const timespec& before) {
  // Emptiness is read from the directory itself, not from its link count: btrfs gives every
  // directory one link, and every directory it made was refused (a sixty-first re-attack, Q61-1).
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_BTIME, &sx) != 0) return false;
  // Born no earlier than the mkdir (a second's slack: the kernel's clock for it is coarse).
  if ((sx.stx_mask & STATX_BTIME) && sx.stx_btime.tv_sec < before.tv_sec - 1) return false;
  alignas(8) char buf[1024];
  const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
  ::lseek(fd, 0, SEEK_SET);
  if (n < 0) return false;
  for (long at = 0; at < n;) {
    const auto* e = reinterpret_cast<const struct dirent64*>(buf + at);
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) return false;
    at += e->d_reclen;
  }
  return true;
}

bool DirPins::pinned(const std::string& shown, const DirMark& mark) const {
  const auto it = pins_.find(path_key(shown));
  return it != pins_.end() && mark == it->second;
}

}  // namespace aesxfer::server
