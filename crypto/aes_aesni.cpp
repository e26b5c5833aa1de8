// AES-128 with AES-NI. ECB, CBC decryption and CTR keep 8 blocks in flight so that the
// aesenc/aesdec latency is hidden; CBC encryption of one chain is serial by nature, so
// cbc_encrypt_lanes interleaves up to 8 independent chains instead.
// Compiled with -maes -mpclmul -msse4.1 -mssse3 (file-name suffix); only called when CPUID says so.
#include <immintrin.h>
#include <wmmintrin.h>

#include <cstring>
#include <memory>

#include "crypto/aes.h"
#include "crypto/cbc_lanes.h"
#include "crypto/util.h"

namespace aesxfer::crypto::detail {

void aes128_expand_key(const uint8_t key[16], uint8_t rk[176]) noexcept;

namespace {

inline __m128i loadu(const uint8_t* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void storeu(uint8_t* p, __m128i v) noexcept { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

// A key schedule held by value: copied into a local at the start of each routine so that the
// compiler keeps it in registers (stores through `out` may alias the object's members otherwise,
// forcing a reload of every round key after each store).
struct Keys {
  __m128i k[11];
};

inline __m128i enc1(const Keys& k, __m128i x) noexcept {
  x = _mm_xor_si128(x, k.k[0]);
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) x = _mm_aesenc_si128(x, k.k[r]);
  return _mm_aesenclast_si128(x, k.k[10]);
}
inline __m128i dec1(const Keys& k, __m128i x) noexcept {
  x = _mm_xor_si128(x, k.k[0]);
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) x = _mm_aesdec_si128(x, k.k[r]);
  return _mm_aesdeclast_si128(x, k.k[10]);
}
template <int N>
inline void encN(const Keys& k, __m128i* x) noexcept {
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) x[j] = _mm_xor_si128(x[j], k.k[0]);
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) x[j] = _mm_aesenc_si128(x[j], k.k[r]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) x[j] = _mm_aesenclast_si128(x[j], k.k[10]);
}
template <int N>
inline void decN(const Keys& k, __m128i* x) noexcept {
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) x[j] = _mm_xor_si128(x[j], k.k[0]);
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) x[j] = _mm_aesdec_si128(x[j], k.k[r]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) x[j] = _mm_aesdeclast_si128(x[j], k.k[10]);
}

class AesNi final : public BlockCipher {
 public:
  explicit AesNi(const uint8_t key[16]) noexcept {
    alignas(16) uint8_t rk[176];
    aes128_expand_key(key, rk);
    for (int i = 0; i < 11; ++i) ek_.k[i] = _mm_load_si128(reinterpret_cast<const __m128i*>(rk + 16 * i));
    dk_.k[0] = ek_.k[10];
    for (int i = 1; i < 10; ++i) dk_.k[i] = _mm_aesimc_si128(ek_.k[10 - i]);
    dk_.k[10] = ek_.k[0];
    secure_zero(rk, sizeof(rk));
  }
  ~AesNi() override {
    secure_zero(&ek_, sizeof(ek_));
    secure_zero(&dk_, sizeof(dk_));
  }

  size_t block_size() const noexcept override { return 16; }
  const char* impl() const noexcept override { return "aesni"; }

  void encrypt_blocks(const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    const Keys k = ek_;
    for (; blocks >= 8; blocks -= 8, in += 128, out += 128) {
      __m128i x[8];
      for (int j = 0; j < 8; ++j) x[j] = loadu(in + 16 * j);
      encN<8>(k, x);
      for (int j = 0; j < 8; ++j) storeu(out + 16 * j, x[j]);
    }
    for (; blocks > 0; --blocks, in += 16, out += 16) storeu(out, enc1(k, loadu(in)));
  }

  void decrypt_blocks(const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    const Keys k = dk_;
    for (; blocks >= 8; blocks -= 8, in += 128, out += 128) {
      __m128i x[8];
      for (int j = 0; j < 8; ++j) x[j] = loadu(in + 16 * j);
      decN<8>(k, x);
      for (int j = 0; j < 8; ++j) storeu(out + 16 * j, x[j]);
    }
    for (; blocks > 0; --blocks, in += 16, out += 16) storeu(out, dec1(k, loadu(in)));
  }

