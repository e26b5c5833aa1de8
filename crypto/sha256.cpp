// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104).
//
// The compression function is chosen once per object: ShaImpl::best is what dispatch() chose,
// SHA-NI (sha256_shani.cpp) when the CPU has it, the portable code below otherwise. Whole blocks of the input
// are handed to the compression function in one call so that the SHA-NI loop keeps its state in registers.
#include "crypto/sha256.h"

#include <cstring>

#include "crypto/cpu.h"
#include "crypto/sha256_k.h"
#include "crypto/util.h"

namespace aesxfer::crypto {

namespace detail {
// Defined in sha256_shani.cpp (compiled with -msha -msse4.1 -mssse3); call only when cpu().shani.
void sha256_compress_shani(uint32_t h[8], const uint8_t* blocks, size_t n) noexcept;
// The portable compression below, also used by sha256_mb.cpp.
void sha256_compress_portable(uint32_t h[8], const uint8_t* blocks, size_t n) noexcept;
}  // namespace detail

namespace {

constexpr uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline uint32_t rotr(uint32_t x, int n) noexcept { return (x >> n) | (x << (32 - n)); }

void compress_portable(uint32_t h[8], const uint8_t* p, size_t n) noexcept {
  uint32_t w[16];
  for (; n; --n, p += 64) {
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; ++t) {
      uint32_t wt;
      if (t < 16) {
        wt = w[t] = load_be32(p + 4 * t);
      } else {
        const uint32_t w15 = w[(t - 15) & 15], w2 = w[(t - 2) & 15];
        const uint32_t s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >> 3);
        const uint32_t s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >> 10);
        wt = w[t & 15] = w[t & 15] + s0 + w[(t - 7) & 15] + s1;
      }
      const uint32_t t1 =
          hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + detail::kSha256Round[t] + wt;
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
  }
  secure_zero(w, sizeof w);
}

using CompressFn = void (*)(uint32_t*, const uint8_t*, size_t) noexcept;

ShaImpl resolve(ShaImpl impl) noexcept {
  if (impl == ShaImpl::best) return dispatch().sha256;
  if (impl == ShaImpl::shani && !sha256_impl_available(ShaImpl::shani)) return ShaImpl::software;
  return impl;
}

CompressFn compress_for(ShaImpl impl) noexcept {
  return resolve(impl) == ShaImpl::shani ? &detail::sha256_compress_shani : &compress_portable;
}

}  // namespace

ShaImpl detail::sha256_pick(bool portable) noexcept {
  return !portable && sha256_impl_available(ShaImpl::shani) ? ShaImpl::shani : ShaImpl::software;
}

void detail::sha256_compress_portable(uint32_t h[8], const uint8_t* blocks, size_t n) noexcept {
  compress_portable(h, blocks, n);
}

const char* sha256_impl_name(ShaImpl impl) noexcept {
  return resolve(impl) == ShaImpl::shani ? "shani" : "software";
}

bool sha256_impl_available(ShaImpl impl) noexcept {
  switch (impl) {
    case ShaImpl::shani:
      return cpu().shani && cpu().sse41 && cpu().ssse3;
    case ShaImpl::best:
    case ShaImpl::software:
      return true;
  }
  return false;
}

// An unavailable implementation (shani on a CPU without it) falls back to software; impl() says
// which one runs.
Sha256::Sha256(ShaImpl impl) noexcept : compress_(compress_for(impl)) { reset(); }

Sha256::~Sha256() {
  secure_zero(h_, sizeof h_);
  secure_zero(buf_, sizeof buf_);
  total_ = 0;
  buf_len_ = 0;
}

void Sha256::reset() noexcept {
  std::memcpy(h_, kInit, sizeof h_);
  total_ = 0;
  buf_len_ = 0;
}

const char* Sha256::impl() const noexcept { return compress_ == &compress_portable ? "software" : "shani"; }

