// A path as the server shows it (Place::shown), kept as 128 bits of its SHA-256: the key of the
// directory pins (server/dir_pins.h) and of the ledger of unlogged bytes (server/quiet_bytes.h).
// Fixed size whatever the path's length, and no name can be crafted to share another's (std::hash,
// whose seed is fixed, could be: a sixty-first re-attack, R61-2).
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "crypto/sha256.h"

namespace aesxfer::server {

using PathKey = std::array<uint8_t, 16>;

inline PathKey path_key(const std::string& shown) {
  uint8_t d[crypto::Sha256::kDigestLen];
  crypto::Sha256::digest(shown.data(), shown.size(), d);
  PathKey k{};
  std::memcpy(k.data(), d, k.size());
  return k;
}

// For unordered containers: the key is already a hash.
struct PathKeyHash {
  size_t operator()(const PathKey& k) const noexcept {
    size_t h;
    std::memcpy(&h, k.data(), sizeof h);
    return h;
  }
};

}  // namespace aesxfer::server
