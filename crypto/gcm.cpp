// AES-128-GCM (NIST SP 800-38D): the mode itself, the choice of GHASH, and the portable
// constant-time GHASH.
//
// Field representation: a 16-byte GHASH block loaded big-endian is a 128-bit integer whose bit
// 127 - i is the coefficient of x^i (GCM's bit-reflected convention). The carry-less product of two
// such integers, shifted left by one, holds the product polynomial in the same reflected form over
// 256 bits; reduce() folds the low 128 bits (coefficients x^128..x^255) back with
// x^128 = x^7 + x^2 + x + 1.
//
// The portable multiply uses integer multiplications on operands with "holes" (only every fourth
// bit kept) so that carries never reach a bit that is used: no tables, no secret-dependent branches.
#include "crypto/gcm.h"

#include <cstring>

#include "crypto/cpu.h"
#include "crypto/ghash.h"
#include "crypto/util.h"

namespace aesxfer::crypto {
namespace detail {

namespace {

// Low 64 bits of the carry-less product of x and y.
inline uint64_t bmul64(uint64_t x, uint64_t y) noexcept {
  constexpr uint64_t m1 = 0x1111111111111111ull, m2 = 0x2222222222222222ull;
  constexpr uint64_t m4 = 0x4444444444444444ull, m8 = 0x8888888888888888ull;
  const uint64_t x0 = x & m1, x1 = x & m2, x2 = x & m4, x3 = x & m8;
  const uint64_t y0 = y & m1, y1 = y & m2, y2 = y & m4, y3 = y & m8;
  // Each product keeps at most 15 terms per used column below bit 64 (16 at bit 60, whose
  // carry leaves the word), so a column's sum never spills into the next used column.
  uint64_t z0 = (x0 * y0) ^ (x1 * y3) ^ (x2 * y2) ^ (x3 * y1);
  uint64_t z1 = (x0 * y1) ^ (x1 * y0) ^ (x2 * y3) ^ (x3 * y2);
  uint64_t z2 = (x0 * y2) ^ (x1 * y1) ^ (x2 * y0) ^ (x3 * y3);
  uint64_t z3 = (x0 * y3) ^ (x1 * y2) ^ (x2 * y1) ^ (x3 * y0);
  return (z0 & m1) | (z1 & m2) | (z2 & m4) | (z3 & m8);
}

inline uint64_t rev64(uint64_t x) noexcept {
  x = ((x & 0x5555555555555555ull) << 1) | ((x >> 1) & 0x5555555555555555ull);
  x = ((x & 0x3333333333333333ull) << 2) | ((x >> 2) & 0x3333333333333333ull);
  x = ((x & 0x0F0F0F0F0F0F0F0Full) << 4) | ((x >> 4) & 0x0F0F0F0F0F0F0F0Full);
  return __builtin_bswap64(x);
}

// Full 128-bit carry-less product of two 64-bit values: hi:lo.
inline void clmul64(uint64_t x, uint64_t y, uint64_t xr, uint64_t yr, uint64_t& hi, uint64_t& lo) noexcept {
  lo = bmul64(x, y);
  hi = rev64(bmul64(xr, yr)) >> 1;
}

// a = a * b in GF(2^128), both as (hi, lo) big-endian halves; br holds rev64 of b's halves
// and of their XOR (precomputed per key).
struct Elem {
  uint64_t hi, lo;
};

inline Elem gf_mul(Elem a, const Elem& b, uint64_t b_mid, const uint64_t br[3]) noexcept {
  const uint64_t a_mid = a.hi ^ a.lo;
  uint64_t p0h, p0l, p1h, p1l, p2h, p2l;
  clmul64(a.lo, b.lo, rev64(a.lo), br[0], p0h, p0l);
  clmul64(a.hi, b.hi, rev64(a.hi), br[1], p1h, p1l);
  clmul64(a_mid, b_mid, rev64(a_mid), br[2], p2h, p2l);
  p2h ^= p0h ^ p1h;
  p2l ^= p0l ^ p1l;
  // 256-bit product z3:z2:z1:z0.
  uint64_t z0 = p0l, z1 = p0h ^ p2l, z2 = p1l ^ p2h, z3 = p1h;
  // Shift left by one (reflected representation).
  z3 = (z3 << 1) | (z2 >> 63);
  z2 = (z2 << 1) | (z1 >> 63);
  z1 = (z1 << 1) | (z0 >> 63);
  z0 <<= 1;
  // Reduce: T = Lo + (the bits Lo >> {1,2,7} would shift out), R = Hi + T + T>>1 + T>>2 + T>>7.
  const uint64_t t1 = z1 ^ (z0 << 63) ^ (z0 << 62) ^ (z0 << 57), t0 = z0;
  Elem r;
  r.hi = z3 ^ t1 ^ (t1 >> 1) ^ (t1 >> 2) ^ (t1 >> 7);
  r.lo = z2 ^ t0 ^ (t0 >> 1) ^ (t0 >> 2) ^ (t0 >> 7) ^ (t1 << 63) ^ (t1 << 62) ^ (t1 << 57);
  return r;
}

struct PortableKey {
  Elem h;
  uint64_t h_mid;
  uint64_t hr[3];
};
static_assert(sizeof(PortableKey) <= sizeof(GhashKey));

void ghash_portable_init(GhashKey* k, const uint8_t h[16]) noexcept {
  PortableKey p;
  p.h.hi = load_be64(h);
  p.h.lo = load_be64(h + 8);
  p.h_mid = p.h.hi ^ p.h.lo;
  p.hr[0] = rev64(p.h.lo);
  p.hr[1] = rev64(p.h.hi);
  p.hr[2] = rev64(p.h_mid);
  std::memcpy(k->data, &p, sizeof(p));
  secure_zero(&p, sizeof(p));
}

void ghash_portable_blocks(const GhashKey* k, uint8_t y[16], const uint8_t* in, size_t blocks) noexcept {
  PortableKey p;
  std::memcpy(&p, k->data, sizeof(p));
  Elem acc{load_be64(y), load_be64(y + 8)};
  for (; blocks > 0; --blocks, in += 16) {
    acc.hi ^= load_be64(in);
    acc.lo ^= load_be64(in + 8);
    acc = gf_mul(acc, p.h, p.h_mid, p.hr);
  }
  store_be64(y, acc.hi);
  store_be64(y + 8, acc.lo);
  secure_zero(&p, sizeof(p));
}

class Gcm final : public Aes128Gcm {
 public:
  Gcm(std::unique_ptr<BlockCipher> aes, GhashInitFn init, GhashBlocksFn blocks, const char* name) noexcept
      : aes_(std::move(aes)), ghash_(blocks), name_(name) {
    uint8_t h[16] = {0};
    aes_->encrypt_blocks(h, h, 1);
    init(&key_, h);
    secure_zero(h, sizeof(h));
  }
  ~Gcm() override { secure_zero(&key_, sizeof(key_)); }

