// AES-128-GCM (NIST SP 800-38D) with 96-bit nonces and 128-bit tags.
// GHASH uses PCLMULQDQ (or VPCLMULQDQ) when present and a constant-time portable multiply otherwise;
// it follows the AES implementation (detail::ghash_pick: the portable AES ones keep the portable
// GHASH), and the dispatch table records the pair.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "crypto/aead.h"
#include "crypto/aes.h"

namespace aesxfer::crypto {

class Aes128Gcm : public Aead {
 public:
  static constexpr size_t kTagLen = 16;

  // Returns nullptr when impl cannot run here. The GHASH follows the AES implementation.
  static std::unique_ptr<Aes128Gcm> make(const uint8_t key[16], AesImpl impl = AesImpl::best);
  // The dispatch table's AES and GHASH.
  static std::unique_ptr<Aes128Gcm> make(const uint8_t key[16], const Dispatch& d);

  size_t tag_len() const noexcept override { return kTagLen; }

  // The same with the nonce length given, for callers that take nonces from outside. SP 800-38D
  // also defines nonces of other lengths (hashed into the first counter block); this
  // implementation takes 96-bit nonces only and refuses any other length, and any message longer
  // than GCM's limit of 2^32 - 2 blocks (where the 32-bit block counter would wrap), by returning
  // false without writing anything, rather than computing something that is not GCM.
  // (The record layer makes its own 12-byte nonces and bounds records at 1 MiB.)
  static constexpr uint64_t kMaxLen = (uint64_t(1) << 36) - 32;
  static bool params_ok(size_t nonce_len, size_t len) noexcept {
    return nonce_len == kNonceLen && len <= kMaxLen;
  }
  bool seal_checked(const uint8_t* nonce, size_t nonce_len, const uint8_t* aad, size_t aad_len,
                    const uint8_t* in, uint8_t* out, size_t len, uint8_t tag[16]) const noexcept {
    if (!params_ok(nonce_len, len)) return false;
    seal(nonce, aad, aad_len, in, out, len, tag);
    return true;
  }
  bool open_checked(const uint8_t* nonce, size_t nonce_len, const uint8_t* aad, size_t aad_len,
                    const uint8_t* in, uint8_t* out, size_t len, const uint8_t tag[16]) const noexcept {
    return params_ok(nonce_len, len) && open(nonce, aad, aad_len, in, out, len, tag);
  }
};

// The cipher table's factory (crypto/suite.h).
std::unique_ptr<Aead> make_aes128_gcm_aead(const uint8_t* key, const Dispatch& d);

}  // namespace aesxfer::crypto
