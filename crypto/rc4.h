// RC4 ("arcfour"). Legacy: kept for comparison (RFC 7465 forbids it in TLS).
// As RFC 4345 does for arcfour128/256, the first `discard` keystream bytes are thrown away.
#pragma once
#include <cstddef>
#include <cstdint>

namespace aesxfer::crypto {

class Rc4 {
 public:
  static constexpr size_t kRfc4345Discard = 1536;

  Rc4() = default;
  Rc4(const uint8_t* key, size_t key_len, size_t discard = kRfc4345Discard) { set_key(key, key_len, discard); }
  ~Rc4();
  Rc4(const Rc4&) = delete;
  Rc4& operator=(const Rc4&) = delete;

  // key_len in [1, 256].
  void set_key(const uint8_t* key, size_t key_len, size_t discard = kRfc4345Discard) noexcept;
  // out = in ^ keystream; in may equal out.
  void xor_stream(const uint8_t* in, uint8_t* out, size_t len) noexcept;

 private:
  uint8_t s_[256] = {};
  uint8_t i_ = 0, j_ = 0;
};

}  // namespace aesxfer::crypto
