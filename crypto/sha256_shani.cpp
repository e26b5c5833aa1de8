// SHA-256 compression with the SHA extensions (SHA-NI). Built with -msha -msse4.1 -mssse3;
// sha256.cpp calls it only when CPUID reports SHA.
//
// sha256rnds2 does two rounds on the state split as ABEF / CDGH with the two W+K words in the
// low half of its third operand; sha256msg1/msg2 compute the message schedule four words at a time.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "crypto/sha256_k.h"

namespace aesxfer::crypto::detail {

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
      __m128i wk =
          _mm_add_epi32(m[g & 3], _mm_load_si128(reinterpret_cast<const __m128i*>(kSha256Round + 4 * g)));
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
