// One XXH3-128 implementation from Debian's libxxhash-dev headers, inlined (XXH_INLINE_ALL) so
// that the vector code the compiler flags of the including file allow (SSE2, AVX2, AVX-512) is
// what runs. Included once each by xxh3_sse2.cpp, xxh3_avx2.cpp and xxh3_avx512.cpp, whose
// file names give them their instruction-set flags; XXH3_OPS_FN names the accessor.
// GCC 12 reports false -Wmaybe-uninitialized inside its own AVX-512 intrinsic headers (the
// _mm512_undefined_epi32 idiom) when they are inlined here; the code is libxxhash's, unchanged.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define XXH_INLINE_ALL
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "crypto/checksum.h"

namespace aesxfer::crypto {
namespace {

static_assert(sizeof(XXH3_state_t) <= 576 && alignof(XXH3_state_t) <= 64,
              "FileChecksum's XXH3 state buffer is too small for this libxxhash");

void xxh_reset(void* st) noexcept { XXH3_128bits_reset(static_cast<XXH3_state_t*>(st)); }
void xxh_update(void* st, const void* p, size_t n) noexcept {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(st), p, n);
}
void xxh_digest(const void* st, uint8_t out[16]) noexcept {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(static_cast<const XXH3_state_t*>(st)));
  for (int i = 0; i < 16; ++i) out[i] = c.digest[i];
}

}  // namespace

const Xxh3Ops& XXH3_OPS_FN() noexcept {
  static const Xxh3Ops ops{xxh_reset, xxh_update, xxh_digest};
  return ops;
}

}  // namespace aesxfer::crypto
