#include "server/dir_pins.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <cstring>

#include "crypto/sha256.h"

namespace aesxfer::server {

DirMark DirMark::of(int fd, bool* ok) {
  DirMark m;
  struct statx sx {};
  const bool read = ::statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_UID | STATX_BTIME, &sx) == 0;
  if (ok) *ok = read;
  if (!read) return m;
  m.dev = (uint64_t(sx.stx_dev_major) << 32) | sx.stx_dev_minor;
  m.ino = sx.stx_ino;
  m.uid = sx.stx_uid;
  if (sx.stx_mask & STATX_BTIME) {
    m.btime_sec = sx.stx_btime.tv_sec;
    m.btime_nsec = sx.stx_btime.tv_nsec;
  } else if (long generation = 0; ::ioctl(fd, FS_IOC_GETVERSION, &generation) == 0) {
    m.generation = uint32_t(generation);  // the kernel writes an int
  }
  return m;
}

DirPins::Key DirPins::key(const std::string& shown) {
  uint8_t d[crypto::Sha256::kDigestLen];
  crypto::Sha256::digest(shown.data(), shown.size(), d);
  Key k{};
  std::memcpy(k.data(), d, k.size());
  return k;
}

void DirPins::pin(const std::string& shown, int fd) {
  const Key k = key(shown);
  const auto [it, added] = pins_.insert_or_assign(k, DirMark::of(fd));
  (void)it;
  if (!added) return;
  order_.push_back(k);
  if (order_.size() > kMaxPins) {
    pins_.erase(order_.front());
    order_.pop_front();
  }
}

bool DirPins::holds(const std::string& shown, int dirfd) const {
  const auto it = pins_.find(key(shown));
  if (it == pins_.end()) return true;
  bool ok = false;
  const DirMark now = DirMark::of(dirfd, &ok);
  return ok && now == it->second;
}

}  // namespace aesxfer::server
