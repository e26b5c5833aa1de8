// AES-128-GCM (NIST SP 800-38D) with 96-bit nonces and 128-bit tags.
// GHASH uses PCLMULQDQ (or VPCLMULQDQ) when present and a constant-time portable multiply otherwise;
// it follows the AES implementation choice (AesImpl::software forces the portable GHASH too).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "crypto/aes.h"

namespace aesxfer::crypto {

class Aes128Gcm {
 public:
  static constexpr size_t kNonceLen = 12;
  static constexpr size_t kTagLen = 16;

  // Returns nullptr when impl cannot run here.
  static std::unique_ptr<Aes128Gcm> make(const uint8_t key[16], AesImpl impl = AesImpl::best);
  virtual ~Aes128Gcm() = default;

  virtual const char* impl() const noexcept = 0;

  // Encrypts len bytes of in into out (may alias) and writes the tag.
  virtual void seal(const uint8_t nonce[12], const uint8_t* aad, size_t aad_len, const uint8_t* in,
                    uint8_t* out, size_t len, uint8_t tag[16]) const noexcept = 0;
  // Checks the tag over aad and ciphertext in constant time before it decrypts anything; returns
  // false (and leaves out untouched) when it does not match.
  virtual bool open(const uint8_t nonce[12], const uint8_t* aad, size_t aad_len, const uint8_t* in,
                    uint8_t* out, size_t len, const uint8_t tag[16]) const noexcept = 0;

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

}  // namespace aesxfer::crypto
