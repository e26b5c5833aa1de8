// 8-lane SHA-256 compression in ymm registers (AVX2): lane l of every register belongs to
// message l. Built with -mavx2 -mssse3; sha256_mb.cpp calls it only when cpu().avx2.
//
// Per block: each lane's 64 bytes are two rows of eight words; two 8x8 dword transposes
// (unpack 32/64, then vperm2i128) give w[j] = word j of every lane, byte-swapped with vpshufb.
// AVX2 has no rotate: each rotation is two shifts and an OR (the Sigma functions XOR the six
// shifts directly). Maj reuses a^b of one round as b^c of the next.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "crypto/sha256_k.h"

namespace aesxfer::crypto::detail {

namespace {

inline __m256i add(__m256i a, __m256i b) noexcept { return _mm256_add_epi32(a, b); }
inline __m256i xor_(__m256i a, __m256i b) noexcept { return _mm256_xor_si256(a, b); }
inline __m256i shr(__m256i x, int n) noexcept { return _mm256_srli_epi32(x, n); }
inline __m256i shl(__m256i x, int n) noexcept { return _mm256_slli_epi32(x, n); }

// ror(x,a) ^ ror(x,b) ^ ror(x,c), a < b < c.
inline __m256i sigma3(__m256i x, int a, int b, int c) noexcept {
  const __m256i right = xor_(xor_(shr(x, a), shr(x, b)), shr(x, c));
  const __m256i left = xor_(xor_(shl(x, 32 - a), shl(x, 32 - b)), shl(x, 32 - c));
  return xor_(right, left);
}

// ror(x,a) ^ ror(x,b) ^ (x >> s).
inline __m256i sigma_small(__m256i x, int a, int b, int s) noexcept {
  const __m256i right = xor_(xor_(shr(x, a), shr(x, b)), shr(x, s));
  const __m256i left = xor_(shl(x, 32 - a), shl(x, 32 - b));
  return xor_(right, left);
}

// 8x8 transpose of r[0..7] (row i = lane i) into out[0..7] (out[j] = word j of every lane).
inline void transpose8(__m256i out[8], const __m256i r[8]) noexcept {
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + j] (g = rows 0-3 / 4-7), 128-bit half k: rows 4g..4g+3, word 4k+j.
#pragma GCC unroll 2
  for (int g = 0; g < 2; ++g) {
    u[4 * g + 0] = _mm256_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm256_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm256_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm256_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    out[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

}  // namespace

// st[i][l] is state word i of lane l. Compresses nblocks consecutive blocks from ptr[l] in every
// lane (lanes with nothing to do may point at another lane's data; their state is garbage).
void sha256_x8_avx2(uint32_t st[8][8], const uint8_t* const ptr[8], size_t nblocks) noexcept {
  __m256i s[8];
  for (int i = 0; i < 8; ++i) s[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(st[i]));
  const __m256i bswap =
      _mm256_broadcastsi128_si256(_mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3));

  for (size_t blk = 0; blk < nblocks; ++blk) {
    __m256i w[16];
    {
      __m256i r[8];
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i)
          r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ptr[i] + 64 * blk + 32 * half));
        transpose8(w + 8 * half, r);
      }
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) w[j] = _mm256_shuffle_epi8(w[j], bswap);
    }
    __m256i a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
    __m256i bc = xor_(b, c);
#pragma GCC unroll 64
    for (int t = 0; t < 64; ++t) {
      __m256i wt;
      if (t < 16) {
        wt = w[t];
      } else {
        const __m256i s0 = sigma_small(w[(t - 15) & 15], 7, 18, 3);
        const __m256i s1 = sigma_small(w[(t - 2) & 15], 17, 19, 10);
        wt = w[t & 15] = add(add(w[t & 15], s0), add(w[(t - 7) & 15], s1));
      }
      const __m256i hkw = add(h, add(wt, _mm256_set1_epi32(int(kSha256Round[t]))));
      const __m256i ch = xor_(_mm256_and_si256(xor_(f, g), e), g);
      const __m256i t1 = add(add(hkw, sigma3(e, 6, 11, 25)), ch);
      const __m256i ab = xor_(a, b);
      const __m256i maj = xor_(_mm256_and_si256(ab, bc), b);
      const __m256i t2 = add(sigma3(a, 2, 13, 22), maj);
      bc = ab;
      h = g;
      g = f;
      f = e;
      e = add(d, t1);
      d = c;
      c = b;
      b = a;
      a = add(t1, t2);
    }
    s[0] = add(s[0], a);
    s[1] = add(s[1], b);
    s[2] = add(s[2], c);
    s[3] = add(s[3], d);
    s[4] = add(s[4], e);
    s[5] = add(s[5], f);
    s[6] = add(s[6], g);
    s[7] = add(s[7], h);
  }

  for (int i = 0; i < 8; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(st[i]), s[i]);
}

}  // namespace aesxfer::crypto::detail
