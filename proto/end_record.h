// The payload of the `end` record that closes every data stream (docs/PROTOCOL.md 3.1):
//
//   u64 BE length | u8 checksum id (4.3) | digest (0, 16 or 32 bytes, by the id)
//
// Pure encoding and decoding; the data plane (net/transfer.cpp) compares it with what it counted.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "crypto/checksum.h"

namespace aesxfer::proto {

constexpr size_t kMaxEndPayload = 8 + 1 + crypto::kMaxChecksumLen;

struct EndRecord {
  uint64_t length = 0;
  crypto::Checksum checksum;
};

// Writes the payload into out (room for kMaxEndPayload bytes); returns its length.
size_t encode_end(uint8_t* out, const EndRecord& e) noexcept;
// nullopt for an unknown checksum id or a payload whose length does not match it.
std::optional<EndRecord> decode_end(std::span<const uint8_t> payload) noexcept;

}  // namespace aesxfer::proto
