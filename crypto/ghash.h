// Internal to crypto/: the per-key GHASH state shared by the portable (gcm.cpp), PCLMULQDQ
// (gcm_aesni.cpp) and VPCLMULQDQ (aes_vaes.cpp) implementations. Not part of the library's API.
#pragma once
#include <cstddef>
#include <cstdint>

namespace aesxfer::crypto::detail {

// Opaque per-key state. The carry-less implementations keep H^1..H^32 here (16-byte values,
// lowest power first: 512 bytes); the portable one keeps its own smaller layout.
inline constexpr int kGhashPowers = 32;
struct GhashKey {
  alignas(64) uint8_t data[16 * kGhashPowers];
};
using GhashInitFn = void (*)(GhashKey* k, const uint8_t h[16]) noexcept;
// y = (...((y ^ X_1) H ^ X_2) H ... ^ X_n) H over `blocks` whole blocks.
using GhashBlocksFn = void (*)(const GhashKey* k, uint8_t y[16], const uint8_t* in, size_t blocks) noexcept;

// gcm_aesni.cpp: PCLMULQDQ, 8 blocks per reduction; its init fills all kGhashPowers powers.
void ghash_pclmul_init(GhashKey* k, const uint8_t h[16]) noexcept;
void ghash_pclmul_blocks(const GhashKey* k, uint8_t y[16], const uint8_t* in, size_t blocks) noexcept;
// aes_vaes.cpp: 512-bit VPCLMULQDQ, 32 blocks per reduction; same key layout as ghash_pclmul_init.
void ghash_vpclmul_blocks(const GhashKey* k, uint8_t y[16], const uint8_t* in, size_t blocks) noexcept;

}  // namespace aesxfer::crypto::detail