  const char* impl() const noexcept override { return name_; }

  void seal(const uint8_t nonce[12], const uint8_t* aad, size_t aad_len, const uint8_t* in, uint8_t* out,
            size_t len, uint8_t* tag) const noexcept override {
    uint8_t j0[16], ctr[16], y[16] = {0};
    make_j0(nonce, j0, ctr);
    ghash_padded(y, aad, aad_len);
    // Encrypt and hash in chunks so that the ciphertext is still in cache when it is hashed.
    size_t done = 0;
    while (done < len) {
      const size_t n = len - done < kChunk ? len - done : kChunk;
      aes_->ctr_xor(ctr, in + done, out + done, n);
      ghash_padded(y, out + done, n);  // n is a multiple of 16 except for the last chunk
      done += n;
    }
    finish(y, j0, aad_len, len, tag);
    secure_zero(y, sizeof(y));
  }

  bool open(const uint8_t nonce[12], const uint8_t* aad, size_t aad_len, const uint8_t* in, uint8_t* out,
            size_t len, const uint8_t* tag) const noexcept override {
    uint8_t j0[16], ctr[16], y[16] = {0}, want[16];
    make_j0(nonce, j0, ctr);
    ghash_padded(y, aad, aad_len);
    ghash_padded(y, in, len);
    finish(y, j0, aad_len, len, want);
    const bool ok = ct_equal(want, tag, 16);
    secure_zero(want, sizeof(want));
    secure_zero(y, sizeof(y));
    if (!ok) return false;
    aes_->ctr_xor(ctr, in, out, len);
    return true;
  }