void Sha256::update(const void* data, size_t len) noexcept {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += len;
  if (buf_len_) {
    const size_t take = len < kBlockLen - buf_len_ ? len : kBlockLen - buf_len_;
    std::memcpy(buf_ + buf_len_, p, take);
    buf_len_ += take;
    p += take;
    len -= take;
    if (buf_len_ < kBlockLen) return;
    compress_(h_, buf_, 1);
    buf_len_ = 0;
  }
  if (len >= kBlockLen) {
    const size_t blocks = len / kBlockLen;
    compress_(h_, p, blocks);
    p += blocks * kBlockLen;
    len -= blocks * kBlockLen;
  }
  if (len) {
    std::memcpy(buf_, p, len);
    buf_len_ = len;
  }
}

void Sha256::final(uint8_t out[32]) noexcept {
  const uint64_t bits = total_ * 8;
  uint8_t pad[2 * kBlockLen] = {};
  std::memcpy(pad, buf_, buf_len_);
  pad[buf_len_] = 0x80;
  const size_t blocks = buf_len_ + 1 + 8 <= kBlockLen ? 1 : 2;
  store_be64(pad + blocks * kBlockLen - 8, bits);
  compress_(h_, pad, blocks);
  for (int i = 0; i < 8; ++i) store_be32(out + 4 * i, h_[i]);
  secure_zero(pad, sizeof pad);
  secure_zero(buf_, sizeof buf_);
  buf_len_ = 0;
}

void Sha256::digest(const void* data, size_t len, uint8_t out[32], ShaImpl impl) noexcept {
  Sha256 s(impl);
  s.update(data, len);
  s.final(out);
}

// Only meaningful on a block boundary (as HMAC uses it): bytes counts whole compressed blocks.
Sha256::State Sha256::state() const noexcept {
  State s;
  std::memcpy(s.h, h_, sizeof s.h);
  s.bytes = total_ - buf_len_;
  return s;
}

void Sha256::set_state(const State& s) noexcept {
  std::memcpy(h_, s.h, sizeof h_);
  total_ = s.bytes;
  buf_len_ = 0;
}

HmacSha256::HmacSha256(const uint8_t* key, size_t key_len, ShaImpl impl) noexcept : ctx_(impl), impl_(impl) {
  uint8_t k[Sha256::kBlockLen] = {};
  if (key_len > Sha256::kBlockLen) {
    ctx_.update(key, key_len);
    ctx_.final(k);
    ctx_.reset();
  } else if (key_len) {
    std::memcpy(k, key, key_len);
  }
  uint8_t pad[Sha256::kBlockLen];
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = uint8_t(k[i] ^ 0x36);
  ctx_.update(pad, sizeof pad);
  inner_ = ctx_.state();
  ctx_.reset();
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = uint8_t(k[i] ^ 0x5c);
  ctx_.update(pad, sizeof pad);
  outer_ = ctx_.state();
  ctx_.set_state(inner_);
  secure_zero(k, sizeof k);
  secure_zero(pad, sizeof pad);
}

HmacSha256::~HmacSha256() {
  secure_zero(&inner_, sizeof inner_);
  secure_zero(&outer_, sizeof outer_);
}

void HmacSha256::begin() noexcept { ctx_.set_state(inner_); }

void HmacSha256::update(const void* data, size_t len) noexcept { ctx_.update(data, len); }

void HmacSha256::finish(uint8_t tag[32]) noexcept {
  uint8_t inner[Sha256::kDigestLen];
  ctx_.final(inner);
  ctx_.set_state(outer_);
  ctx_.update(inner, sizeof inner);
  ctx_.final(tag);
  ctx_.set_state(inner_);  // ready for the next message without begin()
  secure_zero(inner, sizeof inner);
}

void HmacSha256::mac(const void* data, size_t len, uint8_t tag[32]) noexcept {
  begin();
  update(data, len);
  finish(tag);
}

}  // namespace aesxfer::crypto
