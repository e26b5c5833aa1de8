// Internal to crypto/: the GHASH reduction shared by the carry-less implementations,
// gcm_aesni.cpp (PCLMULQDQ) and aes_vaes.cpp (VPCLMULQDQ). Blocks are byte-reversed into 128-bit
// integers, products are shifted left by one and reduced modulo x^128 + x^7 + x^2 + x + 1.
// Included only by files compiled with at least -mpclmul -msse4.1 -mssse3. The functions have
// internal linkage on purpose: each file compiles them with its own instruction-set flags (SSE in
// one, AVX-512 encodings in the other), and one inline definition chosen by the linker for both
// would run AVX-512 code on a CPU that only has PCLMULQDQ.
#pragma once
#include <immintrin.h>

namespace aesxfer::crypto::detail {
namespace {  // NOLINT(google-build-namespaces): see above

// 128-bit shifts of a whole register.
inline __m128i shl128_1(__m128i x) noexcept {
  return _mm_or_si128(_mm_slli_epi64(x, 1), _mm_srli_epi64(_mm_slli_si128(x, 8), 63));
}
template <int S>
inline __m128i shr128(__m128i x) noexcept {
  return _mm_or_si128(_mm_srli_epi64(x, S), _mm_slli_epi64(_mm_srli_si128(x, 8), 64 - S));
}

// Reduces the unreduced 256-bit product hi:mid:lo (mid the sum of the two cross products).
inline __m128i ghash_reduce(__m128i hi, __m128i mid, __m128i lo) noexcept {
  lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
  hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
  // Shift the 256-bit hi:lo left by one.
  hi = _mm_or_si128(shl128_1(hi), _mm_srli_epi64(_mm_srli_si128(lo, 8), 63));
  lo = shl128_1(lo);
  // T = lo + the bits that lo >> {1, 2, 7} would drop; result = hi + T + T>>1 + T>>2 + T>>7.
  const __m128i l0 = _mm_slli_si128(lo, 8);
  const __m128i t = _mm_xor_si128(
      lo,
      _mm_xor_si128(_mm_slli_epi64(l0, 63), _mm_xor_si128(_mm_slli_epi64(l0, 62), _mm_slli_epi64(l0, 57))));
  return _mm_xor_si128(_mm_xor_si128(hi, t),
                       _mm_xor_si128(shr128<1>(t), _mm_xor_si128(shr128<2>(t), shr128<7>(t))));
}

}  // namespace
}  // namespace aesxfer::crypto::detail
