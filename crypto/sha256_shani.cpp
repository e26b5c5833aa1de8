// SHA-256 compression with the SHA extensions (SHA-NI). Built with -msha -msse4.1 -mssse3;
// sha256.cpp calls it only when CPUID reports SHA.
//
// sha256rnds2 does two rounds on the state split as ABEF / CDGH with the two W+K words in the
// low half of its third operand; sha256msg1/msg2 compute the message schedule four words at a time.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace aesxfer::crypto::detail {

namespace {
alignas(16) constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
}  // namespace

void sha256_compress_shani(uint32_t h[8], const uint8_t* p, size_t n) noexcept {
  // Byte swap of each 32-bit word: the message words are big-endian.
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);

  // h[0..3] = A B C D and h[4..7] = E F G H (lowest lane first) become ABEF and CDGH with A, C
  // in the highest lane, the layout sha256rnds2 expects. Lanes are listed lowest first.
  __m128i abcd = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
  __m128i efgh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + 4));
  abcd = _mm_shuffle_epi32(abcd, 0xB1);              // B A D C
  efgh = _mm_shuffle_epi32(efgh, 0x1B);              // H G F E
  __m128i abef = _mm_alignr_epi8(abcd, efgh, 8);     // F E B A
  __m128i cdgh = _mm_blend_epi16(efgh, abcd, 0xF0);  // H G D C

  for (; n; --n, p += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i m[4];
    for (int i = 0; i < 4; ++i)
      m[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)), bswap);

#pragma GCC unroll 16
    for (int g = 0; g < 16; ++g) {
      __m128i wk = _mm_add_epi32(m[g & 3], _mm_load_si128(reinterpret_cast<const __m128i*>(kRound + 4 * g)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      wk = _mm_shuffle_epi32(wk, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);
      if (g < 12) {
        // W[4(g+4) .. 4(g+4)+3] from groups g .. g+3, stored over group g.
        __m128i t = _mm_sha256msg1_epu32(m[g & 3], m[(g + 1) & 3]);
        t = _mm_add_epi32(t, _mm_alignr_epi8(m[(g + 3) & 3], m[(g + 2) & 3], 4));
        m[g & 3] = _mm_sha256msg2_epu32(t, m[(g + 3) & 3]);
      }
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }

  // Back to A B C D / E F G H (lanes listed lowest first, as above).
  const __m128i abef_r = _mm_shuffle_epi32(abef, 0x1B);  // A B E F
  const __m128i ghcd = _mm_shuffle_epi32(cdgh, 0xB1);    // G H C D
  abcd = _mm_blend_epi16(abef_r, ghcd, 0xF0);            // A B C D
  efgh = _mm_alignr_epi8(ghcd, abef_r, 8);               // E F G H
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h), abcd);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h + 4), efgh);
}

}  // namespace aesxfer::crypto::detail
