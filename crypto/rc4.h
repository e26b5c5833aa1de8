// RC4 ("arcfour"). Legacy: kept for comparison (RFC 7465 forbids it in TLS).
// As RFC 4345 does for arcfour128/256, the first `discard` keystream bytes are thrown away.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "crypto/stream_cipher.h"

namespace aesxfer::crypto {

class Rc4 final : public StreamCipher {
 public:
  static constexpr size_t kRfc4345Discard = 1536;

  Rc4() = default;
  Rc4(const uint8_t* key, size_t key_len, size_t discard = kRfc4345Discard) {
    set_key(key, key_len, discard);
  }
  ~Rc4() override;
  Rc4(const Rc4&) = delete;
  Rc4& operator=(const Rc4&) = delete;

  const char* impl() const noexcept override { return "portable"; }
  // key_len in [1, 256].
  void set_key(const uint8_t* key, size_t key_len, size_t discard) noexcept;
  void set_key(const uint8_t* key, size_t key_len) noexcept override {
    set_key(key, key_len, kRfc4345Discard);
  }
  // out = in ^ keystream; in may equal out.
  void xor_stream(const uint8_t* in, uint8_t* out, size_t len) noexcept override;

 private:
  uint8_t s_[256] = {};
  uint8_t i_ = 0, j_ = 0;
};

// The cipher table's factory (crypto/suite.h): arcfour, RFC 4345's 1536 bytes discarded per key.
std::unique_ptr<StreamCipher> make_rc4_stream();

}  // namespace aesxfer::crypto
