// AES-128 with VAES on 512-bit registers (four blocks per instruction) for the bulk paths:
// ECB, CBC decryption and CTR run 4 x 4 blocks at a time, cbc_encrypt_lanes interleaves up to
// 16 independent chains (4 per register). Single-chain CBC encryption and short tails go to the
// AES-NI code, which this CPU has too (VAES implies AES-NI in practice; dispatch checks both).
// Compiled with AVX-512/VAES flags (file-name suffix); only called when CPUID says so.
// GCC 12's AVX-512 headers pass _mm512_undefined_*() as the pass-through operand of unmasked
// intrinsics, which -Wuninitialized flags once inlined (a GCC bug, fixed later): silence it here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "crypto/aes.h"

#include <immintrin.h>

#include <cstring>
#include <memory>

#include "crypto/cbc_lanes.h"
#include "crypto/ghash.h"
#include "crypto/ghash_clmul.h"
#include "crypto/util.h"

namespace aesxfer::crypto::detail {

void aes128_expand_key(const uint8_t key[16], uint8_t rk[176]) noexcept;
std::unique_ptr<BlockCipher> make_aes128_aesni(const uint8_t key[16]);

namespace {

inline __m512i loadu512(const uint8_t* p) noexcept { return _mm512_loadu_si512(p); }
inline void storeu512(uint8_t* p, __m512i v) noexcept { _mm512_storeu_si512(p, v); }
inline __m128i loadu128(const uint8_t* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void storeu128(uint8_t* p, __m128i v) noexcept { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

inline __m512i bcast128(__m128i x) noexcept {
  const __m512i z = _mm512_zextsi128_si512(x);
  return _mm512_shuffle_i32x4(z, z, 0);
}
// [b3 | a0 a1 a2 a3] shifted down by three blocks: [b3 a0 a1 a2].
inline __m512i prev_blocks(__m512i a, __m512i b) noexcept { return _mm512_maskz_alignr_epi64(0xFF, a, b, 6); }

struct Keys512 {
  __m512i k[11];
};

template <int N>
inline void encN(const Keys512& k, __m512i* x) noexcept {
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) x[j] = _mm512_xor_si512(x[j], k.k[0]);
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) x[j] = _mm512_aesenc_epi128(x[j], k.k[r]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) x[j] = _mm512_aesenclast_epi128(x[j], k.k[10]);
}

template <int N>
inline void decN(const Keys512& k, __m512i* x) noexcept {
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) x[j] = _mm512_xor_si512(x[j], k.k[0]);
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) x[j] = _mm512_aesdec_epi128(x[j], k.k[r]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) x[j] = _mm512_aesdeclast_epi128(x[j], k.k[10]);
}

class AesVaes final : public BlockCipher {
 public:
  explicit AesVaes(const uint8_t key[16]) : ni_(make_aes128_aesni(key)) {
    alignas(16) uint8_t rk[176];
    aes128_expand_key(key, rk);
    __m128i e[11];
    for (int i = 0; i < 11; ++i) e[i] = loadu128(rk + 16 * i);
    for (int i = 0; i < 11; ++i) ek_.k[i] = bcast128(e[i]);
    dk_.k[0] = ek_.k[10];
    for (int i = 1; i < 10; ++i) dk_.k[i] = bcast128(_mm_aesimc_si128(e[10 - i]));
    dk_.k[10] = ek_.k[0];
    secure_zero(rk, sizeof(rk));
    secure_zero(e, sizeof(e));
  }
  ~AesVaes() override {
    secure_zero(&ek_, sizeof(ek_));
    secure_zero(&dk_, sizeof(dk_));
  }

  size_t block_size() const noexcept override { return 16; }
  const char* impl() const noexcept override { return "vaes"; }

  void encrypt_blocks(const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    const Keys512 k = ek_;
    for (; blocks >= 16; blocks -= 16, in += 256, out += 256) {
      __m512i x[4];
      for (int j = 0; j < 4; ++j) x[j] = loadu512(in + 64 * j);
      encN<4>(k, x);
      for (int j = 0; j < 4; ++j) storeu512(out + 64 * j, x[j]);
    }
    for (; blocks >= 4; blocks -= 4, in += 64, out += 64) {
      __m512i x = loadu512(in);
      encN<1>(k, &x);
      storeu512(out, x);
    }
    if (blocks) ni_->encrypt_blocks(in, out, blocks);
  }

