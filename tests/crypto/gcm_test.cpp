// AES-128-GCM: McGrew-Viega vectors (passing and tampered) on every implementation,
// differential tests against OpenSSL EVP_aes_128_gcm over random keys, nonces, AAD and message
// lengths (misaligned, in place, across the internal chunk size), and rejection of any tampering
// with the output left untouched.
#include "crypto/gcm.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "tests/test_util.h"

namespace {

using aesxfer::test::Bytes;
using aesxfer::test::hex;
using aesxfer::test::random_bytes;
using aesxfer::test::to_hex;
using namespace aesxfer::crypto;

void openssl_seal(const Bytes& key, const Bytes& nonce, const Bytes& aad, const Bytes& pt, Bytes& ct,
                  Bytes& tag) {
  ct.assign(pt.size() + 16, 0);
  tag.assign(16, 0);
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  ASSERT_EQ(1, EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), nullptr, nullptr, nullptr));
  ASSERT_EQ(1, EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, nullptr));
  ASSERT_EQ(1, EVP_EncryptInit_ex(c, nullptr, nullptr, key.data(), nonce.data()));
  int n = 0, m = 0;
  if (!aad.empty()) {
    ASSERT_EQ(1, EVP_EncryptUpdate(c, nullptr, &n, aad.data(), int(aad.size())));
  }
  ASSERT_EQ(1, EVP_EncryptUpdate(c, ct.data(), &n, pt.data(), int(pt.size())));
  ASSERT_EQ(1, EVP_EncryptFinal_ex(c, ct.data() + n, &m));
  ASSERT_EQ(1, EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag.data()));
  EVP_CIPHER_CTX_free(c);
  ct.resize(size_t(n + m));
}

TEST(GcmImpls, EveryAesImplementationHasGcm) {
  const uint8_t key[16] = {3};
  for (AesImpl i : aes_available_impls()) {
    auto g = Aes128Gcm::make(key, i);
    ASSERT_NE(nullptr, g) << aes_impl_name(i);
    EXPECT_STREQ(aes_impl_name(i), g->impl());
  }
  auto best = Aes128Gcm::make(key);
  ASSERT_NE(nullptr, best);
  EXPECT_STREQ(aes_best_impl_name(), best->impl());
  auto impls = aes_available_impls();
  if (std::find(impls.begin(), impls.end(), AesImpl::vaes) == impls.end()) {
    EXPECT_EQ(nullptr, Aes128Gcm::make(key, AesImpl::vaes));
  }
}

TEST(GcmKat, McGrewViegaVectorsOnEveryImplementation) {
  auto recs = aesxfer::test::load_vectors("gcm.txt");
  int pass = 0, fail = 0;
  for (AesImpl impl : aes_available_impls()) {
    for (auto& r : recs) {
      SCOPED_TRACE(std::string(aes_impl_name(impl)) + " line " + r["line"]);
      Bytes key = hex(r["key"]), iv = hex(r["iv"]), aad = hex(r["aad"]), ct = hex(r["ciphertext"]),
            tag = hex(r["tag"]);
      ASSERT_EQ(12u, iv.size());
      auto g = Aes128Gcm::make(key.data(), impl);
      ASSERT_NE(nullptr, g);
      if (r["section"] == "pass") {
        Bytes pt = hex(r["plaintext"]), out(pt.size() + 1), t(16);
        g->seal(iv.data(), aad.data(), aad.size(), pt.data(), out.data(), pt.size(), t.data());
        out.resize(pt.size());
        EXPECT_EQ(to_hex(ct), to_hex(out));
        EXPECT_EQ(to_hex(tag), to_hex(t));
        Bytes dec = ct;  // open in place
        EXPECT_TRUE(
            g->open(iv.data(), aad.data(), aad.size(), dec.data(), dec.data(), dec.size(), tag.data()));
        EXPECT_EQ(to_hex(pt), to_hex(dec));
        ++pass;
      } else {
        ASSERT_EQ("fail", r["section"]);
        Bytes out(ct.size() + 1, 0x5A);
        EXPECT_FALSE(
            g->open(iv.data(), aad.data(), aad.size(), ct.data(), out.data(), ct.size(), tag.data()));
        EXPECT_EQ(Bytes(ct.size() + 1, 0x5A), out) << "output written despite a bad tag";
        Bytes inplace = ct;
        EXPECT_FALSE(g->open(iv.data(), aad.data(), aad.size(), inplace.data(), inplace.data(),
                             inplace.size(), tag.data()));
        EXPECT_EQ(ct, inplace);
        ++fail;
      }
    }
  }
  EXPECT_GE(pass, 4);
  EXPECT_GE(fail, 1);
}

