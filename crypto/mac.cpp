#include "crypto/mac.h"

namespace aesxfer::crypto {
namespace {

class HmacSha256Mac final : public Mac {
 public:
  HmacSha256Mac(const uint8_t* key, size_t key_len, const Dispatch& d) noexcept
      : h_(key, key_len, d.sha256), sha_(d.sha256), mb_(d.sha256_mb) {}

  size_t tag_len() const noexcept override { return HmacSha256::kTagLen; }
  size_t batch() const noexcept override { return 16; }
  const char* impl() const noexcept override { return sha256_impl_name(sha_); }

  void mac(const MacJob& j) noexcept override {
    h_.begin();
    if (j.len1) h_.update(j.p1, j.len1);
    if (j.len2) h_.update(j.p2, j.len2);
    h_.finish(j.tag);
  }

  void mac_many(MacJob* jobs, size_t n) noexcept override { hmac_sha256_many_with(mb_, h_, jobs, n); }

 private:
  HmacSha256 h_;
  ShaImpl sha_;
  ShaMbImpl mb_;
};

}  // namespace

std::unique_ptr<Mac> make_hmac_sha256_mac(const uint8_t* key, size_t key_len, const Dispatch& d) {
  return std::make_unique<HmacSha256Mac>(key, key_len, d);
}

}  // namespace aesxfer::crypto