  void decrypt_blocks(const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    const Keys512 k = dk_;
    for (; blocks >= 16; blocks -= 16, in += 256, out += 256) {
      __m512i x[4];
      for (int j = 0; j < 4; ++j) x[j] = loadu512(in + 64 * j);
      decN<4>(k, x);
      for (int j = 0; j < 4; ++j) storeu512(out + 64 * j, x[j]);
    }
    for (; blocks >= 4; blocks -= 4, in += 64, out += 64) {
      __m512i x = loadu512(in);
      decN<1>(k, &x);
      storeu512(out, x);
    }
    if (blocks) ni_->decrypt_blocks(in, out, blocks);
  }

  void cbc_encrypt(uint8_t* iv, const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    ni_->cbc_encrypt(iv, in, out, blocks);
  }

  void cbc_decrypt(uint8_t* iv, const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    const Keys512 k = dk_;
    // prev's top 128-bit lane holds the ciphertext block before the next group.
    __m512i prev = bcast128(loadu128(iv));
    for (; blocks >= 16; blocks -= 16, in += 256, out += 256) {
      __m512i c[4], x[4];
      for (int j = 0; j < 4; ++j) x[j] = c[j] = loadu512(in + 64 * j);
      decN<4>(k, x);
      // [p3 | c0 c1 c2 c3] >> 3 blocks = [p3 c0 c1 c2]: the chaining values of group j.
      storeu512(out, _mm512_xor_si512(x[0], prev_blocks(c[0], prev)));
      for (int j = 1; j < 4; ++j)
        storeu512(out + 64 * j, _mm512_xor_si512(x[j], prev_blocks(c[j], c[j - 1])));
      prev = c[3];
    }
    for (; blocks >= 4; blocks -= 4, in += 64, out += 64) {
      const __m512i c = loadu512(in);
      __m512i x = c;
      decN<1>(k, &x);
      storeu512(out, _mm512_xor_si512(x, prev_blocks(c, prev)));
      prev = c;
    }
    alignas(16) uint8_t last[16];
    storeu128(last, _mm512_extracti32x4_epi32(prev, 3));
    ni_->cbc_decrypt(last, in, out, blocks);
    std::memcpy(iv, last, 16);
  }

  void ctr_xor(uint8_t* ctr, const uint8_t* in, uint8_t* out, size_t len) const noexcept override {
    const Keys512 k = ek_;
    const __m512i bswap = bcast128(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i four = _mm512_set_epi64(0, 4, 0, 4, 0, 4, 0, 4);
    while (len >= 256) {
      const __m128i c = _mm_shuffle_epi8(loadu128(ctr), _mm512_castsi512_si128(bswap));
      const uint64_t lo = uint64_t(_mm_cvtsi128_si64(c));
      const uint64_t hi = uint64_t(_mm_extract_epi64(c, 1));
      // Fast path while the low 64 bits do not wrap inside the batch; otherwise the AES-NI code
      // (which carries into the high half) takes over for one batch. Constant time in practice
      // (docs/SECURITY.md): the counters the record layer makes have low 32 bits below 2^17 + 3
      // (records are at most 2^16 + 1 blocks), so this test never holds and never varies with the
      // secret iv salt the counter derives from.
      if (lo > ~uint64_t(0) - 16 * 64) {
        ni_->ctr_xor(ctr, in, out, 256);
        in += 256;
        out += 256;
        len -= 256;
        continue;
      }
      __m512i base = _mm512_set_epi64(int64_t(hi), int64_t(lo + 3), int64_t(hi), int64_t(lo + 2), int64_t(hi),
                                      int64_t(lo + 1), int64_t(hi), int64_t(lo));
      uint64_t n = 0;
      for (; len >= 256 && n < 64; len -= 256, in += 256, out += 256, n += 16) {
        __m512i x[4];
        for (int j = 0; j < 4; ++j) {
          x[j] = _mm512_shuffle_epi8(base, bswap);
          base = _mm512_add_epi64(base, four);
        }
        encN<4>(k, x);
        for (int j = 0; j < 4; ++j) storeu512(out + 64 * j, _mm512_xor_si512(x[j], loadu512(in + 64 * j)));
      }
      storeu128(
          ctr, _mm_shuffle_epi8(_mm_set_epi64x(int64_t(hi), int64_t(lo + n)), _mm512_castsi512_si128(bswap)));
    }
    if (len) ni_->ctr_xor(ctr, in, out, len);
  }

  void cbc_encrypt_lanes(CbcLane* lanes, size_t n) const noexcept override;
  size_t cbc_lanes() const noexcept override { return 16; }

 private:
  std::unique_ptr<BlockCipher> ni_;
  Keys512 ek_;
  Keys512 dk_;
};

// `steps` CBC encryptions on 16 chains at once, four per register, from the chaining values in c
// (updated); every in/out pointer advances by its stride (0 for an idle lane).
__attribute__((always_inline)) inline void cbc16_steps(const Keys512& k, __m512i c[4], const uint8_t** in,
                                                       uint8_t** out, const size_t* stride,
                                                       size_t steps) noexcept {
  for (size_t s = 0; s < steps; ++s) {
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      __m512i p = _mm512_zextsi128_si512(loadu128(in[4 * g]));
      p = _mm512_inserti32x4(p, loadu128(in[4 * g + 1]), 1);
      p = _mm512_inserti32x4(p, loadu128(in[4 * g + 2]), 2);
      p = _mm512_inserti32x4(p, loadu128(in[4 * g + 3]), 3);
      c[g] = _mm512_xor_si512(c[g], p);
    }
    encN<4>(k, c);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      storeu128(out[4 * g], _mm512_castsi512_si128(c[g]));
      storeu128(out[4 * g + 1], _mm512_extracti32x4_epi32(c[g], 1));
      storeu128(out[4 * g + 2], _mm512_extracti32x4_epi32(c[g], 2));
      storeu128(out[4 * g + 3], _mm512_extracti32x4_epi32(c[g], 3));
    }
#pragma GCC unroll 16
    for (size_t j = 0; j < 16; ++j) {
      in[j] += stride[j];
      out[j] += stride[j];
    }
  }
}