 private:
  static constexpr size_t kChunk = 16 * 1024;
  std::unique_ptr<BlockCipher> aes_;
  GhashKey key_;
  GhashBlocksFn ghash_;
  const char* name_;

  static void make_j0(const uint8_t nonce[12], uint8_t j0[16], uint8_t ctr[16]) noexcept {
    std::memcpy(j0, nonce, 12);
    j0[12] = j0[13] = j0[14] = 0;
    j0[15] = 1;
    std::memcpy(ctr, j0, 16);
    ctr[15] = 2;
  }

  // GHASH over data, zero-padding a final partial block.
  void ghash_padded(uint8_t y[16], const uint8_t* data, size_t len) const noexcept {
    const size_t full = len / 16;
    if (full) ghash_(&key_, y, data, full);
    if (len % 16) {
      uint8_t last[16] = {0};
      std::memcpy(last, data + 16 * full, len % 16);
      ghash_(&key_, y, last, 1);
      secure_zero(last, sizeof(last));
    }
  }

  void finish(uint8_t y[16], const uint8_t j0[16], size_t aad_len, size_t len,
              uint8_t tag[16]) const noexcept {
    uint8_t lens[16];
    store_be64(lens, uint64_t(aad_len) * 8);
    store_be64(lens + 8, uint64_t(len) * 8);
    ghash_(&key_, y, lens, 1);
    uint8_t ek[16];
    aes_->encrypt_blocks(j0, ek, 1);
    xor_bytes(tag, y, ek, 16);
    secure_zero(ek, sizeof(ek));
  }
};

}  // namespace
}  // namespace detail

namespace {

struct GhashKernel {
  detail::GhashInitFn init;
  detail::GhashBlocksFn blocks;
};

GhashKernel kernel(GhashImpl g) noexcept {
  switch (g) {
    case GhashImpl::vpclmul:
      return {detail::ghash_pclmul_init, detail::ghash_vpclmul_blocks};
    case GhashImpl::pclmul:
      return {detail::ghash_pclmul_init, detail::ghash_pclmul_blocks};
    case GhashImpl::portable:
      break;
  }
  return {detail::ghash_portable_init, detail::ghash_portable_blocks};
}

std::unique_ptr<Aes128Gcm> make_gcm(const uint8_t key[16], AesImpl aes_impl, GhashImpl g) {
  auto aes = make_aes128(key, aes_impl);
  if (!aes) return nullptr;
  const char* name = aes->impl();
  const GhashKernel k = kernel(g);
  return std::make_unique<detail::Gcm>(std::move(aes), k.init, k.blocks, name);
}

}  // namespace

// The constant-time portable AES implementations keep the portable GHASH; VAES pairs with
// 512-bit VPCLMULQDQ, AES-NI with PCLMULQDQ, where the CPU has them.
GhashImpl detail::ghash_pick(AesImpl aes) noexcept {
  const CpuFeatures& f = cpu();
  const bool pclmul = f.pclmul && f.sse41 && f.ssse3;
  if (aes == AesImpl::vaes && pclmul && f.vpclmul && f.avx512f && f.avx512bw && f.avx512vl)
    return GhashImpl::vpclmul;
  if ((aes == AesImpl::vaes || aes == AesImpl::aesni) && pclmul) return GhashImpl::pclmul;
  return GhashImpl::portable;
}

std::unique_ptr<Aes128Gcm> Aes128Gcm::make(const uint8_t key[16], AesImpl impl) {
  if (impl == AesImpl::best) return make(key, dispatch());
  return make_gcm(key, impl, detail::ghash_pick(impl));
}

std::unique_ptr<Aes128Gcm> Aes128Gcm::make(const uint8_t key[16], const Dispatch& d) {
  return make_gcm(key, d.aes, d.ghash);
}

std::unique_ptr<Aead> make_aes128_gcm_aead(const uint8_t* key, const Dispatch& d) {
  return Aes128Gcm::make(key, d);
}

}  // namespace aesxfer::crypto
