// AES-128 key expansion (FIPS-197 section 5.2) and the choice of implementation.
#include "crypto/aes.h"

#include "crypto/cpu.h"
#include "crypto/util.h"

namespace aesxfer::crypto {
namespace detail {

// Defined in aes_soft.cpp: SubWord through the bitsliced S-box circuit (constant time).
uint32_t aes_sub_word_ct(uint32_t w) noexcept;

// Implementations (aes_soft.cpp, aes_aesni.cpp, aes_vaes.cpp, aes_vperm_ssse3.cpp, aes_vperm_avx512.cpp).
std::unique_ptr<BlockCipher> make_aes128_soft(const uint8_t key[16]);
std::unique_ptr<BlockCipher> make_aes128_aesni(const uint8_t key[16]);
std::unique_ptr<BlockCipher> make_aes128_vaes(const uint8_t key[16]);
std::unique_ptr<BlockCipher> make_aes128_vperm(const uint8_t key[16]);
std::unique_ptr<BlockCipher> make_aes128_vperm512(const uint8_t key[16]);

// Expands a 128-bit key into 11 round keys of 16 bytes each, in FIPS-197 byte order.
// Constant time: the S-box is evaluated as a Boolean circuit, never as a table lookup.
void aes128_expand_key(const uint8_t key[16], uint8_t rk[176]) noexcept {
  uint32_t w[44];
  for (int i = 0; i < 4; ++i) w[i] = load_be32(key + 4 * i);
  uint32_t rcon = 0x01;
  for (int i = 4; i < 44; ++i) {
    uint32_t t = w[i - 1];
    if (i % 4 == 0) {
      t = (t << 8) | (t >> 24);  // RotWord
      t = aes_sub_word_ct(t) ^ (rcon << 24);
      rcon = (rcon << 1) ^ ((rcon >> 7) * 0x11b);
    }
    w[i] = w[i - 4] ^ t;
  }
  for (int i = 0; i < 44; ++i) store_be32(rk + 4 * i, w[i]);
  secure_zero(w, sizeof(w));
}

}  // namespace detail

namespace {

bool impl_available(AesImpl impl) noexcept {
  const CpuFeatures& f = cpu();
  switch (impl) {
    case AesImpl::software:
      return true;
    case AesImpl::vperm:
      return f.ssse3;
    case AesImpl::vperm512:
      return f.ssse3 && f.avx2 && f.avx512f && f.avx512bw && f.avx512vl;
    case AesImpl::aesni:
      return f.aesni && f.sse41 && f.ssse3;
    case AesImpl::vaes:  // 512-bit VAES; its tails and single-chain CBC use AES-NI
      return f.vaes && f.avx512f && f.avx512bw && f.avx512vl && f.aesni && f.sse41 && f.ssse3;
    case AesImpl::best:
      return true;
  }
  return false;
}

AesImpl resolve(AesImpl impl) noexcept { return impl == AesImpl::best ? dispatch().aes : impl; }

}  // namespace

AesImpl detail::aes_pick(bool portable) noexcept {
  if (!portable && impl_available(AesImpl::vaes)) return AesImpl::vaes;
  if (!portable && impl_available(AesImpl::aesni)) return AesImpl::aesni;
  if (impl_available(AesImpl::vperm512)) return AesImpl::vperm512;
  if (impl_available(AesImpl::vperm)) return AesImpl::vperm;
  return AesImpl::software;
}

const char* aes_impl_name(AesImpl impl) noexcept {
  switch (impl) {
    case AesImpl::best:
      return "best";
    case AesImpl::aesni:
      return "aesni";
    case AesImpl::vaes:
      return "vaes";
    case AesImpl::software:
      return "software";
    case AesImpl::vperm:
      return "vperm";
    case AesImpl::vperm512:
      return "vperm512";
  }
  return "unknown";
}

const char* aes_best_impl_name() noexcept { return aes_impl_name(resolve(AesImpl::best)); }

std::vector<AesImpl> aes_available_impls() {
  std::vector<AesImpl> v;
  for (AesImpl i : {AesImpl::vaes, AesImpl::aesni, AesImpl::vperm512, AesImpl::vperm, AesImpl::software})
    if (impl_available(i)) v.push_back(i);
  return v;
}

std::unique_ptr<BlockCipher> make_aes128(const uint8_t key[16], AesImpl impl) {
  impl = resolve(impl);
  if (!impl_available(impl)) return nullptr;
  switch (impl) {
    case AesImpl::aesni:
      return detail::make_aes128_aesni(key);
    case AesImpl::vaes:
      return detail::make_aes128_vaes(key);
    case AesImpl::software:
      return detail::make_aes128_soft(key);
    case AesImpl::vperm:
      return detail::make_aes128_vperm(key);
    case AesImpl::vperm512:
      return detail::make_aes128_vperm512(key);
    default:
      return nullptr;
  }
}

std::unique_ptr<BlockCipher> make_aes128_block(const uint8_t* key, size_t key_len, const Dispatch& d) {
  return key_len == 16 ? make_aes128(key, d.aes) : nullptr;
}

}  // namespace aesxfer::crypto
