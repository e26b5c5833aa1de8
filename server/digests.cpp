#include "server/digests.h"

#include "files/resume.h"

namespace aesxfer::server {

PrefixDigests::Key PrefixDigests::key_of(const struct stat& st, uint64_t len) {
  return Key{uint64_t(st.st_dev),         uint64_t(st.st_ino),
             uint64_t(st.st_size),        int64_t(st.st_mtim.tv_sec),
             int64_t(st.st_mtim.tv_nsec), int64_t(st.st_ctim.tv_sec),
             int64_t(st.st_ctim.tv_nsec), len};
}

std::optional<files::PrefixScan> PrefixDigests::remembered(const struct stat& st, uint64_t len) const {
  if (auto it = memo_.find(key_of(st, len)); it != memo_.end()) return it->second;
  return std::nullopt;
}

std::optional<files::PrefixScan> PrefixDigests::get(const proto::SessionKeys& keys, int fd,
                                                    const struct stat& st, uint64_t len) {
  const Key k = key_of(st, len);
  if (auto it = memo_.find(k); it != memo_.end()) {
    ++hits_;
    return it->second;
  }
  if (len > left_) return std::nullopt;
  left_ -= len;  // charged before the read: a file that fails half way still cost it
  hashed_ += len;
  // One pass gives the digest and the file checksum's state after the prefix, which a resumed
  // get starts from: the prefix is read once per session, never a second time to checksum it.
  files::PrefixScan scan = files::scan_prefix(keys, fd, len, -1, nullptr);
  if (memo_.size() >= kMemo) memo_.erase(memo_.begin());
  memo_.emplace(k, scan);
  return scan;
}

}  // namespace aesxfer::server
