// AES-128 in five implementations, chosen once at start-up by CPUID:
//   aesni    - AES-NI, CBC decryption and CTR pipelined over 8 blocks, 8-lane multi-buffer CBC.
//   vaes     - VAES on 512-bit registers where AVX-512 and VAES exist (bulk paths only).
//   software - constant time: no table lookups indexed by secret data (bitsliced).
//   vperm    - constant time too, vector-permute S-box on SSSE3 PSHUFB; the portable choice
//              (no AES-NI, or AES-NI masked) when the CPU has SSSE3.
//   vperm512 - the same vperm code built with AVX-512VL encodings (VPTERNLOGD, three operands),
//              preferred over vperm where AVX-512VL exists; it uses no AES instruction.
// AesImpl::best is what dispatch() chose (crypto/dispatch.h).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "crypto/block_cipher.h"
#include "crypto/dispatch.h"

namespace aesxfer::crypto {

// Names the implementation make_aes128(key, AesImpl::best) runs.
const char* aes_best_impl_name() noexcept;

// The implementations this CPU can run, best first (always ends with software).
std::vector<AesImpl> aes_available_impls();
const char* aes_impl_name(AesImpl) noexcept;

// Returns nullptr when the requested implementation cannot run on this CPU.
std::unique_ptr<BlockCipher> make_aes128(const uint8_t key[16], AesImpl impl = AesImpl::best);

// The cipher table's factory (crypto/suite.h): key_len must be 16; the dispatch's AES.
std::unique_ptr<BlockCipher> make_aes128_block(const uint8_t* key, size_t key_len, const Dispatch& d);

}  // namespace aesxfer::crypto
