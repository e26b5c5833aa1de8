// Blowfish: Eric Young's vectors, and OpenSSL's legacy provider as an oracle for ECB and CBC.
#include "crypto/blowfish.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

using crypto::BlockCipher;
using crypto::CbcLane;

// Blowfish lives in OpenSSL 3's legacy provider. Failing to load it is a test failure, never a skip.
::testing::AssertionResult openssl_legacy_loaded() {
  static OSSL_PROVIDER* legacy = OSSL_PROVIDER_load(nullptr, "legacy");
  static OSSL_PROVIDER* deflt = OSSL_PROVIDER_load(nullptr, "default");
  if (legacy == nullptr)
    return ::testing::AssertionFailure() << "OpenSSL's legacy provider could not be loaded "
                                            "(OSSL_PROVIDER_load(nullptr, \"legacy\")); it is "
                                            "required as the Blowfish oracle. Install it "
                                            "(ossl-modules/legacy.so) or point OPENSSL_MODULES at it.";
  if (deflt == nullptr)
    return ::testing::AssertionFailure() << "OpenSSL's default provider could not be loaded";
  EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, "BF-CBC", nullptr);
  if (c == nullptr) return ::testing::AssertionFailure() << "BF-CBC not available from OpenSSL's providers";
  EVP_CIPHER_free(c);
  return ::testing::AssertionSuccess();
}

// OpenSSL Blowfish ECB/CBC without padding, any key length.
Bytes openssl_bf(const EVP_CIPHER* cipher, bool enc, const Bytes& key, const uint8_t* iv, const uint8_t* in,
                 size_t n) {
  Bytes out(n + 8);
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  int l1 = 0, l2 = 0;
  bool ok = EVP_CipherInit_ex(c, cipher, nullptr, nullptr, nullptr, enc ? 1 : 0) == 1 &&
            EVP_CIPHER_CTX_set_key_length(c, int(key.size())) == 1 &&
            EVP_CipherInit_ex(c, nullptr, nullptr, key.data(), iv, enc ? 1 : 0) == 1 &&
            EVP_CIPHER_CTX_set_padding(c, 0) == 1 && EVP_CipherUpdate(c, out.data(), &l1, in, int(n)) == 1 &&
            EVP_CipherFinal_ex(c, out.data() + l1, &l2) == 1;
  EVP_CIPHER_CTX_free(c);
  EXPECT_TRUE(ok) << "OpenSSL Blowfish failed";
  EXPECT_EQ(size_t(l1 + l2), n);
  out.resize(n);
  return out;
}

std::unique_ptr<BlockCipher> bf(const Bytes& key) { return crypto::make_blowfish(key.data(), key.size()); }

TEST(Blowfish, BasicsAndKeyRange) {
  const Bytes k(57, 0x42);
  EXPECT_EQ(crypto::make_blowfish(k.data(), 3), nullptr);
  EXPECT_EQ(crypto::make_blowfish(k.data(), 57), nullptr);
  EXPECT_EQ(crypto::make_blowfish(nullptr, 16), nullptr);
  auto a = crypto::make_blowfish(k.data(), 4);
  auto b = crypto::make_blowfish(k.data(), 56);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->block_size(), 8u);
  EXPECT_STREQ(a->impl(), "portable");
}

TEST(Blowfish, EricYoungEcbVectors) {
  const auto recs = load_vectors("blowfish_ecb.txt");
  size_t ecb = 0, set_key = 0;
  for (const auto& r : recs) {
    SCOPED_TRACE("blowfish_ecb.txt line " + r.at("line"));
    const Bytes key = hex(r.at("key")), plain = hex(r.at("plain")), want = hex(r.at("cipher"));
    (r.at("section") == "ecb" ? ecb : set_key)++;
    auto c = bf(key);
    if (key.size() < 4) {  // Eric Young's 1..3-byte keys: outside [4, 56], refused.
      EXPECT_EQ(c, nullptr);
      continue;
    }
    ASSERT_NE(c, nullptr);
    uint8_t out[8];
    c->encrypt_blocks(plain.data(), out, 1);
    EXPECT_EQ(to_hex(out, 8), to_hex(want));
    c->decrypt_blocks(want.data(), out, 1);
    EXPECT_EQ(to_hex(out, 8), to_hex(plain));
    // The same block repeated, through the 4- and 2-way paths (7 = 4 + 2 + 1), in place.
    Bytes many, many_want;
    for (int i = 0; i < 7; ++i) {
      many.insert(many.end(), plain.begin(), plain.end());
      many_want.insert(many_want.end(), want.begin(), want.end());
    }
    c->encrypt_blocks(many.data(), many.data(), 7);
    EXPECT_EQ(to_hex(many), to_hex(many_want));
    c->decrypt_blocks(many.data(), many.data(), 7);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(to_hex(many.data() + 8 * i, 8), to_hex(plain));
  }
  EXPECT_EQ(ecb, 34u);
  EXPECT_EQ(set_key, 24u);
}

