// AES-128 in five implementations, chosen once at start-up by CPUID:
//   aesni    - AES-NI, CBC decryption and CTR pipelined over 8 blocks, 8-lane multi-buffer CBC.
//   vaes     - VAES on 512-bit registers where AVX-512 and VAES exist (bulk paths only).
//   software - constant time: no table lookups indexed by secret data (bitsliced).
//   vperm    - constant time too, vector-permute S-box on SSSE3 PSHUFB; the portable choice
//              (no AES-NI, or AES-NI masked) when the CPU has SSSE3.
//   vperm512 - the same vperm code built with AVX-512VL encodings (VPTERNLOGD, three operands),
//              preferred over vperm where AVX-512VL exists; it uses no AES instruction.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "crypto/block_cipher.h"

namespace aesxfer::crypto {

enum class AesImpl { best, aesni, vaes, software, vperm, vperm512 };

// Names the implementation make_aes128(key, AesImpl::best) would pick now.
const char* aes_best_impl_name() noexcept;

// The implementations this CPU can run, best first (always ends with software).
std::vector<AesImpl> aes_available_impls();
const char* aes_impl_name(AesImpl) noexcept;

// Returns nullptr when the requested implementation cannot run on this CPU.
std::unique_ptr<BlockCipher> make_aes128(const uint8_t key[16], AesImpl impl = AesImpl::best);

}  // namespace aesxfer::crypto
