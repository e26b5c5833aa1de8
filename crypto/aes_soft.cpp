// Constant-time software AES-128: bitsliced, four blocks in parallel in eight 64-bit words.
//
// Layout: plane q[i] holds bit i of all 64 state bytes of four blocks. State byte j of block b
// (row r = j % 4, column c = j / 4) sits at bit position 16*r + 4*c + b, so that
//   - a row is a 16-bit lane: ShiftRows rotates nibbles inside each 16-bit lane;
//   - "the byte one row down in the same column" is a 64-bit rotation by 16: MixColumns is a few
//     rotations and XORs per plane.
// SubBytes is the Boyar-Peralta depth-16 circuit (32 AND, 81 XOR/XNOR), evaluated on the planes.
// Nothing here indexes memory or branches on secret data.
#include <cstring>
#include <memory>

#include "crypto/aes.h"
#include "crypto/util.h"

namespace aesxfer::crypto::detail {

void aes128_expand_key(const uint8_t key[16], uint8_t rk[176]) noexcept;

namespace {

inline uint64_t load_le64(const uint8_t* p) noexcept {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void store_le64(uint8_t* p, uint64_t v) noexcept { std::memcpy(p, &v, 8); }
inline uint64_t rotr64(uint64_t x, int n) noexcept { return (x >> n) | (x << (64 - n)); }

// Forward S-box on eight planes, q[i] = bit i of each byte. Circuit: Boyar and Peralta,
// "A Small Depth-16 Circuit for the AES S-Box" (SEC 2012), with U0 the most significant bit.
void sbox(uint64_t q[8]) noexcept {
  const uint64_t u0 = q[7], u1 = q[6], u2 = q[5], u3 = q[4], u4 = q[3], u5 = q[2], u6 = q[1], u7 = q[0];
  // Top linear layer.
  const uint64_t y14 = u3 ^ u5, y13 = u0 ^ u6, y9 = u0 ^ u3, y8 = u0 ^ u5;
  const uint64_t t0 = u1 ^ u2;
  const uint64_t y1 = t0 ^ u7;
  const uint64_t y4 = y1 ^ u3, y12 = y13 ^ y14, y2 = y1 ^ u0, y5 = y1 ^ u6;
  const uint64_t y3 = y5 ^ y8;
  const uint64_t t1 = u4 ^ y12;
  const uint64_t y15 = t1 ^ u5, y20 = t1 ^ u1;
  const uint64_t y6 = y15 ^ u7, y10 = y15 ^ t0, y11 = y20 ^ y9;
  const uint64_t y7 = u7 ^ y11, y17 = y10 ^ y11, y19 = y10 ^ y8, y16 = t0 ^ y11;
  const uint64_t y21 = y13 ^ y16, y18 = u0 ^ y16;
  // Non-linear middle: inversion in GF(2^8) through GF(2^4).
  const uint64_t t2 = y12 & y15, t3 = y3 & y6, t4 = t3 ^ t2, t5 = y4 & u7, t6 = t5 ^ t2;
  const uint64_t t7 = y13 & y16, t8 = y5 & y1, t9 = t8 ^ t7, t10 = y2 & y7, t11 = t10 ^ t7;
  const uint64_t t12 = y9 & y11, t13 = y14 & y17, t14 = t13 ^ t12, t15 = y8 & y10, t16 = t15 ^ t12;
  const uint64_t t17 = t4 ^ t14, t18 = t6 ^ t16, t19 = t9 ^ t14, t20 = t11 ^ t16;
  const uint64_t t21 = t17 ^ y20, t22 = t18 ^ y19, t23 = t19 ^ y21, t24 = t20 ^ y18;
  const uint64_t t25 = t21 ^ t22, t26 = t21 & t23, t27 = t24 ^ t26, t28 = t25 & t27;
  const uint64_t t29 = t28 ^ t22, t30 = t23 ^ t24, t31 = t22 ^ t26, t32 = t31 & t30;
  const uint64_t t33 = t32 ^ t24, t34 = t23 ^ t33, t35 = t27 ^ t33, t36 = t24 & t35;
  const uint64_t t37 = t36 ^ t34, t38 = t27 ^ t36, t39 = t29 & t38, t40 = t25 ^ t39;
  const uint64_t t41 = t40 ^ t37, t42 = t29 ^ t33, t43 = t29 ^ t40, t44 = t33 ^ t37, t45 = t42 ^ t41;
  const uint64_t z0 = t44 & y15, z1 = t37 & y6, z2 = t33 & u7, z3 = t43 & y16, z4 = t40 & y1;
  const uint64_t z5 = t29 & y7, z6 = t42 & y11, z7 = t45 & y17, z8 = t41 & y10, z9 = t44 & y12;
  const uint64_t z10 = t37 & y3, z11 = t33 & y4, z12 = t43 & y13, z13 = t40 & y5, z14 = t29 & y2;
  const uint64_t z15 = t42 & y9, z16 = t45 & y14, z17 = t41 & y8;
  // Bottom linear layer.
  const uint64_t t46 = z15 ^ z16, t47 = z10 ^ z11, t48 = z5 ^ z13, t49 = z9 ^ z10, t50 = z2 ^ z12;
  const uint64_t t51 = z2 ^ z5, t52 = z7 ^ z8, t53 = z0 ^ z3, t54 = z6 ^ z7, t55 = z16 ^ z17;
  const uint64_t t56 = z12 ^ t48, t57 = t50 ^ t53, t58 = z4 ^ t46, t59 = z3 ^ t54, t60 = t46 ^ t57;
  const uint64_t t61 = z14 ^ t57, t62 = t52 ^ t58, t63 = t49 ^ t58, t64 = z4 ^ t59, t65 = t61 ^ t62;
  const uint64_t t66 = z1 ^ t63, t67 = t64 ^ t65;
  const uint64_t s0 = t59 ^ t63, s6 = ~(t56 ^ t62), s7 = ~(t48 ^ t60), s3 = t53 ^ t66;
  const uint64_t s4 = t51 ^ t66, s5 = t47 ^ t65, s1 = ~(t64 ^ s3), s2 = ~(t55 ^ t67);
  q[7] = s0;
  q[6] = s1;
  q[5] = s2;
  q[4] = s3;
  q[3] = s4;
  q[2] = s5;
  q[1] = s6;
  q[0] = s7;
}

// v -> L^-1(v) ^ 0x05, the inverse of the S-box's affine map composed so that
// InvSubBytes(y) = aff(sbox(aff(y))) (both sides of the GF(2^8) inversion).
void inv_affine(uint64_t q[8]) noexcept {
  uint64_t r[8];
  for (int i = 0; i < 8; ++i) r[i] = q[(i + 2) & 7] ^ q[(i + 5) & 7] ^ q[(i + 7) & 7];
  r[0] = ~r[0];
  r[2] = ~r[2];
  for (int i = 0; i < 8; ++i) q[i] = r[i];
}

void inv_sbox(uint64_t q[8]) noexcept {
  inv_affine(q);
  sbox(q);
  inv_affine(q);
}

void shift_rows(uint64_t q[8]) noexcept {
  for (int i = 0; i < 8; ++i) {
    const uint64_t x = q[i];
    q[i] = (x & 0x000000000000FFFFull) | ((x >> 4) & 0x000000000FFF0000ull) |
           ((x << 12) & 0x00000000F0000000ull) | ((x >> 8) & 0x000000FF00000000ull) |
           ((x << 8) & 0x0000FF0000000000ull) | ((x >> 12) & 0x000F000000000000ull) |
           ((x << 4) & 0xFFF0000000000000ull);
  }
}

void inv_shift_rows(uint64_t q[8]) noexcept {
  for (int i = 0; i < 8; ++i) {
    const uint64_t x = q[i];
    q[i] = (x & 0x000000000000FFFFull) | ((x << 4) & 0x00000000FFF00000ull) |
           ((x >> 12) & 0x00000000000F0000ull) | ((x >> 8) & 0x000000FF00000000ull) |
           ((x << 8) & 0x0000FF0000000000ull) | ((x << 12) & 0xF000000000000000ull) |
           ((x >> 4) & 0x0FFF000000000000ull);
  }
}

// Multiplication by x in GF(2^8) (modulus x^8 + x^4 + x^3 + x + 1), on planes.
inline void xtime(const uint64_t a[8], uint64_t r[8]) noexcept {
  const uint64_t hi = a[7];
  r[7] = a[6];
  r[6] = a[5];
  r[5] = a[4];
  r[4] = a[3] ^ hi;
  r[3] = a[2] ^ hi;
  r[2] = a[1];
  r[1] = a[0] ^ hi;
  r[0] = hi;
}

// out_r = 2 a_r + 3 a_{r+1} + a_{r+2} + a_{r+3} = 2 t_r + a_{r+1} + t_{r+2}, with t_r = a_r + a_{r+1}.
void mix_columns(uint64_t q[8]) noexcept {
  uint64_t t[8], t2[8];
  for (int i = 0; i < 8; ++i) t[i] = q[i] ^ rotr64(q[i], 16);
  xtime(t, t2);
  for (int i = 0; i < 8; ++i) q[i] = t2[i] ^ rotr64(q[i], 16) ^ rotr64(t[i], 32);
}

// InvMixColumns = MixColumns after a_r += 4 (a_r + a_{r+2}).
void inv_mix_columns(uint64_t q[8]) noexcept {
  uint64_t w[8], w2[8], w4[8];
  for (int i = 0; i < 8; ++i) w[i] = q[i] ^ rotr64(q[i], 32);
  xtime(w, w2);
  xtime(w2, w4);
  for (int i = 0; i < 8; ++i) q[i] ^= w4[i];
  mix_columns(q);
}

// Transposes the 8x8 bit matrix held in x (bit 8*r + c <-> bit 8*c + r).
inline uint64_t transpose8x8(uint64_t x) noexcept {
  uint64_t t;
  t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

// Transposes the 8x8 byte matrix whose rows are w[0..7] (byte i of w[k] <-> byte k of w[i]).
inline void transpose_bytes(uint64_t w[8]) noexcept {
  for (int k = 0; k < 4; ++k) {
    const uint64_t a = w[k], b = w[k + 4];
    w[k] = (a & 0x00000000FFFFFFFFull) | (b << 32);
    w[k + 4] = (a >> 32) | (b & 0xFFFFFFFF00000000ull);
  }
  for (int k : {0, 1, 4, 5}) {
    const uint64_t a = w[k], b = w[k + 2], m = 0x0000FFFF0000FFFFull;
    w[k] = (a & m) | ((b & m) << 16);
    w[k + 2] = ((a >> 16) & m) | (b & ~m);
  }
  for (int k = 0; k < 8; k += 2) {
    const uint64_t a = w[k], b = w[k + 1], m = 0x00FF00FF00FF00FFull;
    w[k] = (a & m) | ((b & m) << 8);
    w[k + 1] = ((a >> 8) & m) | (b & ~m);
  }
}

inline int state_pos(int block, int j) noexcept { return (j & 3) * 16 + (j >> 2) * 4 + block; }

// Four 16-byte blocks (in order) into planes.
void pack(const uint8_t in[64], uint64_t q[8]) noexcept {
  uint8_t buf[64];
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 16; ++j) buf[state_pos(b, j)] = in[16 * b + j];
  for (int k = 0; k < 8; ++k) q[k] = transpose8x8(load_le64(buf + 8 * k));
  transpose_bytes(q);
}

void unpack(uint64_t q[8], uint8_t out[64]) noexcept {
  uint8_t buf[64];
  transpose_bytes(q);
  for (int k = 0; k < 8; ++k) store_le64(buf + 8 * k, transpose8x8(q[k]));
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 16; ++j) out[16 * b + j] = buf[state_pos(b, j)];
}

inline void add_round_key(uint64_t q[8], const uint64_t* rk) noexcept {
  for (int i = 0; i < 8; ++i) q[i] ^= rk[i];
}

class AesSoft final : public BlockCipher {
 public:
  explicit AesSoft(const uint8_t key[16]) noexcept {
    uint8_t rk[176], four[64];
    aes128_expand_key(key, rk);
    for (int r = 0; r < 11; ++r) {
      for (int b = 0; b < 4; ++b) std::memcpy(four + 16 * b, rk + 16 * r, 16);
      pack(four, rk_ + 8 * r);
    }
    secure_zero(rk, sizeof(rk));
    secure_zero(four, sizeof(four));
  }
  ~AesSoft() override { secure_zero(rk_, sizeof(rk_)); }

