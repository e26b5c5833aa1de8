// The interface of a stream cipher as the record layer uses it: keyed afresh for every record.
#pragma once
#include <cstddef>
#include <cstdint>

namespace aesxfer::crypto {

class StreamCipher {
 public:
  virtual ~StreamCipher() = default;
  virtual const char* impl() const noexcept = 0;
  // Starts a new keystream (the cipher's own rules apply, e.g. RC4's RFC 4345 discard).
  virtual void set_key(const uint8_t* key, size_t key_len) noexcept = 0;
  // out = in ^ keystream; in may equal out.
  virtual void xor_stream(const uint8_t* in, uint8_t* out, size_t len) noexcept = 0;
};

}  // namespace aesxfer::crypto
