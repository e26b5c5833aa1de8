// GHASH with PCLMULQDQ for AES-128-GCM (the CTR part runs on the AES-NI BlockCipher).
// Same representation as the portable code in gcm.cpp, and the reduction of crypto/ghash_clmul.h.
// Aggregated reduction: 8 (or 4) blocks are multiplied by H^8..H^1 (H^4..H^1), the 256-bit
// products XORed together and reduced once.
// Compiled with -maes -mpclmul -msse4.1 -mssse3 (file-name suffix).
#include <immintrin.h>
#include <wmmintrin.h>

#include <cstring>

#include "crypto/ghash.h"
#include "crypto/ghash_clmul.h"
#include "crypto/util.h"

namespace aesxfer::crypto::detail {

namespace {

inline __m128i bswap128(__m128i x) noexcept {
  return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}
inline __m128i load_block(const uint8_t* p) noexcept {
  return bswap128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Accumulates the unreduced 256-bit product a*b into hi:lo.
inline void mul_acc(__m128i a, __m128i b, __m128i& hi, __m128i& mid, __m128i& lo) noexcept {
  lo = _mm_xor_si128(lo, _mm_clmulepi64_si128(a, b, 0x00));
  hi = _mm_xor_si128(hi, _mm_clmulepi64_si128(a, b, 0x11));
  mid = _mm_xor_si128(mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10)));
}

inline __m128i gf_mul(__m128i a, __m128i b) noexcept {
  __m128i hi = _mm_setzero_si128(), mid = hi, lo = hi;
  mul_acc(a, b, hi, mid, lo);
  return ghash_reduce(hi, mid, lo);
}

inline const __m128i* powers(const GhashKey* k) noexcept { return reinterpret_cast<const __m128i*>(k->data); }

template <int N>
inline __m128i agg(const __m128i* hp, __m128i y, const uint8_t* in) noexcept {
  __m128i hi = _mm_setzero_si128(), mid = hi, lo = hi;
  // (y + X_1) H^N + X_2 H^(N-1) + ... + X_N H
  mul_acc(_mm_xor_si128(y, load_block(in)), hp[N - 1], hi, mid, lo);
#pragma GCC unroll 8
  for (int j = 1; j < N; ++j) mul_acc(load_block(in + 16 * j), hp[N - 1 - j], hi, mid, lo);
  return ghash_reduce(hi, mid, lo);
}

}  // namespace

void ghash_pclmul_init(GhashKey* k, const uint8_t h[16]) noexcept {
  __m128i* hp = reinterpret_cast<__m128i*>(k->data);  // hp[i] = H^(i+1)
  hp[0] = load_block(h);
  for (int i = 1; i < kGhashPowers; ++i) hp[i] = gf_mul(hp[i - 1], hp[0]);
}

void ghash_pclmul_blocks(const GhashKey* k, uint8_t y[16], const uint8_t* in, size_t blocks) noexcept {
  const __m128i* hp = powers(k);
  __m128i acc = load_block(y);
  for (; blocks >= 8; blocks -= 8, in += 128) acc = agg<8>(hp, acc, in);
  if (blocks >= 4) {
    acc = agg<4>(hp, acc, in);
    blocks -= 4;
    in += 64;
  }
  for (; blocks > 0; --blocks, in += 16) acc = gf_mul(_mm_xor_si128(acc, load_block(in)), hp[0]);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), bswap128(acc));
}

}  // namespace aesxfer::crypto::detail
