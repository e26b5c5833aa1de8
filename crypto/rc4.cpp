// RC4 keystream generator. The state is the 256-byte permutation s_ and the indices i_, j_.
//
// xor_stream keeps i, j in registers and produces eight keystream bytes per iteration, which are
// gathered into one 64-bit word and XORed into the data with a single unaligned load and store.
#include "crypto/rc4.h"

#include <bit>
#include <cstring>

#include "crypto/util.h"

namespace aesxfer::crypto {

std::unique_ptr<StreamCipher> make_rc4_stream() { return std::make_unique<Rc4>(); }

Rc4::~Rc4() {
  secure_zero(s_, sizeof s_);
  secure_zero(&i_, sizeof i_);
  secure_zero(&j_, sizeof j_);
}

void Rc4::set_key(const uint8_t* key, size_t key_len, size_t discard) noexcept {
  // An empty key is outside the contract ([1, 256] bytes); rather than read out of bounds it is
  // taken as the one-byte key 00. Bytes past the 256th never reach the state, as in every RC4.
  static constexpr uint8_t kZero = 0;
  if (key == nullptr || key_len == 0) {
    key = &kZero;
    key_len = 1;
  }
  for (unsigned k = 0; k < 256; ++k) s_[k] = uint8_t(k);
  uint8_t j = 0;
  size_t pos = 0;
  for (unsigned k = 0; k < 256; ++k) {
    const uint8_t t = s_[k];
    j = uint8_t(j + t + key[pos]);
    s_[k] = s_[j];
    s_[j] = t;
    if (++pos == key_len) pos = 0;
  }
  i_ = 0;
  j_ = 0;
  // Throw away the first `discard` bytes of keystream.
  uint8_t scratch[256];
  while (discard > 0) {
    const size_t n = discard < sizeof scratch ? discard : sizeof scratch;
    std::memset(scratch, 0, n);
    xor_stream(scratch, scratch, n);
    discard -= n;
  }
  secure_zero(scratch, sizeof scratch);
}

static_assert(std::endian::native == std::endian::little, "xor_stream packs keystream bytes little-endian");

void Rc4::xor_stream(const uint8_t* in, uint8_t* out, size_t len) noexcept {
  uint8_t* const s = s_;
  unsigned i = i_, j = j_;
  auto next = [&]() noexcept -> uint64_t {
    i = (i + 1) & 0xff;
    const unsigned si = s[i];
    j = (j + si) & 0xff;
    const unsigned sj = s[j];
    s[i] = uint8_t(sj);
    s[j] = uint8_t(si);
    return s[(si + sj) & 0xff];
  };
  for (; len >= 8; len -= 8, in += 8, out += 8) {
    uint64_t ks = next();
    ks |= next() << 8;
    ks |= next() << 16;
    ks |= next() << 24;
    ks |= next() << 32;
    ks |= next() << 40;
    ks |= next() << 48;
    ks |= next() << 56;
    uint64_t d;
    std::memcpy(&d, in, 8);
    d ^= ks;  // little-endian: byte k of the word is the k-th keystream byte
    std::memcpy(out, &d, 8);
  }
  for (; len; --len) *out++ = uint8_t(*in++ ^ next());
  i_ = uint8_t(i);
  j_ = uint8_t(j);
}

}  // namespace aesxfer::crypto
