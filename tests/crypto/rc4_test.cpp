// RC4: RFC 6229 keystream vectors, the RFC 4345 discard, and OpenSSL's legacy provider as an oracle.
#include "crypto/rc4.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

using crypto::Rc4;

// RC4 lives in OpenSSL 3's legacy provider. Failing to load it is a test failure, never a skip.
::testing::AssertionResult openssl_legacy_loaded() {
  static OSSL_PROVIDER* legacy = OSSL_PROVIDER_load(nullptr, "legacy");
  static OSSL_PROVIDER* deflt = OSSL_PROVIDER_load(nullptr, "default");
  if (legacy == nullptr)
    return ::testing::AssertionFailure() << "OpenSSL's legacy provider could not be loaded "
                                            "(OSSL_PROVIDER_load(nullptr, \"legacy\")); it is "
                                            "required as the RC4 oracle. Install it (ossl-modules/legacy.so) "
                                            "or point OPENSSL_MODULES at it.";
  if (deflt == nullptr)
    return ::testing::AssertionFailure() << "OpenSSL's default provider could not be loaded";
  EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, "RC4", nullptr);
  if (c == nullptr) return ::testing::AssertionFailure() << "RC4 not available from OpenSSL's providers";
  EVP_CIPHER_free(c);
  return ::testing::AssertionSuccess();
}

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

Ctx openssl_rc4(const Bytes& key) {
  Ctx c(EVP_CIPHER_CTX_new());
  EXPECT_EQ(EVP_EncryptInit_ex(c.get(), EVP_rc4(), nullptr, nullptr, nullptr), 1);
  EXPECT_EQ(EVP_CIPHER_CTX_set_key_length(c.get(), int(key.size())), 1);
  EXPECT_EQ(EVP_EncryptInit_ex(c.get(), nullptr, nullptr, key.data(), nullptr), 1);
  return c;
}

void openssl_xor(EVP_CIPHER_CTX* c, const uint8_t* in, uint8_t* out, size_t n) {
  int outl = 0;
  ASSERT_EQ(EVP_EncryptUpdate(c, out, &outl, in, int(n)), 1);
  ASSERT_EQ(size_t(outl), n);
}

Bytes keystream(const Bytes& key, size_t n, size_t discard) {
  Rc4 rc4(key.data(), key.size(), discard);
  Bytes ks(n, 0);
  rc4.xor_stream(ks.data(), ks.data(), n);
  return ks;
}

struct Rfc6229 {
  Bytes key;
  std::map<size_t, Bytes> at;  // offset -> 16 keystream bytes
};

std::vector<Rfc6229> rfc6229() {
  std::vector<Rfc6229> out;
  for (const auto& r : load_vectors("rc4.txt")) {
    const Bytes key = hex(r.at("key"));
    if (out.empty() || out.back().key != key) out.push_back({key, {}});
    out.back().at[std::stoul(r.at("offset"))] = hex(r.at("stream"));
  }
  return out;
}

TEST(Rc4, Rfc6229Vectors) {
  const auto sets = rfc6229();
  ASSERT_GE(sets.size(), 3u);
  bool k40 = false, k128 = false, k256 = false;
  for (const auto& s : sets) {
    k40 |= s.key.size() == 5;
    k128 |= s.key.size() == 16;
    k256 |= s.key.size() == 32;
    ASSERT_EQ(s.at.size(), 18u);
    SCOPED_TRACE("key " + to_hex(s.key));
    const Bytes ks = keystream(s.key, 4112, 0);
    for (const auto& [off, want] : s.at)
      EXPECT_EQ(to_hex(ks.data() + off, 16), to_hex(want)) << "offset " << off;
    // The same stream produced in odd-sized pieces (exercises the 8-byte path and the tail).
    Rc4 rc4(s.key.data(), s.key.size(), 0);
    Bytes pieces(4112, 0);
    size_t pos = 0, step = 1;
    while (pos < pieces.size()) {
      const size_t n = std::min(step, pieces.size() - pos);
      rc4.xor_stream(pieces.data() + pos, pieces.data() + pos, n);
      pos += n;
      step = step * 3 % 37 + 1;
    }
    EXPECT_EQ(to_hex(pieces), to_hex(ks));
  }
  EXPECT_TRUE(k40 && k128 && k256) << "rc4.txt must hold the 40-, 128- and 256-bit keys";
}

