#include "proto/kdf.h"

#include <sodium.h>

#include "crypto/util.h"

namespace aesxfer::proto {

void kdf(uint8_t* out, size_t outlen, const uint8_t key[kKdfKeyLen], std::string_view label,
         std::span<const uint8_t> context) noexcept {
  crypto_generichash_state st;
  crypto_generichash_init(&st, key, kKdfKeyLen, outlen);
  crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(label.data()), label.size());
  crypto_generichash_update(&st, context.data(), context.size());
  crypto_generichash_final(&st, out, outlen);
  sodium_memzero(&st, sizeof st);
}

void kdf(uint8_t* out, size_t outlen, const uint8_t key[kKdfKeyLen], std::string_view label,
         uint64_t v) noexcept {
  uint8_t be[8];
  crypto::store_be64(be, v);
  kdf(out, outlen, key, label, be);
}

}  // namespace aesxfer::proto
