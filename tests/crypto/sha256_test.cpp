// SHA-256: FIPS 180 vectors against every implementation present, and OpenSSL as an oracle.
#include "crypto/sha256.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>
#include <vector>

#include "crypto/cpu.h"
#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

using crypto::Sha256;
using crypto::ShaImpl;

std::vector<ShaImpl> sha_impls() {
  std::vector<ShaImpl> v{ShaImpl::software};
  if (crypto::sha256_impl_available(ShaImpl::shani)) v.push_back(ShaImpl::shani);
  return v;
}

Bytes openssl_sha256(const uint8_t* p, size_t n) {
  Bytes out(32);
  unsigned len = 0;
  EXPECT_EQ(EVP_Digest(p, n, out.data(), &len, EVP_sha256(), nullptr), 1);
  EXPECT_EQ(len, 32u);
  return out;
}

TEST(Sha256, ImplementationsAndNames) {
  EXPECT_TRUE(crypto::sha256_impl_available(ShaImpl::software));
  EXPECT_TRUE(crypto::sha256_impl_available(ShaImpl::best));
  EXPECT_STREQ(crypto::sha256_impl_name(ShaImpl::software), "software");
  const bool shani = crypto::cpu().shani;
  EXPECT_EQ(crypto::sha256_impl_available(ShaImpl::shani),
            shani && crypto::cpu().sse41 && crypto::cpu().ssse3);
  EXPECT_STREQ(crypto::sha256_impl_name(ShaImpl::best),
               crypto::sha256_impl_available(ShaImpl::shani) && !crypto::no_aesni() ? "shani" : "software");
  EXPECT_STREQ(Sha256(ShaImpl::software).impl(), "software");
  EXPECT_STREQ(Sha256(ShaImpl::best).impl(), crypto::sha256_impl_name(ShaImpl::best));
  // Asking for SHA-NI where it is missing falls back to the portable code.
  EXPECT_STREQ(Sha256(ShaImpl::shani).impl(), crypto::sha256_impl_name(ShaImpl::shani));
  EXPECT_EQ(crypto::dispatch(crypto::Impl::portable).sha256, ShaImpl::software);
  if (crypto::cpu().shani && crypto::no_aesni()) GTEST_LOG_(INFO) << "SHA-NI present but not used (override)";
  GTEST_LOG_(INFO) << "testing " << sha_impls().size()
                   << " SHA-256 implementation(s); best = " << crypto::sha256_impl_name(ShaImpl::best);
}

TEST(Sha256, FipsVectors) {
  const auto recs = load_vectors("sha256.txt");
  ASSERT_EQ(recs.size(), 5u);
  for (ShaImpl impl : sha_impls()) {
    for (const auto& r : recs) {
      SCOPED_TRACE(std::string(crypto::sha256_impl_name(impl)) + " line " + r.at("line"));
      const std::string& msg = r.at("msg");
      const size_t repeat = std::stoul(r.at("repeat"));
      const Bytes want = hex(r.at("digest"));
      std::string all;
      all.reserve(msg.size() * repeat);
      for (size_t i = 0; i < repeat; ++i) all += msg;

      uint8_t got[32];
      Sha256::digest(all.data(), all.size(), got, impl);
      EXPECT_EQ(to_hex(got, 32), to_hex(want));

      // Incremental: the message fed one repetition at a time.
      Sha256 s(impl);
      for (size_t i = 0; i < repeat; ++i) s.update(msg.data(), msg.size());
      s.final(got);
      EXPECT_EQ(to_hex(got, 32), to_hex(want));

      // Reuse after reset().
      s.reset();
      s.update(all.data(), all.size());
      s.final(got);
      EXPECT_EQ(to_hex(got, 32), to_hex(want));
    }
  }
}

// Lengths around the padding boundaries (55, 56, 63, 64, ...) against OpenSSL.
TEST(Sha256, PaddingBoundaries) {
  std::mt19937_64 rng(0x5a256);
  const Bytes data = random_bytes(rng, 300);
  for (ShaImpl impl : sha_impls()) {
    for (size_t n = 0; n <= 300; ++n) {
      uint8_t got[32];
      Sha256::digest(data.data(), n, got, impl);
      ASSERT_EQ(to_hex(got, 32), to_hex(openssl_sha256(data.data(), n))) << "len " << n;
    }
  }
}

TEST(Sha256, DifferentialAgainstOpenSsl) {
  std::mt19937_64 rng(0x5ba256);
  for (int iter = 0; iter < 3000; ++iter) {
    const size_t len = rng() % 4097;
    const size_t off = 1 + rng() % 7;
    Bytes buf = random_bytes(rng, len + off);
    const uint8_t* p = buf.data() + off;  // misaligned
    const Bytes want = openssl_sha256(p, len);
    for (ShaImpl impl : sha_impls()) {
      SCOPED_TRACE(std::string(crypto::sha256_impl_name(impl)) + " iter " + std::to_string(iter) + " len " +
                   std::to_string(len));
      uint8_t got[32];
      Sha256::digest(p, len, got, impl);
      ASSERT_EQ(to_hex(got, 32), to_hex(want));
      // Incremental with random split points.
      Sha256 s(impl);
      size_t pos = 0;
      while (pos < len) {
        size_t chunk = rng() % 3 == 0 ? rng() % 200 : rng() % (len - pos + 1);
        if (chunk > len - pos) chunk = len - pos;
        s.update(p + pos, chunk);
        pos += chunk;
      }
      s.final(got);
      ASSERT_EQ(to_hex(got, 32), to_hex(want));
    }
  }
}

TEST(Sha256, StateRoundTrip) {
  std::mt19937_64 rng(0x57a7e);
  const Bytes data = random_bytes(rng, 1000);
  for (ShaImpl impl : sha_impls()) {
    Sha256 a(impl);
    a.update(data.data(), 192);  // whole blocks
    const Sha256::State st = a.state();
    EXPECT_EQ(st.bytes, 192u);
    Sha256 b(impl);
    b.set_state(st);
    b.update(data.data() + 192, data.size() - 192);
    uint8_t got[32];
    b.final(got);
    EXPECT_EQ(to_hex(got, 32), to_hex(openssl_sha256(data.data(), data.size())));
  }
}

// Large multi-block calls (the SHA-NI loop) agree with the portable code.
TEST(Sha256, ImplementationsAgreeOnLargeInput) {
  std::mt19937_64 rng(0x1a6e);
  const Bytes data = random_bytes(rng, 1 << 20);
  uint8_t ref[32];
  Sha256::digest(data.data(), data.size(), ref, ShaImpl::software);
  EXPECT_EQ(to_hex(ref, 32), to_hex(openssl_sha256(data.data(), data.size())));
  for (ShaImpl impl : sha_impls()) {
    uint8_t got[32];
    Sha256::digest(data.data(), data.size(), got, impl);
    EXPECT_EQ(to_hex(got, 32), to_hex(ref, 32)) << crypto::sha256_impl_name(impl);
  }
}

}  // namespace
}  // namespace aesxfer::test