TEST(Rc4, DiscardIsRfcStreamOffset) {
  EXPECT_EQ(Rc4::kRfc4345Discard, 1536u);
  for (const auto& s : rfc6229()) {
    SCOPED_TRACE("key " + to_hex(s.key));
    const Bytes full = keystream(s.key, 4112, 0);
    // Default constructor argument is the RFC 4345 discard of 1536 bytes.
    Rc4 rc4(s.key.data(), s.key.size());
    Bytes ks(4112 - 1536, 0);
    rc4.xor_stream(ks.data(), ks.data(), ks.size());
    EXPECT_EQ(to_hex(ks.data(), 16), to_hex(s.at.at(1536)));
    EXPECT_EQ(to_hex(ks.data() + 2048 - 1536, 16), to_hex(s.at.at(2048)));
    EXPECT_EQ(to_hex(ks), to_hex(full.data() + 1536, full.size() - 1536));
    // set_key with an explicit discard on a reused object.
    rc4.set_key(s.key.data(), s.key.size(), 1536);
    Bytes again(16, 0);
    rc4.xor_stream(again.data(), again.data(), 16);
    EXPECT_EQ(to_hex(again), to_hex(s.at.at(1536)));
  }
}

TEST(Rc4, OpenSslLegacyProviderLoads) { ASSERT_TRUE(openssl_legacy_loaded()); }

TEST(Rc4, DifferentialAgainstOpenSsl) {
  ASSERT_TRUE(openssl_legacy_loaded());
  std::mt19937_64 rng(0x4c4);
  for (int iter = 0; iter < 3000; ++iter) {
    const Bytes key = random_bytes(rng, 1 + rng() % 256);
    const size_t discard = iter % 4 == 0 ? rng() % 2000 : 0;
    const size_t len = rng() % 4097;
    const size_t off_in = 1 + rng() % 7, off_out = 1 + rng() % 7;
    SCOPED_TRACE("iter " + std::to_string(iter) + " key length " + std::to_string(key.size()) + " discard " +
                 std::to_string(discard) + " len " + std::to_string(len));

    Ctx ref = openssl_rc4(key);
    if (discard) {
      Bytes skip(discard, 0);
      openssl_xor(ref.get(), skip.data(), skip.data(), discard);
    }
    Bytes in = random_bytes(rng, len + off_in);
    Bytes want(len + 1);
    openssl_xor(ref.get(), in.data() + off_in, want.data(), len);

    // One shot, misaligned, out of place.
    Rc4 a(key.data(), key.size(), discard);
    Bytes out(len + off_out);
    a.xor_stream(in.data() + off_in, out.data() + off_out, len);
    ASSERT_EQ(to_hex(out.data() + off_out, len), to_hex(want.data(), len));

    // In place, split at random points.
    Rc4 b(key.data(), key.size(), discard);
    Bytes buf(in.begin() + off_in, in.end());
    size_t pos = 0;
    while (pos < len) {
      size_t chunk = rng() % (len - pos + 1);
      if (rng() % 3 == 0) chunk %= 13;
      b.xor_stream(buf.data() + pos, buf.data() + pos, chunk);
      pos += chunk;
    }
    ASSERT_EQ(to_hex(buf.data(), len), to_hex(want.data(), len));

    // Both keep going in step with OpenSSL.
    Bytes tail_in = random_bytes(rng, 37), tail_ref(37), tail_a(37), tail_b(37);
    openssl_xor(ref.get(), tail_in.data(), tail_ref.data(), 37);
    a.xor_stream(tail_in.data(), tail_a.data(), 37);
    b.xor_stream(tail_in.data(), tail_b.data(), 37);
    ASSERT_EQ(to_hex(tail_a), to_hex(tail_ref));
    ASSERT_EQ(to_hex(tail_b), to_hex(tail_ref));
  }
}

TEST(Rc4, RekeyResetsState) {
  const Bytes k1 = hex("0102030405"), k2 = hex("0102030405060708090a0b0c0d0e0f10");
  Rc4 r(k1.data(), k1.size(), 0);
  uint8_t junk[100] = {};
  r.xor_stream(junk, junk, sizeof junk);
  r.set_key(k2.data(), k2.size(), 0);
  EXPECT_EQ(to_hex(keystream(k2, 16, 0)), "9ac7cc9a609d1ef7b2932899cde41b97");
  uint8_t ks[16] = {};
  r.xor_stream(ks, ks, 16);
  EXPECT_EQ(to_hex(ks, 16), "9ac7cc9a609d1ef7b2932899cde41b97");
}

// An empty key is outside the contract; it must not read out of bounds (checked under ASan) and
// behaves as the one-byte key 00.
TEST(Rc4, EmptyKeyIsDefined) {
  const Bytes zero = hex("00");
  Rc4 r(zero.data(), 0, 0);
  uint8_t ks[16] = {};
  r.xor_stream(ks, ks, 16);
  EXPECT_EQ(to_hex(ks, 16), to_hex(keystream(zero, 16, 0)));
}

}  // namespace
}  // namespace aesxfer::test
