// 16-lane SHA-256 compression in zmm registers (AVX-512F/BW): lane l of every register belongs
// to message l. Built with -mavx2 -mavx512f -mavx512bw -mavx512vl; sha256_mb.cpp calls it only
// when cpu() reports those.
//
// Per block: the 16 lanes' 64-byte blocks are loaded as 16 rows and transposed (16x16 dwords:
// unpack 32/64, then two rounds of 128-bit shuffles) so that register j holds word j of every
// lane, then byte-swapped. Rotations are vprord; Ch, Maj and the three-way XORs of the Sigma
// functions are one vpternlogd each; the round constants come as broadcast memory operands.
// GCC 12's AVX-512 intrinsics start many results from _mm512_undefined_epi32(), which
// -Wmaybe-uninitialized reports at every inlined use (a known false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "crypto/sha256_k.h"

namespace aesxfer::crypto::detail {

namespace {

// kSha256Round widened to 16 lanes, so that adding K[t] is one vpaddd with a memory operand.
struct Wide {
  alignas(64) uint32_t k[64][16];
};
constexpr Wide widen() {
  Wide w{};
  for (int t = 0; t < 64; ++t)
    for (int l = 0; l < 16; ++l) w.k[t][l] = kSha256Round[t];
  return w;
}
constexpr Wide kWide = widen();

// vpternlogd truth tables with operands (a, b, c): a^b^c, a ? b : c, majority.
constexpr int kXor3 = 0x96, kChoose = 0xCA, kMajority = 0xE8;

inline __m512i xor3(__m512i a, __m512i b, __m512i c) noexcept {
  return _mm512_ternarylogic_epi32(a, b, c, kXor3);
}

// Loads block `blk` of each of the 16 lanes and returns w[j] = word j of every lane, big-endian
// words converted to native.
inline void load_transposed(__m512i w[16], const uint8_t* const ptr[16], size_t off) noexcept {
  __m512i r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(ptr[i] + off);
  // Stage 1/2: 4x4 transposes inside each 128-bit chunk, per group of four rows.
  // v[g][j], chunk k = rows 4g..4g+3, word 4k+j.
  __m512i v[4][4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512i t0 = _mm512_unpacklo_epi32(r[4 * g], r[4 * g + 1]);
    const __m512i t1 = _mm512_unpackhi_epi32(r[4 * g], r[4 * g + 1]);
    const __m512i t2 = _mm512_unpacklo_epi32(r[4 * g + 2], r[4 * g + 3]);
    const __m512i t3 = _mm512_unpackhi_epi32(r[4 * g + 2], r[4 * g + 3]);
    v[g][0] = _mm512_unpacklo_epi64(t0, t2);
    v[g][1] = _mm512_unpackhi_epi64(t0, t2);
    v[g][2] = _mm512_unpacklo_epi64(t1, t3);
    v[g][3] = _mm512_unpackhi_epi64(t1, t3);
  }
  // Stage 3/4: 4x4 transpose of the 128-bit chunks; word 4k+j gathers chunk k of v[0..3][j].
  const __m512i bswap =
      _mm512_broadcast_i32x4(_mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3));
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i s0 = _mm512_shuffle_i32x4(v[0][j], v[1][j], 0x44);             // A0 A1 B0 B1
    const __m512i s1 = _mm512_shuffle_i32x4(v[0][j], v[1][j], 0xEE);             // A2 A3 B2 B3
    const __m512i s2 = _mm512_shuffle_i32x4(v[2][j], v[3][j], 0x44);             // C0 C1 D0 D1
    const __m512i s3 = _mm512_shuffle_i32x4(v[2][j], v[3][j], 0xEE);             // C2 C3 D2 D3
    w[j] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(s0, s2, 0x88), bswap);       // chunk 0
    w[4 + j] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(s0, s2, 0xDD), bswap);   // chunk 1
    w[8 + j] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(s1, s3, 0x88), bswap);   // chunk 2
    w[12 + j] = _mm512_shuffle_epi8(_mm512_shuffle_i32x4(s1, s3, 0xDD), bswap);  // chunk 3
  }
}

}  // namespace

// st[i][l] is state word i of lane l. Compresses nblocks consecutive blocks from ptr[l] in every
// lane (lanes with nothing to do may point at another lane's data; their state is garbage).
void sha256_x16_avx512(uint32_t st[8][16], const uint8_t* const ptr[16], size_t nblocks) noexcept {
  __m512i s[8];
  for (int i = 0; i < 8; ++i) s[i] = _mm512_loadu_si512(st[i]);

  for (size_t blk = 0; blk < nblocks; ++blk) {
    __m512i w[16];
    load_transposed(w, ptr, 64 * blk);
    __m512i a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
#pragma GCC unroll 64
    for (int t = 0; t < 64; ++t) {
      __m512i wt;
      if (t < 16) {
        wt = w[t];
      } else {
        const __m512i w15 = w[(t - 15) & 15], w2 = w[(t - 2) & 15];
        const __m512i s0 =
            xor3(_mm512_ror_epi32(w15, 7), _mm512_ror_epi32(w15, 18), _mm512_srli_epi32(w15, 3));
        const __m512i s1 =
            xor3(_mm512_ror_epi32(w2, 17), _mm512_ror_epi32(w2, 19), _mm512_srli_epi32(w2, 10));
        wt = w[t & 15] =
            _mm512_add_epi32(_mm512_add_epi32(w[t & 15], s0), _mm512_add_epi32(w[(t - 7) & 15], s1));
      }
      const __m512i hkw = _mm512_add_epi32(h, _mm512_add_epi32(wt, _mm512_load_si512(kWide.k[t])));
      const __m512i sig1 = xor3(_mm512_ror_epi32(e, 6), _mm512_ror_epi32(e, 11), _mm512_ror_epi32(e, 25));
      const __m512i ch = _mm512_ternarylogic_epi32(e, f, g, kChoose);
      const __m512i t1 = _mm512_add_epi32(_mm512_add_epi32(hkw, sig1), ch);
      const __m512i sig0 = xor3(_mm512_ror_epi32(a, 2), _mm512_ror_epi32(a, 13), _mm512_ror_epi32(a, 22));
      const __m512i maj = _mm512_ternarylogic_epi32(a, b, c, kMajority);
      const __m512i t2 = _mm512_add_epi32(sig0, maj);
      h = g;
      g = f;
      f = e;
      e = _mm512_add_epi32(d, t1);
      d = c;
      c = b;
      b = a;
      a = _mm512_add_epi32(t1, t2);
    }
    s[0] = _mm512_add_epi32(s[0], a);
    s[1] = _mm512_add_epi32(s[1], b);
    s[2] = _mm512_add_epi32(s[2], c);
    s[3] = _mm512_add_epi32(s[3], d);
    s[4] = _mm512_add_epi32(s[4], e);
    s[5] = _mm512_add_epi32(s[5], f);
    s[6] = _mm512_add_epi32(s[6], g);
    s[7] = _mm512_add_epi32(s[7], h);
  }

  for (int i = 0; i < 8; ++i) _mm512_storeu_si512(st[i], s[i]);
}

}  // namespace aesxfer::crypto::detail