// Up to 16 chains at once, four per register; when 8 or fewer are left the AES-NI 8-lane code
// finishes them.
void AesVaes::cbc_encrypt_lanes(CbcLane* lanes, size_t n) const noexcept {
  constexpr size_t kWidth = 16;
  CbcLane* act[kWidth];
  size_t done[kWidth];
  size_t na = 0, next = 0;
  const Keys512 k = ek_;
  alignas(16) uint8_t dummy_in[16] = {0}, dummy_out[16], dummy_iv[16] = {0};
  for (;;) {
    na = refill_lanes(lanes, n, next, act, done, na, kWidth);
    if (na <= 8) {
      CbcLane rest[8];
      for (size_t j = 0; j < na; ++j)
        rest[j] = CbcLane{act[j]->iv, act[j]->in + 16 * done[j], act[j]->out + 16 * done[j],
                          act[j]->blocks - done[j]};
      if (na) ni_->cbc_encrypt_lanes(rest, na);
      break;
    }
    size_t steps = ~size_t(0);
    for (size_t j = 0; j < na; ++j)
      steps = act[j]->blocks - done[j] < steps ? act[j]->blocks - done[j] : steps;
    const uint8_t* in[kWidth];
    uint8_t* out[kWidth];
    size_t stride[kWidth];
    __m128i iv[kWidth];
    for (size_t j = 0; j < kWidth; ++j) {
      if (j < na) {
        in[j] = act[j]->in + 16 * done[j];
        out[j] = act[j]->out + 16 * done[j];
        stride[j] = 16;
        iv[j] = loadu128(act[j]->iv);
      } else {
        in[j] = dummy_in;
        out[j] = dummy_out;
        stride[j] = 0;
        iv[j] = loadu128(dummy_iv);
      }
    }
    __m512i c[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      c[g] = _mm512_zextsi128_si512(iv[4 * g]);
      c[g] = _mm512_inserti32x4(c[g], iv[4 * g + 1], 1);
      c[g] = _mm512_inserti32x4(c[g], iv[4 * g + 2], 2);
      c[g] = _mm512_inserti32x4(c[g], iv[4 * g + 3], 3);
    }
    cbc16_steps(k, c, in, out, stride, steps);
    for (size_t j = 0; j < na; ++j) {
      const int g = int(j / 4), lane = int(j % 4);
      alignas(16) uint8_t tmp[64];
      _mm512_store_si512(tmp, c[g]);
      std::memcpy(act[j]->iv, tmp + 16 * lane, 16);
      done[j] += steps;
    }
    na = retire_done_lanes(act, done, na);
  }
  secure_zero(dummy_out, sizeof(dummy_out));
}

}  // namespace

std::unique_ptr<BlockCipher> make_aes128_vaes(const uint8_t key[16]) {
  return std::make_unique<AesVaes>(key);
}