  size_t block_size() const noexcept override { return 16; }
  const char* impl() const noexcept override { return "software"; }

  void encrypt_blocks(const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    run(in, out, blocks, true);
  }
  void decrypt_blocks(const uint8_t* in, uint8_t* out, size_t blocks) const noexcept override {
    run(in, out, blocks, false);
  }

  // Up to four independent chains share one bitsliced pass.
  void cbc_encrypt_lanes(CbcLane* lanes, size_t n) const noexcept override {
    uint8_t buf[64];
    uint64_t q[8];
    for (size_t g = 0; g < n; g += 4) {
      const size_t m = n - g < 4 ? n - g : 4;
      CbcLane* l = lanes + g;
      size_t done[4] = {0, 0, 0, 0};
      for (;;) {
        bool any = false;
        std::memset(buf, 0, sizeof(buf));
        for (size_t k = 0; k < m; ++k) {
          if (done[k] < l[k].blocks) {
            xor_bytes(buf + 16 * k, l[k].iv, l[k].in + 16 * done[k], 16);
            any = true;
          }
        }
        if (!any) break;
        pack(buf, q);
        encrypt_planes(q);
        unpack(q, buf);
        for (size_t k = 0; k < m; ++k) {
          if (done[k] < l[k].blocks) {
            std::memcpy(l[k].out + 16 * done[k], buf + 16 * k, 16);
            std::memcpy(l[k].iv, buf + 16 * k, 16);
            ++done[k];
          }
        }
      }
    }
    secure_zero(buf, sizeof(buf));
    secure_zero(q, sizeof(q));
  }

