#include "server/digests.h"

#include "files/resume.h"

namespace aesxfer::server {

std::optional<std::string> PrefixDigests::get(const proto::SessionKeys& keys, int fd, const struct stat& st,
                                              uint64_t len) {
  const Key k{uint64_t(st.st_dev),         uint64_t(st.st_ino),
              uint64_t(st.st_size),        int64_t(st.st_mtim.tv_sec),
              int64_t(st.st_mtim.tv_nsec), int64_t(st.st_ctim.tv_sec),
              int64_t(st.st_ctim.tv_nsec), len};
  if (auto it = memo_.find(k); it != memo_.end()) {
    ++hits_;
    return it->second;
  }
  if (len > left_) return std::nullopt;
  left_ -= len;  // charged before the read: a file that fails half way still cost it
  hashed_ += len;
  std::string mac = files::prefix_mac(keys, fd, len);
  if (memo_.size() >= kMemo) memo_.erase(memo_.begin());
  memo_.emplace(k, mac);
  return mac;
}

}  // namespace aesxfer::server
