// The interface of an AEAD with 96-bit nonces (AES-128-GCM today), as the record layer uses it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace aesxfer::crypto {

class Aead {
 public:
  static constexpr size_t kNonceLen = 12;

  virtual ~Aead() = default;
  virtual size_t tag_len() const noexcept = 0;
  // Which code runs ("aesni", "vaes", "vperm512", ...).
  virtual const char* impl() const noexcept = 0;

  // Encrypts len bytes of in into out (may alias) and writes tag_len() bytes of tag.
  virtual void seal(const uint8_t nonce[12], const uint8_t* aad, size_t aad_len, const uint8_t* in,
                    uint8_t* out, size_t len, uint8_t* tag) const noexcept = 0;
  // Checks the tag over aad and ciphertext in constant time before it decrypts anything; returns
  // false (and leaves out untouched) when it does not match.
  virtual bool open(const uint8_t nonce[12], const uint8_t* aad, size_t aad_len, const uint8_t* in,
                    uint8_t* out, size_t len, const uint8_t* tag) const noexcept = 0;
};

}  // namespace aesxfer::crypto
