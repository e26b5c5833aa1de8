#include "crypto/util.h"

#include "crypto/ct.h"

namespace aesxfer::crypto {

void secure_zero(void* p, size_t n) noexcept {
  volatile uint8_t* v = static_cast<volatile uint8_t*>(p);
  while (n--) *v++ = 0;
  __asm__ __volatile__("" : : "r"(p) : "memory");
}

bool ct_equal(const void* a, const void* b, size_t n) noexcept {
  const volatile uint8_t* x = static_cast<const volatile uint8_t*>(a);
  const volatile uint8_t* y = static_cast<const volatile uint8_t*>(b);
  uint8_t d = 0;
  for (size_t i = 0; i < n; ++i) d |= uint8_t(x[i] ^ y[i]);
  // The verdict is public (it decides whether a record or digest is accepted, which the peer
  // sees); the loop above is what must not depend on the contents.
  uint8_t verdict = uint8_t((uint32_t(d) - 1) >> 8);  // 1 when d == 0, without a branch
  ct_public(&verdict, 1);
  return verdict != 0;
}

std::string to_hex(const void* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  const uint8_t* b = static_cast<const uint8_t*>(p);
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[b[i] >> 4];
    s += kDigits[b[i] & 15];
  }
  return s;
}

void xor_bytes(uint8_t* out, const uint8_t* a, const uint8_t* b, size_t n) noexcept {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    x ^= y;
    std::memcpy(out + i, &x, 8);
  }
  for (; i < n; ++i) out[i] = uint8_t(a[i] ^ b[i]);
}

}  // namespace aesxfer::crypto
