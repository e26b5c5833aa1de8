// Small helpers every primitive needs: wiping secrets, constant-time comparison, byte order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace aesxfer::crypto {

// Overwrites n bytes in a way the optimiser may not remove.
void secure_zero(void* p, size_t n) noexcept;

// True when a and b are equal; time depends on n only, never on the contents.
bool ct_equal(const void* a, const void* b, size_t n) noexcept;

inline uint32_t load_be32(const uint8_t* p) noexcept {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}
inline uint64_t load_be64(const uint8_t* p) noexcept {
  return (uint64_t(load_be32(p)) << 32) | load_be32(p + 4);
}
inline void store_be32(uint8_t* p, uint32_t v) noexcept {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}
inline void store_be64(uint8_t* p, uint64_t v) noexcept {
  store_be32(p, uint32_t(v >> 32));
  store_be32(p + 4, uint32_t(v));
}
inline uint32_t load_le32(const uint8_t* p) noexcept {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_le32(uint8_t* p, uint32_t v) noexcept { std::memcpy(p, &v, 4); }

// hi:lo += b as one 128-bit integer, the carry computed without a branch: CTR and GCM counters
// derive from key material (the record layer's iv salt), so their increments must not branch on them.
// The empty asm hides the result from the optimiser, which would otherwise run a block loop on the
// counter itself (loop until lo reaches its end value: a compare-and-branch on secret data).
inline void add128(uint64_t& hi, uint64_t& lo, uint64_t b) noexcept {
  const uint64_t l = lo + b;
  hi += ((lo & b) | ((lo | b) & ~l)) >> 63;
  lo = l;
  __asm__("" : "+r"(hi), "+r"(lo));
}

// XORs n bytes: out = a ^ b (any of them may alias).
void xor_bytes(uint8_t* out, const uint8_t* a, const uint8_t* b, size_t n) noexcept;

// n bytes as lower-case hex, two digits a byte, as sha256sum prints a digest. For public values
// only (digests, names, identities): its table look-up is indexed by the bytes.
std::string to_hex(const void* p, size_t n);

}  // namespace aesxfer::crypto
