#include "server/dir_pins.h"

#include <cstring>

#include "crypto/sha256.h"

namespace aesxfer::server {

DirPins::Key DirPins::key(const std::string& shown) {
  uint8_t d[crypto::Sha256::kDigestLen];
  crypto::Sha256::digest(shown.data(), shown.size(), d);
  Key k{};
  std::memcpy(k.data(), d, k.size());
  return k;
}

void DirPins::pin(const std::string& shown, const struct stat& st) {
  const Key k = key(shown);
  const auto [it, added] = pins_.insert_or_assign(k, std::make_pair(st.st_dev, st.st_ino));
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
  struct stat st {};
  return ::fstat(dirfd, &st) == 0 && st.st_dev == it->second.first && st.st_ino == it->second.second;
}

}  // namespace aesxfer::server
