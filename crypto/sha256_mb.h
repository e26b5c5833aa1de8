// Multi-buffer SHA-256 and HMAC-SHA256: many independent messages hashed at once, one message
// per SIMD lane (16 lanes of zmm with AVX-512, 8 lanes of ymm with AVX2), or one at a time with
// SHA-NI / the portable code. See sha256_mb.cpp for the dispatch order and the measurements
// behind it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "crypto/sha256.h"

namespace aesxfer::crypto {

// One message to hash: len bytes at data (any alignment; len may be 0), 32-byte digest to out.
struct Sha256Job {
  const uint8_t* data;
  size_t len;
  uint8_t* out;  // 32 bytes
};

// One message to MAC, given as two parts p1 || p2 (either may be empty, e.g. a 16-byte
// seq || header prefix and the record body), so callers need not copy. 32-byte tag to tag.
struct HmacJob {
  const uint8_t* p1;
  size_t len1;
  const uint8_t* p2;
  size_t len2;
  uint8_t* tag;  // 32 bytes
};

// Hashes n independent messages; lanes may have different lengths (the scheduler hands the
// longest messages out first, refills lanes as they finish and completes the last few messages
// with the one-stream code). Outputs may not overlap inputs of other jobs.
void sha256_many(Sha256Job* jobs, size_t n) noexcept;

// HMAC-SHA256 with key's precomputed pads over n messages.
void hmac_sha256_many(const HmacSha256& key, HmacJob* jobs, size_t n) noexcept;

// What sha256_many / hmac_sha256_many run on this CPU: "avx512x16", "avx2x8", "shani", "software".
const char* sha256_mb_impl_name() noexcept;

// For tests and benchmarks: force one implementation. An unavailable one (per cpu()) is
// replaced by the next one down the list avx512x16 > avx2x8 > shani > software, as
// sha256_mb_impl_name(impl) reports. best is what dispatch() chose, and what sha256_many uses.
bool sha256_mb_impl_available(ShaMbImpl impl) noexcept;
const char* sha256_mb_impl_name(ShaMbImpl impl) noexcept;
void sha256_many_with(ShaMbImpl impl, Sha256Job* jobs, size_t n) noexcept;
void hmac_sha256_many_with(ShaMbImpl impl, const HmacSha256& key, HmacJob* jobs, size_t n) noexcept;

namespace detail {
// Tests and benchmarks only (global; set it while no batch runs): the SIMD paths hand the remaining lanes to
// the one-stream code once fewer than `lanes` are busy (0 restores the measured default; 1 keeps the SIMD
// lanes running to the very last message, idle lanes shadowing a busy one).
void sha256_mb_set_tail_lanes_for_testing(int lanes) noexcept;
}  // namespace detail

}  // namespace aesxfer::crypto
