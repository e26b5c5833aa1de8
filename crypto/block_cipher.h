// The block-cipher interface that AES and Blowfish implement, and the modes written once over it.
//
// Implementations override the mode entry points when they can do better than the generic
// block-at-a-time code (AES-NI pipelines CBC decryption and CTR over 8 blocks, for example).
// All entry points accept in == out (in place) and unaligned buffers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace aesxfer::crypto {

// One independent CBC chain for multi-buffer encryption: iv is updated to the last ciphertext block.
struct CbcLane {
  uint8_t* iv;
  const uint8_t* in;
  uint8_t* out;
  size_t blocks;
};

class BlockCipher {
 public:
  virtual ~BlockCipher() = default;

  virtual size_t block_size() const noexcept = 0;
  // Which code runs: "aesni", "vaes", "software".
  virtual const char* impl() const noexcept = 0;

  // ECB over n whole blocks.
  virtual void encrypt_blocks(const uint8_t* in, uint8_t* out, size_t blocks) const noexcept = 0;
  virtual void decrypt_blocks(const uint8_t* in, uint8_t* out, size_t blocks) const noexcept = 0;

  // CBC over whole blocks; iv (block_size bytes) is updated so that calls can be chained.
  virtual void cbc_encrypt(uint8_t* iv, const uint8_t* in, uint8_t* out, size_t blocks) const noexcept;
  virtual void cbc_decrypt(uint8_t* iv, const uint8_t* in, uint8_t* out, size_t blocks) const noexcept;

  // Encrypts several independent CBC chains; implementations interleave the lanes so that the
  // serial dependency inside each chain no longer limits throughput. The default runs them in turn.
  virtual void cbc_encrypt_lanes(CbcLane* lanes, size_t n) const noexcept;
  // The chains cbc_encrypt_lanes interleaves at once (Botan's parallelism()).
  virtual size_t cbc_lanes() const noexcept { return 8; }

  // CTR: counter block ctr (block_size bytes, big-endian increment over the whole block) is
  // encrypted into the keystream XORed into in; len need not be a multiple of the block size,
  // but a partial final block ends the stream (ctr is left pointing past the last used block).
  virtual void ctr_xor(uint8_t* ctr, const uint8_t* in, uint8_t* out, size_t len) const noexcept;
};

}  // namespace aesxfer::crypto