TEST(GcmDiff, MatchesOpenSslRandomAadAndLengths) {
  std::mt19937_64 rng(0x6C3);
  int checked = 0;
  for (AesImpl impl : aes_available_impls()) {
    const int iters = impl == AesImpl::software ? 1000 : 2000;
    for (int it = 0; it < iters; ++it) {
      Bytes key = random_bytes(rng, 16), nonce = random_bytes(rng, 12);
      const size_t aad_len = (it % 5 == 0) ? 0 : rng() % 100;
      // Up to 75 blocks: every mix of the 32-, 16- and 8-block GHASH groups and single blocks.
      const size_t len = (it % 7 == 0) ? 0 : rng() % 1200;
      Bytes aad = random_bytes(rng, aad_len), pt = random_bytes(rng, len), want_ct, want_tag;
      openssl_seal(key, nonce, aad, pt, want_ct, want_tag);
      auto g = Aes128Gcm::make(key.data(), impl);
      ASSERT_NE(nullptr, g);
      // Misaligned input, output and AAD.
      const size_t oi = rng() % 16, oo = rng() % 16, oa = rng() % 16;
      Bytes ib(len + 32), ob(len + 32, 0xEE), ab(aad_len + 32);
      if (len) std::memcpy(ib.data() + oi, pt.data(), len);
      if (aad_len) std::memcpy(ab.data() + oa, aad.data(), aad_len);
      uint8_t tag[16];
      g->seal(nonce.data(), ab.data() + oa, aad_len, ib.data() + oi, ob.data() + oo, len, tag);
      ASSERT_EQ(to_hex(want_ct), to_hex(ob.data() + oo, len)) << aes_impl_name(impl) << " it " << it;
      ASSERT_EQ(to_hex(want_tag), to_hex(tag, 16))
          << aes_impl_name(impl) << " it " << it << " aad " << aad_len << " len " << len;
      EXPECT_EQ(0xEE, ob[oo + len]);
      // Open in place at the odd offset.
      ASSERT_TRUE(g->open(nonce.data(), ab.data() + oa, aad_len, ob.data() + oo, ob.data() + oo, len, tag));
      ASSERT_EQ(to_hex(pt), to_hex(ob.data() + oo, len));
      // Seal in place.
      Bytes buf = pt;
      uint8_t tag2[16];
      g->seal(nonce.data(), aad.data(), aad_len, buf.data(), buf.data(), len, tag2);
      ASSERT_EQ(to_hex(want_ct), to_hex(buf));
      ASSERT_EQ(to_hex(want_tag), to_hex(tag2, 16));
      ++checked;
    }
  }
  EXPECT_GE(checked, 1000);
}

TEST(GcmDiff, LongMessagesAcrossChunks) {
  std::mt19937_64 rng(0x6C4);
  for (AesImpl impl : aes_available_impls()) {
    for (size_t len : {size_t(16 * 1024 - 1), size_t(16 * 1024), size_t(16 * 1024 + 5), size_t(50000),
                       size_t(3 * 16 * 1024 + 16 * 9)}) {
      Bytes key = random_bytes(rng, 16), nonce = random_bytes(rng, 12), aad = random_bytes(rng, 300);
      Bytes pt = random_bytes(rng, len), want_ct, want_tag;
      openssl_seal(key, nonce, aad, pt, want_ct, want_tag);
      auto g = Aes128Gcm::make(key.data(), impl);
      Bytes ct(len);
      uint8_t tag[16];
      g->seal(nonce.data(), aad.data(), aad.size(), pt.data(), ct.data(), len, tag);
      EXPECT_EQ(want_ct, ct) << aes_impl_name(impl) << " len " << len;
      EXPECT_EQ(to_hex(want_tag), to_hex(tag, 16)) << aes_impl_name(impl) << " len " << len;
      Bytes dec(len);
      EXPECT_TRUE(g->open(nonce.data(), aad.data(), aad.size(), ct.data(), dec.data(), len, tag));
      EXPECT_EQ(pt, dec);
    }
  }
}

TEST(GcmTamper, AnyFlippedBitIsRejectedAndOutputUntouched) {
  std::mt19937_64 rng(0x7A3);
  int rejected = 0;
  for (AesImpl impl : aes_available_impls()) {
    for (int it = 0; it < 300; ++it) {
      Bytes key = random_bytes(rng, 16), nonce = random_bytes(rng, 12);
      const size_t aad_len = rng() % 40, len = rng() % 200;
      Bytes aad = random_bytes(rng, aad_len), pt = random_bytes(rng, len), ct(len);
      uint8_t tag[16];
      auto g = Aes128Gcm::make(key.data(), impl);
      g->seal(nonce.data(), aad.data(), aad_len, pt.data(), ct.data(), len, tag);
      const int what = int(rng() % 4);
      Bytes n2 = nonce;
      if (what == 0) {
        tag[rng() % 16] ^= uint8_t(1u << (rng() % 8));
      } else if (what == 1 && len > 0) {
        ct[rng() % len] ^= uint8_t(1u << (rng() % 8));
      } else if (what == 2 && aad_len > 0) {
        aad[rng() % aad_len] ^= uint8_t(1u << (rng() % 8));
      } else {
        n2[rng() % 12] ^= uint8_t(1u << (rng() % 8));
      }
      Bytes out(len + 1, 0xA5);
      ASSERT_FALSE(g->open(n2.data(), aad.data(), aad_len, ct.data(), out.data(), len, tag))
          << aes_impl_name(impl) << " it " << it << " what " << what;
      ASSERT_EQ(Bytes(len + 1, 0xA5), out);
      // Truncated AAD is rejected too.
      if (aad_len > 0) {
        ASSERT_FALSE(g->open(nonce.data(), aad.data(), aad_len - 1, ct.data(), out.data(), len, tag));
      }
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