  void cbc_encrypt(uint8_t* iv, const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    const Keys k = ek_;
    __m128i c = loadu(iv);
    for (; blocks > 0; --blocks, in += 16, out += 16) {
      c = enc1(k, _mm_xor_si128(c, loadu(in)));
      storeu(out, c);
    }
    storeu(iv, c);
  }

  void cbc_decrypt(uint8_t* iv, const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    const Keys k = dk_;
    __m128i prev = loadu(iv);
    for (; blocks >= 8; blocks -= 8, in += 128, out += 128) {
      __m128i c[8], x[8];
      for (int j = 0; j < 8; ++j) x[j] = c[j] = loadu(in + 16 * j);
      decN<8>(k, x);
      storeu(out, _mm_xor_si128(x[0], prev));
      for (int j = 1; j < 8; ++j) storeu(out + 16 * j, _mm_xor_si128(x[j], c[j - 1]));
      prev = c[7];
    }
    for (; blocks > 0; --blocks, in += 16, out += 16) {
      const __m128i c = loadu(in);
      storeu(out, _mm_xor_si128(dec1(k, c), prev));
      prev = c;
    }
    storeu(iv, prev);
  }

  void cbc_encrypt_lanes(CbcLane* lanes, size_t n) const noexcept override;

  void ctr_xor(uint8_t* ctr, const uint8_t* in, uint8_t* out, size_t len) const noexcept override {
    const Keys k = ek_;
    const __m128i bswap = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // The counter as a 128-bit little-endian integer in two 64-bit halves.
    const __m128i c = _mm_shuffle_epi8(loadu(ctr), bswap);
    uint64_t lo = uint64_t(_mm_cvtsi128_si64(c));
    uint64_t hi = uint64_t(_mm_extract_epi64(c, 1));
    auto block = [&](uint64_t add) {
      uint64_t h = hi, l = lo;
      add128(h, l, add);
      return _mm_shuffle_epi8(_mm_set_epi64x(int64_t(h), int64_t(l)), bswap);
    };
    auto advance = [&](uint64_t add) { add128(hi, lo, add); };
    for (; len >= 128; len -= 128, in += 128, out += 128) {
      __m128i x[8];
      for (int j = 0; j < 8; ++j) x[j] = block(uint64_t(j));
      advance(8);
      encN<8>(k, x);
      for (int j = 0; j < 8; ++j) storeu(out + 16 * j, _mm_xor_si128(x[j], loadu(in + 16 * j)));
    }
    for (; len >= 16; len -= 16, in += 16, out += 16) {
      const __m128i ks = enc1(k, block(0));
      advance(1);
      storeu(out, _mm_xor_si128(ks, loadu(in)));
    }
    if (len > 0) {
      alignas(16) uint8_t ks[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(ks), enc1(k, block(0)));
      advance(1);
      xor_bytes(out, in, ks, len);
      secure_zero(ks, sizeof(ks));
    }
    storeu(ctr, block(0));
  }

 private:
  Keys ek_;
  Keys dk_;

  // Runs `steps` blocks on each of N lanes at once (every lane has at least `steps` left).
  template <int N>
  void lanes_step(CbcLane* const* l, size_t* done, size_t steps) const noexcept {
    const Keys k = ek_;
    __m128i c[N];
    const uint8_t* in[N];
    uint8_t* out[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      c[j] = loadu(l[j]->iv);
      in[j] = l[j]->in + 16 * done[j];
      out[j] = l[j]->out + 16 * done[j];
    }
    for (size_t s = 0; s < steps; ++s) {
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) c[j] = _mm_xor_si128(c[j], loadu(in[j] + 16 * s));
      encN<N>(k, c);
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) storeu(out[j] + 16 * s, c[j]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      storeu(l[j]->iv, c[j]);
      done[j] += steps;
    }
  }
};

void AesNi::cbc_encrypt_lanes(CbcLane* lanes, size_t n) const noexcept {
  schedule_cbc_lanes<8>(lanes, n, [this]<int N>(CbcLane* const* act, size_t* done, size_t steps) {
    lanes_step<N>(act, done, steps);
  });
}

}  // namespace

std::unique_ptr<BlockCipher> make_aes128_aesni(const uint8_t key[16]) { return std::make_unique<AesNi>(key); }

}  // namespace aesxfer::crypto::detail
