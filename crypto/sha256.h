// SHA-256 (FIPS 180-4) with SHA-NI when present and a portable version otherwise,
// and HMAC-SHA256 (RFC 2104) with the inner and outer pad states computed once per key.
#pragma once
#include <cstddef>
#include <cstdint>

#include "crypto/dispatch.h"

namespace aesxfer::crypto {

const char* sha256_impl_name(ShaImpl) noexcept;  // best: what dispatch() chose
bool sha256_impl_available(ShaImpl) noexcept;

class Sha256 {
 public:
  static constexpr size_t kDigestLen = 32;
  static constexpr size_t kBlockLen = 64;

  explicit Sha256(ShaImpl impl = ShaImpl::best) noexcept;
  ~Sha256();
  void reset() noexcept;
  void update(const void* data, size_t len) noexcept;
  void final(uint8_t out[32]) noexcept;  // then reset() before reuse
  const char* impl() const noexcept;

  static void digest(const void* data, size_t len, uint8_t out[32], ShaImpl impl = ShaImpl::best) noexcept;

  // Raw state access for HMAC's precomputed pads.
  struct State {
    uint32_t h[8];
    uint64_t bytes;  // bytes already compressed
  };
  State state() const noexcept;
  void set_state(const State& s) noexcept;

 private:
  uint32_t h_[8];
  uint64_t total_ = 0;
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  void (*compress_)(uint32_t h[8], const uint8_t* blocks, size_t n) noexcept;
};

class HmacSha256 {
 public:
  static constexpr size_t kTagLen = 32;

  HmacSha256(const uint8_t* key, size_t key_len, ShaImpl impl = ShaImpl::best) noexcept;
  ~HmacSha256();
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  // Incremental: begin(), update()..., finish(). begin() restores the precomputed inner state.
  void begin() noexcept;
  void update(const void* data, size_t len) noexcept;
  void finish(uint8_t tag[32]) noexcept;

  // One-shot over one buffer.
  void mac(const void* data, size_t len, uint8_t tag[32]) noexcept;

  // The precomputed states after the key block XOR ipad / opad (bytes == 64), for callers that
  // run the compression themselves (sha256_mb.h's hmac_sha256_many). Key material: do not log.
  const Sha256::State& inner_state() const noexcept { return inner_; }
  const Sha256::State& outer_state() const noexcept { return outer_; }

 private:
  Sha256 ctx_;
  Sha256::State inner_, outer_;
  ShaImpl impl_;
};

}  // namespace aesxfer::crypto
