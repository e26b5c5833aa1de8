// The labelled key derivation every key of the protocol comes from (docs/PROTOCOL.md 1.5, 2.3):
//
//   kdf(outlen, key, label, context) = BLAKE2b(outlen, key = 32 bytes, msg = label || context)
//
// The handshake derives each direction's enc, mac and iv with the transcript hash as context;
// the record layer derives per-record RC4 keys and Blowfish epoch keys with a u64 BE counter.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace aesxfer::proto {

constexpr size_t kKdfKeyLen = 32;

// out: outlen bytes, 16..64 (BLAKE2b's output range). The hash state is wiped.
void kdf(uint8_t* out, size_t outlen, const uint8_t key[kKdfKeyLen], std::string_view label,
         std::span<const uint8_t> context) noexcept;
// The context is the u64 big-endian v (a record sequence number or a rekey epoch).
void kdf(uint8_t* out, size_t outlen, const uint8_t key[kKdfKeyLen], std::string_view label,
         uint64_t v) noexcept;

}  // namespace aesxfer::proto
