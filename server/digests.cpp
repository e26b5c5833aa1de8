#include "server/digests.h"

#include "files/resume.h"

namespace aesxfer::server {

PrefixDigests::Key PrefixDigests::key_of(const struct stat& st, uint64_t len) {
  return Key{files::FileVersion::of(st), len};
}

std::optional<files::PrefixScan> PrefixDigests::remembered(const struct stat& st, uint64_t len) const {
  const Key k = key_of(st, len);
  const auto m = macs_.find(k);
  const auto c = sums_.find(k);
  if (m == macs_.end() || c == sums_.end()) return std::nullopt;
  return files::PrefixScan{m->second, c->second};
}

std::optional<files::PrefixScan> PrefixDigests::get(const proto::SessionKeys& keys, int fd,
                                                    const struct stat& st, uint64_t len, bool need_sum) {
  const Key k = key_of(st, len);
  if (auto m = macs_.find(k); m != macs_.end()) {
    const auto c = sums_.find(k);
    if (!need_sum || c != sums_.end()) {
      ++hits_;
      return files::PrefixScan{m->second, c != sums_.end() ? c->second : crypto::FileChecksum(keys.checksum)};
    }
  }  // a state given way: scanned again, within the budget like any other scan
  if (len > left_) return std::nullopt;
  key_spent_ = key_ && !key_->take(len);
  if (key_spent_) return std::nullopt;
  left_ -= len;  // charged before the read: a file that fails half way still cost it
  hashed_ += len;
  // One pass gives the digest and the file checksum's state after the prefix, which a resumed
  // get starts from: the prefix is read once per session, never a second time to checksum it.
  files::PrefixScan scan = files::scan_prefix(keys, fd, len, -1, nullptr);
  keep(k, scan);
  return scan;
}

void PrefixDigests::remember(const struct stat& st, uint64_t len, const files::PrefixScan& scan) {
  keep(key_of(st, len), scan);
}

void PrefixDigests::keep(const Key& k, const files::PrefixScan& scan) {
  if (!macs_.count(k)) {
    if (macs_.size() >= kMemo) {
      macs_.erase(mac_order_.front());
      mac_order_.pop_front();
    }
    mac_order_.push_back(k);
  }
  macs_[k] = scan.mac;
  if (!sums_.count(k)) {
    if (sums_.size() >= kSums) {
      sums_.erase(sum_order_.front());
      sum_order_.pop_front();
    }
    sum_order_.push_back(k);
  }
  sums_.insert_or_assign(k, scan.sum);
}

}  // namespace aesxfer::server