TEST(Blowfish, EricYoungCbcVector) {
  const auto recs = load_vectors("blowfish_cbc.txt");
  ASSERT_EQ(recs.size(), 1u);
  const auto& r = recs[0];
  const Bytes key = hex(r.at("key")), iv0 = hex(r.at("iv")), plain = hex(r.at("plain")),
              want = hex(r.at("cipher"));
  ASSERT_EQ(plain.size(), 32u);
  auto c = bf(key);
  ASSERT_NE(c, nullptr);
  Bytes iv = iv0, out(32);
  c->cbc_encrypt(iv.data(), plain.data(), out.data(), 4);
  EXPECT_EQ(to_hex(out), to_hex(want));
  EXPECT_EQ(to_hex(iv), to_hex(want.data() + 24, 8));  // iv advanced to the last ciphertext block
  iv = iv0;
  c->cbc_decrypt(iv.data(), want.data(), out.data(), 4);
  EXPECT_EQ(to_hex(out), to_hex(plain));
  EXPECT_EQ(to_hex(iv), to_hex(want.data() + 24, 8));
  // Chained calls, one block at a time, equal the one-shot result.
  iv = iv0;
  for (int i = 0; i < 4; ++i) c->cbc_encrypt(iv.data(), plain.data() + 8 * i, out.data() + 8 * i, 1);
  EXPECT_EQ(to_hex(out), to_hex(want));
  // Through the lane interface.
  iv = iv0;
  CbcLane lane{iv.data(), plain.data(), out.data(), 4};
  c->cbc_encrypt_lanes(&lane, 1);
  EXPECT_EQ(to_hex(out), to_hex(want));
  EXPECT_EQ(to_hex(iv), to_hex(want.data() + 24, 8));
}

TEST(Blowfish, OpenSslLegacyProviderLoads) { ASSERT_TRUE(openssl_legacy_loaded()); }

TEST(Blowfish, DifferentialEcbAgainstOpenSsl) {
  ASSERT_TRUE(openssl_legacy_loaded());
  std::mt19937_64 rng(0xbf0ecb);
  for (int iter = 0; iter < 2000; ++iter) {
    const Bytes key = random_bytes(rng, 4 + rng() % 53);  // 4 .. 56 bytes
    const size_t blocks = rng() % 513;
    const size_t off_in = 1 + rng() % 7, off_out = 1 + rng() % 7;
    SCOPED_TRACE("iter " + std::to_string(iter) + " key length " + std::to_string(key.size()) + " blocks " +
                 std::to_string(blocks));
    auto c = bf(key);
    ASSERT_NE(c, nullptr);
    const Bytes in = random_bytes(rng, 8 * blocks + off_in);
    const uint8_t* p = in.data() + off_in;
    const Bytes want = openssl_bf(EVP_bf_ecb(), true, key, nullptr, p, 8 * blocks);
    Bytes out(8 * blocks + off_out);
    c->encrypt_blocks(p, out.data() + off_out, blocks);
    ASSERT_EQ(to_hex(out.data() + off_out, 8 * blocks), to_hex(want));
    // Decrypt in place and compare with OpenSSL's decryption of the same data.
    const Bytes want_dec = openssl_bf(EVP_bf_ecb(), false, key, nullptr, p, 8 * blocks);
    Bytes buf(p, p + 8 * blocks);
    c->decrypt_blocks(buf.data(), buf.data(), blocks);
    ASSERT_EQ(to_hex(buf), to_hex(want_dec));
    Bytes round(want);
    c->decrypt_blocks(round.data(), round.data(), blocks);
    ASSERT_EQ(to_hex(round), to_hex(p, 8 * blocks));
  }
}

