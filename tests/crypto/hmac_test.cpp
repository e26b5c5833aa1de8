// HMAC-SHA256: RFC 4231 vectors against every SHA-256 implementation, and OpenSSL as an oracle.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>
#include <vector>

#include "crypto/sha256.h"
#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

using crypto::HmacSha256;
using crypto::ShaImpl;

std::vector<ShaImpl> sha_impls() {
  std::vector<ShaImpl> v{ShaImpl::software};
  if (crypto::sha256_impl_available(ShaImpl::shani)) v.push_back(ShaImpl::shani);
  return v;
}

Bytes openssl_hmac(const Bytes& key, const uint8_t* p, size_t n) {
  Bytes out(32);
  size_t len = 0;
  static const uint8_t kEmpty = 0;
  const uint8_t* k = key.empty() ? &kEmpty : key.data();
  EXPECT_NE(EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, k, key.size(), p, n, out.data(),
                      out.size(), &len),
            nullptr);
  EXPECT_EQ(len, 32u);
  return out;
}

TEST(Hmac, Rfc4231Vectors) {
  const auto recs = load_vectors("hmac_sha256.txt");
  ASSERT_EQ(recs.size(), 7u);
  for (ShaImpl impl : sha_impls()) {
    for (const auto& r : recs) {
      SCOPED_TRACE(std::string(crypto::sha256_impl_name(impl)) + " case " + r.at("case"));
      const Bytes key = hex(r.at("key")), data = hex(r.at("data")), want = hex(r.at("tag"));
      ASSERT_TRUE(want.size() == 32 || (r.at("case") == "5" && want.size() == 16));
      HmacSha256 h(key.data(), key.size(), impl);
      uint8_t tag[32];
      h.mac(data.data(), data.size(), tag);
      EXPECT_EQ(to_hex(tag, want.size()), to_hex(want));
      // Incremental, byte by byte, on the same object.
      h.begin();
      for (uint8_t b : data) h.update(&b, 1);
      h.finish(tag);
      EXPECT_EQ(to_hex(tag, want.size()), to_hex(want));
      // Again without begin(): finish() leaves the object ready for the next message.
      h.update(data.data(), data.size());
      h.finish(tag);
      EXPECT_EQ(to_hex(tag, want.size()), to_hex(want));
    }
  }
}

TEST(Hmac, DifferentialAgainstOpenSsl) {
  std::mt19937_64 rng(0x4a3c);
  for (int iter = 0; iter < 2000; ++iter) {
    const Bytes key = random_bytes(rng, rng() % 200);  // 0 .. 199: shorter and longer than a block
    const size_t len = rng() % 3000;
    const size_t off = 1 + rng() % 7;
    const Bytes buf = random_bytes(rng, len + off);
    const uint8_t* p = buf.data() + off;
    const Bytes want = openssl_hmac(key, p, len);
    for (ShaImpl impl : sha_impls()) {
      SCOPED_TRACE(std::string(crypto::sha256_impl_name(impl)) + " iter " + std::to_string(iter));
      HmacSha256 h(key.data(), key.size(), impl);
      uint8_t tag[32];
      h.mac(p, len, tag);
      ASSERT_EQ(to_hex(tag, 32), to_hex(want));
      // Several messages on one object, split at random points.
      for (int rep = 0; rep < 2; ++rep) {
        h.begin();
        size_t pos = 0;
        while (pos < len) {
          size_t chunk = rng() % (len - pos + 1);
          if (rng() % 4 == 0) chunk = chunk % 70;
          h.update(p + pos, chunk);
          pos += chunk;
        }
        h.finish(tag);
        ASSERT_EQ(to_hex(tag, 32), to_hex(want));
      }
    }
  }
}

TEST(Hmac, KeyOfExactlyOneBlockAndEmptyKey) {
  std::mt19937_64 rng(0xb10c);
  for (size_t klen : {0u, 1u, 63u, 64u, 65u, 128u}) {
    const Bytes key = random_bytes(rng, klen);
    const Bytes data = random_bytes(rng, 100);
    for (ShaImpl impl : sha_impls()) {
      HmacSha256 h(key.data(), key.size(), impl);
      uint8_t tag[32];
      h.mac(data.data(), data.size(), tag);
      EXPECT_EQ(to_hex(tag, 32), to_hex(openssl_hmac(key, data.data(), data.size())))
          << "key length " << klen;
    }
  }
}

}  // namespace
}  // namespace aesxfer::test