// ---- GHASH with VPCLMULQDQ (used by gcm.cpp for the vaes implementation) ----
// Same representation as gcm_aesni.cpp, and the same reduction (crypto/ghash_clmul.h). Thirty-two blocks per
// iteration in eight zmm registers are multiplied by H^32..H^1 (computed by ghash_pclmul_init), their 256-bit
// products XORed together and reduced once. The serial part of GHASH (fold, reduce, XOR into the
// next group) is a chain of about 35 cycles, so how many blocks share one reduction sets the
// speed. On the Zen 4 development machine, 16 KiB at a time: 8 blocks 9.4 GB/s, 16 blocks
// 17.6 GB/s, 32 blocks 30 GB/s, 64 blocks 31.5 GB/s (VPCLMULQDQ throughput). Groups of 16, 8 and
// single blocks finish the tail.

namespace {

inline __m128i fold4(__m512i v) noexcept {
  const __m256i h = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  return _mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// Key register r of a group of 4R blocks: lane j multiplies block 4r + j, so it holds
// H^(4R - 4r - j) = hp[4R - 1 - 4r - j].
template <int R>
inline void group_keys(const __m128i* hp, __m512i hk[R]) noexcept {
  for (int r = 0; r < R; ++r) {
    __m512i v = _mm512_zextsi128_si512(hp[4 * R - 1 - 4 * r]);
    v = _mm512_inserti32x4(v, hp[4 * R - 2 - 4 * r], 1);
    v = _mm512_inserti32x4(v, hp[4 * R - 3 - 4 * r], 2);
    hk[r] = _mm512_inserti32x4(v, hp[4 * R - 4 - 4 * r], 3);
  }
}

// acc' = (acc + X_1) H^4R + X_2 H^(4R-1) + ... + X_4R H, one reduction.
template <int R>
inline __m128i ghash_group(const __m512i hk[R], __m128i acc, const uint8_t* in, __m512i bswap) noexcept {
  __m512i lo = _mm512_setzero_si512(), hi = lo, mid = lo;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __m512i x = _mm512_shuffle_epi8(loadu512(in + 64 * r), bswap);
    if (r == 0) x = _mm512_xor_si512(x, _mm512_zextsi128_si512(acc));
    lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(x, hk[r], 0x00));
    hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(x, hk[r], 0x11));
    mid = _mm512_ternarylogic_epi64(mid, _mm512_clmulepi64_epi128(x, hk[r], 0x01),
                                    _mm512_clmulepi64_epi128(x, hk[r], 0x10), 0x96);
  }
  return ghash_reduce(fold4(hi), fold4(mid), fold4(lo));
}

// One group of 4R blocks from the tail, if that many are left.
template <int R>
inline void ghash_tail_group(const __m128i* hp, __m128i& acc, const uint8_t*& in, size_t& blocks,
                             __m512i bswap) noexcept {
  if (blocks < 4 * R) return;
  __m512i hk[R];
  group_keys<R>(hp, hk);
  acc = ghash_group<R>(hk, acc, in, bswap);
  blocks -= 4 * R;
  in += 64 * R;
}

}  // namespace

void ghash_vpclmul_blocks(const GhashKey* k, uint8_t y[16], const uint8_t* in, size_t blocks) noexcept {
  static_assert(kGhashPowers >= 32);
  const __m128i* hp = reinterpret_cast<const __m128i*>(k->data);  // hp[i] = H^(i+1)
  const __m128i bs = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i bswap = bcast128(bs);
  __m128i acc = _mm_shuffle_epi8(loadu128(y), bs);
  if (blocks >= 32) {
    __m512i hk[8];
    group_keys<8>(hp, hk);
    for (; blocks >= 32; blocks -= 32, in += 512) acc = ghash_group<8>(hk, acc, in, bswap);
  }
  ghash_tail_group<4>(hp, acc, in, blocks, bswap);
  ghash_tail_group<2>(hp, acc, in, blocks, bswap);
  for (; blocks > 0; --blocks, in += 16) {
    const __m128i x = _mm_xor_si128(acc, _mm_shuffle_epi8(loadu128(in), bs));
    const __m128i h = hp[0];
    const __m128i lo = _mm_clmulepi64_si128(x, h, 0x00), hi = _mm_clmulepi64_si128(x, h, 0x11);
    const __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(x, h, 0x01), _mm_clmulepi64_si128(x, h, 0x10));
    acc = ghash_reduce(hi, mid, lo);
  }
  storeu128(y, _mm_shuffle_epi8(acc, bs));
}

}  // namespace aesxfer::crypto::detail

#pragma GCC diagnostic pop