TEST(Blowfish, DifferentialCbcAgainstOpenSsl) {
  ASSERT_TRUE(openssl_legacy_loaded());
  std::mt19937_64 rng(0xbf0cbc);
  for (int iter = 0; iter < 2000; ++iter) {
    const Bytes key = random_bytes(rng, iter % 3 == 0 ? 16 : 4 + rng() % 53);
    const Bytes iv0 = random_bytes(rng, 8);
    const size_t blocks = rng() % 513;
    const size_t n = 8 * blocks;
    const size_t off_in = 1 + rng() % 7, off_out = 1 + rng() % 7;
    SCOPED_TRACE("iter " + std::to_string(iter) + " key length " + std::to_string(key.size()) + " blocks " +
                 std::to_string(blocks));
    auto c = bf(key);
    ASSERT_NE(c, nullptr);
    const Bytes in = random_bytes(rng, n + off_in);
    const uint8_t* p = in.data() + off_in;
    const Bytes want = openssl_bf(EVP_bf_cbc(), true, key, iv0.data(), p, n);
    const Bytes last_ct = blocks ? Bytes(want.end() - 8, want.end()) : iv0;

    // One shot, misaligned, out of place.
    Bytes iv = iv0, out(n + off_out);
    c->cbc_encrypt(iv.data(), p, out.data() + off_out, blocks);
    ASSERT_EQ(to_hex(out.data() + off_out, n), to_hex(want));
    ASSERT_EQ(to_hex(iv), to_hex(last_ct));

    // In place, split into chained calls at random block boundaries.
    iv = iv0;
    Bytes buf(p, p + n);
    for (size_t pos = 0; pos < blocks;) {
      const size_t k = 1 + rng() % (blocks - pos);
      c->cbc_encrypt(iv.data(), buf.data() + 8 * pos, buf.data() + 8 * pos, k);
      pos += k;
    }
    ASSERT_EQ(to_hex(buf), to_hex(want));

    // Decryption: OpenSSL's ciphertext back, in place and split, and out of place misaligned.
    iv = iv0;
    for (size_t pos = 0; pos < blocks;) {
      const size_t k = 1 + rng() % (blocks - pos);
      c->cbc_decrypt(iv.data(), buf.data() + 8 * pos, buf.data() + 8 * pos, k);
      pos += k;
    }
    ASSERT_EQ(to_hex(buf), to_hex(p, n));
    ASSERT_EQ(to_hex(iv), to_hex(last_ct));
    Bytes ct(n + off_in);
    std::copy(want.begin(), want.end(), ct.begin() + long(off_in));
    iv = iv0;
    c->cbc_decrypt(iv.data(), ct.data() + off_in, out.data() + off_out, blocks);
    ASSERT_EQ(to_hex(out.data() + off_out, n), to_hex(p, n));
    // And OpenSSL's decryption of random data equals ours.
    const Bytes want_dec = openssl_bf(EVP_bf_cbc(), false, key, iv0.data(), p, n);
    iv = iv0;
    c->cbc_decrypt(iv.data(), p, out.data(), blocks);
    ASSERT_EQ(to_hex(out.data(), n), to_hex(want_dec));
  }
}

// cbc_encrypt_lanes equals cbc_encrypt run on each lane, for any number of lanes and lengths.
TEST(Blowfish, CbcLanesEqualPerLaneCbc) {
  std::mt19937_64 rng(0x1a4e5);
  for (int iter = 0; iter < 1500; ++iter) {
    const Bytes key = random_bytes(rng, 4 + rng() % 53);
    auto c = bf(key);
    ASSERT_NE(c, nullptr);
    const size_t n = rng() % 10;
    const bool in_place = rng() % 2;
    std::vector<Bytes> ivs(n), ins(n), outs(n), ref_ivs(n), ref_outs(n);
    std::vector<CbcLane> lanes(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t blocks = rng() % 4 == 0 ? 0 : rng() % 200;
      const size_t off = 1 + rng() % 7;
      ivs[i] = ref_ivs[i] = random_bytes(rng, 8);
      ins[i] = random_bytes(rng, 8 * blocks + off);
      outs[i].assign(8 * blocks + off, 0);
      ref_outs[i].assign(8 * blocks, 0);
      c->cbc_encrypt(ref_ivs[i].data(), ins[i].data() + off, ref_outs[i].data(), blocks);
      if (in_place) outs[i] = ins[i];
      lanes[i] = {ivs[i].data(), (in_place ? outs[i].data() : ins[i].data()) + off, outs[i].data() + off,
                  blocks};
    }
    c->cbc_encrypt_lanes(lanes.data(), n);
    for (size_t i = 0; i < n; ++i) {
      SCOPED_TRACE("iter " + std::to_string(iter) + " lane " + std::to_string(i) + " of " +
                   std::to_string(n));
      const size_t off = outs[i].size() - ref_outs[i].size();
      ASSERT_EQ(to_hex(outs[i].data() + off, ref_outs[i].size()), to_hex(ref_outs[i]));
      ASSERT_EQ(to_hex(ivs[i]), to_hex(ref_ivs[i]));
    }
  }
}

}  // namespace
}  // namespace aesxfer::test