 private:
  uint64_t rk_[11 * 8];

  void encrypt_planes(uint64_t q[8]) const noexcept {
    add_round_key(q, rk_);
    for (int r = 1; r < 10; ++r) {
      sbox(q);
      shift_rows(q);
      mix_columns(q);
      add_round_key(q, rk_ + 8 * r);
    }
    sbox(q);
    shift_rows(q);
    add_round_key(q, rk_ + 80);
  }

  void decrypt_planes(uint64_t q[8]) const noexcept {
    add_round_key(q, rk_ + 80);
    for (int r = 9; r > 0; --r) {
      inv_shift_rows(q);
      inv_sbox(q);
      add_round_key(q, rk_ + 8 * r);
      inv_mix_columns(q);
    }
    inv_shift_rows(q);
    inv_sbox(q);
    add_round_key(q, rk_);
  }

  void run(const uint8_t* in, uint8_t* out, size_t blocks, bool enc) const noexcept {
    uint8_t buf[64];
    uint64_t q[8];
    while (blocks > 0) {
      const size_t n = blocks < 4 ? blocks : 4;
      std::memset(buf, 0, sizeof(buf));
      std::memcpy(buf, in, 16 * n);
      pack(buf, q);
      if (enc)
        encrypt_planes(q);
      else
        decrypt_planes(q);
      unpack(q, buf);
      std::memcpy(out, buf, 16 * n);
      in += 16 * n;
      out += 16 * n;
      blocks -= n;
    }
    secure_zero(buf, sizeof(buf));
    secure_zero(q, sizeof(q));
  }
};

}  // namespace

uint32_t aes_sub_word_ct(uint32_t w) noexcept {
  uint64_t q[8];
  for (int i = 0; i < 8; ++i) {
    q[i] = 0;
    for (int m = 0; m < 4; ++m) q[i] |= uint64_t((w >> (8 * m + i)) & 1) << m;
  }
  sbox(q);
  uint32_t r = 0;
  for (int i = 0; i < 8; ++i)
    for (int m = 0; m < 4; ++m) r |= uint32_t((q[i] >> m) & 1) << (8 * m + i);
  secure_zero(q, sizeof(q));
  return r;
}

// For tests of the circuit itself: the S-box and its inverse applied to each byte.
void aes_sbox_ct_bytes(uint8_t* p, size_t n, bool inverse) noexcept {
  for (size_t off = 0; off < n; off += 64) {
    uint64_t q[8];
    const size_t m = n - off < 64 ? n - off : 64;
    for (int i = 0; i < 8; ++i) {
      q[i] = 0;
      for (size_t k = 0; k < m; ++k) q[i] |= uint64_t((p[off + k] >> i) & 1) << k;
    }
    if (inverse)
      inv_sbox(q);
    else
      sbox(q);
    for (size_t k = 0; k < m; ++k) {
      uint8_t v = 0;
      for (int i = 0; i < 8; ++i) v |= uint8_t(((q[i] >> k) & 1) << i);
      p[off + k] = v;
    }
  }
}

std::unique_ptr<BlockCipher> make_aes128_soft(const uint8_t key[16]) {
  return std::make_unique<AesSoft>(key);
}

}  // namespace aesxfer::crypto::detail
