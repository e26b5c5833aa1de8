// The generic modes over any BlockCipher: CBC (encrypt, decrypt, multi-lane) and CTR.
// They work in place (in == out) and on unaligned buffers; ciphers override them when they can
// pipeline better.
#include "crypto/block_cipher.h"

#include <cstring>

#include "crypto/util.h"

namespace aesxfer::crypto {
namespace {

constexpr size_t kMaxBlock = 16;     // AES; Blowfish is 8
constexpr size_t kChunkBytes = 256;  // blocks handed to decrypt_blocks / encrypt_blocks at once

}  // namespace

void BlockCipher::cbc_encrypt(uint8_t* iv, const uint8_t* in, uint8_t* out, size_t blocks) const noexcept {
  const size_t bs = block_size();
  uint8_t x[kMaxBlock];
  for (size_t i = 0; i < blocks; ++i) {
    xor_bytes(x, in + i * bs, iv, bs);
    encrypt_blocks(x, out + i * bs, 1);
    std::memcpy(iv, out + i * bs, bs);
  }
  secure_zero(x, sizeof(x));
}

void BlockCipher::cbc_decrypt(uint8_t* iv, const uint8_t* in, uint8_t* out, size_t blocks) const noexcept {
  const size_t bs = block_size();
  const size_t per_chunk = kChunkBytes / bs;
  uint8_t saved[kChunkBytes];  // the chunk's ciphertext: in may be overwritten when in == out
  while (blocks > 0) {
    const size_t n = blocks < per_chunk ? blocks : per_chunk;
    std::memcpy(saved, in, n * bs);
    decrypt_blocks(saved, out, n);
    xor_bytes(out, out, iv, bs);
    xor_bytes(out + bs, out + bs, saved, (n - 1) * bs);
    std::memcpy(iv, saved + (n - 1) * bs, bs);
    in += n * bs;
    out += n * bs;
    blocks -= n;
  }
}

void BlockCipher::cbc_encrypt_lanes(CbcLane* lanes, size_t n) const noexcept {
  for (size_t i = 0; i < n; ++i) cbc_encrypt(lanes[i].iv, lanes[i].in, lanes[i].out, lanes[i].blocks);
}

void BlockCipher::ctr_xor(uint8_t* ctr, const uint8_t* in, uint8_t* out, size_t len) const noexcept {
  const size_t bs = block_size();
  const size_t per_chunk = kChunkBytes / bs;
  uint8_t ks[kChunkBytes];
  while (len > 0) {
    const size_t want = (len + bs - 1) / bs;
    const size_t n = want < per_chunk ? want : per_chunk;
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(ks + i * bs, ctr, bs);
      // Big-endian increment over the whole block, with no early exit: the counter may derive
      // from key material (the record layer's iv salt).
      unsigned carry = 1;
      for (size_t k = bs; k-- > 0;) {
        const unsigned v = ctr[k] + carry;
        ctr[k] = uint8_t(v);
        carry = v >> 8;
      }
    }
    encrypt_blocks(ks, ks, n);
    const size_t bytes = n * bs < len ? n * bs : len;
    xor_bytes(out, in, ks, bytes);
    in += bytes;
    out += bytes;
    len -= bytes;
  }
  secure_zero(ks, sizeof(ks));
}

}  // namespace aesxfer::crypto
