// Blowfish (Schneier 1993), 64-bit block, keys of 4 to 56 bytes. Legacy: kept for comparison.
// Note: its S-boxes are key-dependent tables indexed by secret data, so it is not constant time;
// that is a property of the algorithm, documented in docs/SECURITY.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "crypto/block_cipher.h"
#include "crypto/dispatch.h"

namespace aesxfer::crypto {

// key_len in [4, 56]; returns nullptr otherwise.
std::unique_ptr<BlockCipher> make_blowfish(const uint8_t* key, size_t key_len);
// The cipher table's factory (crypto/suite.h); one implementation, whatever the dispatch.
std::unique_ptr<BlockCipher> make_blowfish_block(const uint8_t* key, size_t key_len, const Dispatch& d);

}  // namespace aesxfer::crypto
