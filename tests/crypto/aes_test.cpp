// AES-128 block function: implementation choice, FIPS-197 / SP 800-38A ECB vectors on every
// implementation this CPU can run, the S-box circuit against its definition, and differential
// tests against OpenSSL (random keys, lengths, misaligned and in-place buffers).
#include "crypto/aes.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "crypto/cpu.h"
#include "tests/test_util.h"

namespace aesxfer::crypto::detail {
void aes_sbox_ct_bytes(uint8_t* p, size_t n, bool inverse) noexcept;  // aes_soft.cpp
}

namespace {

using aesxfer::test::Bytes;
using aesxfer::test::hex;
using aesxfer::test::to_hex;
using namespace aesxfer::crypto;

Bytes openssl_ecb(bool enc, const Bytes& key, const uint8_t* in, size_t len) {
  Bytes out(len + 16);
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  EXPECT_EQ(1, EVP_CipherInit_ex(c, EVP_aes_128_ecb(), nullptr, key.data(), nullptr, enc ? 1 : 0));
  EVP_CIPHER_CTX_set_padding(c, 0);
  int n1 = 0, n2 = 0;
  EXPECT_EQ(1, EVP_CipherUpdate(c, out.data(), &n1, in, int(len)));
  EXPECT_EQ(1, EVP_CipherFinal_ex(c, out.data() + n1, &n2));
  EVP_CIPHER_CTX_free(c);
  out.resize(size_t(n1 + n2));
  return out;
}

uint8_t ref_sbox(uint8_t x) {
  // Multiplicative inverse in GF(2^8) mod x^8+x^4+x^3+x+1 (0 -> 0), then the affine map.
  uint8_t inv = 0;
  for (int y = 1; y < 256 && x != 0; ++y) {
    int a = x, b = y, p = 0;
    for (int i = 0; i < 8; ++i) {
      if (b & 1) p ^= a;
      b >>= 1;
      a <<= 1;
      if (a & 0x100) a ^= 0x11b;
    }
    if (p == 1) {
      inv = uint8_t(y);
      break;
    }
  }
  uint8_t s = inv, r = 0x63;
  for (int i = 0; i < 5; ++i) {
    r ^= s;
    s = uint8_t((s << 1) | (s >> 7));
  }
  return r;
}

TEST(AesImpls, AvailableListIsBestFirstAndEndsWithSoftware) {
  auto impls = aes_available_impls();
  ASSERT_FALSE(impls.empty());
  EXPECT_EQ(AesImpl::software, impls.back());
  EXPECT_STREQ(aes_impl_name(impls.front()), aes_best_impl_name());
  const uint8_t key[16] = {0};
  auto best = make_aes128(key);
  ASSERT_NE(nullptr, best);
  EXPECT_STREQ(aes_best_impl_name(), best->impl());
  for (AesImpl i : impls) {
    auto c = make_aes128(key, i);
    ASSERT_NE(nullptr, c) << aes_impl_name(i);
    EXPECT_STREQ(aes_impl_name(i), c->impl());
    EXPECT_EQ(16u, c->block_size());
  }
  if (cpu().aesni) {
    EXPECT_NE(impls.end(), std::find(impls.begin(), impls.end(), AesImpl::aesni));
  }
}

TEST(AesImpls, UnavailableImplementationsGiveNull) {
  const uint8_t key[16] = {0};
  auto impls = aes_available_impls();
  for (AesImpl i : {AesImpl::aesni, AesImpl::vaes, AesImpl::vperm, AesImpl::software}) {
    const bool listed = std::find(impls.begin(), impls.end(), i) != impls.end();
    EXPECT_EQ(listed, make_aes128(key, i) != nullptr) << aes_impl_name(i);
  }
}

TEST(AesImpls, PortableDispatchSelectsConstantTimePortable) {
  const uint8_t key[16] = {1};
  // The portable choice: vector-permute AES where SSSE3 exists (its AVX-512VL build where that
  // exists too: the override leaves out AES instructions, not general vector ones), else the
  // bitsliced one; and the portable GHASH with it.
  const CpuFeatures& f = cpu();
  const bool wide = f.ssse3 && f.avx2 && f.avx512f && f.avx512bw && f.avx512vl;
  const char* want = wide ? "vperm512" : f.ssse3 ? "vperm" : "software";
  const Dispatch& d = dispatch(Impl::portable);
  EXPECT_EQ(d.which, Impl::portable);
  EXPECT_STREQ(want, aes_impl_name(d.aes));
  EXPECT_EQ(GhashImpl::portable, d.ghash);
  auto c = make_aes128(key, d.aes);
  ASSERT_NE(nullptr, c);
  EXPECT_STREQ(want, c->impl());
  EXPECT_STREQ(want, make_aes128_block(key, 16, d)->impl());
  EXPECT_EQ(nullptr, make_aes128_block(key, 15, d));
  // The best table is the portable one exactly when the override is on; otherwise it runs the
  // first implementation of the list.
  const Dispatch& b = dispatch(Impl::best);
  EXPECT_EQ(b.which, Impl::best);
  EXPECT_STREQ(no_aesni() ? want : aes_impl_name(aes_available_impls().front()), aes_impl_name(b.aes));
  // Asking again gives the very same tables (filled once).
  EXPECT_EQ(&d, &dispatch(Impl::portable));
  EXPECT_EQ(&b, &dispatch());
  // The choice cannot change once made: asking for the other one is refused.
  EXPECT_TRUE(init_dispatch(no_aesni()));
  if (!no_aesni()) {
    EXPECT_FALSE(init_dispatch(true));
  }
}

TEST(AesSbox, CircuitMatchesDefinitionAndInverts) {
  uint8_t b[256];
  for (int i = 0; i < 256; ++i) b[i] = uint8_t(i);
  aesxfer::crypto::detail::aes_sbox_ct_bytes(b, 256, false);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(ref_sbox(uint8_t(i)), b[i]) << "S(" << i << ")";
  EXPECT_EQ(0x63, b[0]);
  EXPECT_EQ(0x16, b[255]);
  aesxfer::crypto::detail::aes_sbox_ct_bytes(b, 256, true);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(i, b[i]) << "InvS(S(" << i << "))";
}

TEST(AesKat, EcbVectorsOnEveryImplementation) {
  auto recs = aesxfer::test::load_vectors("aes128_ecb.txt");
  ASSERT_GE(recs.size(), 6u);
  for (AesImpl impl : aes_available_impls()) {
    for (auto& r : recs) {
      SCOPED_TRACE(std::string(aes_impl_name(impl)) + " line " + r["line"]);
      Bytes key = hex(r["key"]), pt = hex(r["plaintext"]), ct = hex(r["ciphertext"]);
      ASSERT_EQ(pt.size(), ct.size());
      auto c = make_aes128(key.data(), impl);
      ASSERT_NE(nullptr, c);
      Bytes out(pt.size());
      c->encrypt_blocks(pt.data(), out.data(), pt.size() / 16);
      EXPECT_EQ(to_hex(ct), to_hex(out));
      c->decrypt_blocks(ct.data(), out.data(), ct.size() / 16);
      EXPECT_EQ(to_hex(pt), to_hex(out));
      Bytes buf = pt;  // in place
      c->encrypt_blocks(buf.data(), buf.data(), buf.size() / 16);
      EXPECT_EQ(to_hex(ct), to_hex(buf));
      c->decrypt_blocks(buf.data(), buf.data(), buf.size() / 16);
      EXPECT_EQ(to_hex(pt), to_hex(buf));
    }
  }
}

TEST(AesDiff, EcbMatchesOpenSslOnRandomKeysLengthsAndAlignments) {
  std::mt19937_64 rng(0xAE5128);
  int checked = 0;
  for (AesImpl impl : aes_available_impls()) {
    const int iters = impl == AesImpl::software ? 1000 : 2000;
    for (int it = 0; it < iters; ++it) {
      Bytes key = aesxfer::test::random_bytes(rng, 16);
      const size_t blocks = rng() % 40;
      const size_t off_in = rng() % 16, off_out = rng() % 16;
      Bytes pt = aesxfer::test::random_bytes(rng, blocks * 16);
      auto c = make_aes128(key.data(), impl);
      ASSERT_NE(nullptr, c);
      Bytes want = openssl_ecb(true, key, pt.data(), pt.size());
      Bytes inb(blocks * 16 + 16), outb(blocks * 16 + 16);
      if (!pt.empty()) std::memcpy(inb.data() + off_in, pt.data(), pt.size());
      c->encrypt_blocks(inb.data() + off_in, outb.data() + off_out, blocks);
      ASSERT_EQ(to_hex(want), to_hex(outb.data() + off_out, want.size()))
          << aes_impl_name(impl) << " it " << it << " blocks " << blocks;
      // Decrypt in place at an odd offset.
      c->decrypt_blocks(outb.data() + off_out, outb.data() + off_out, blocks);
      ASSERT_EQ(to_hex(pt), to_hex(outb.data() + off_out, pt.size()));
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(AesDiff, DecryptMatchesOpenSsl) {
  std::mt19937_64 rng(42);
  for (AesImpl impl : aes_available_impls()) {
    for (int it = 0; it < 200; ++it) {
      Bytes key = aesxfer::test::random_bytes(rng, 16);
      const size_t blocks = 1 + rng() % 20;
      Bytes ct = aesxfer::test::random_bytes(rng, blocks * 16);
      auto c = make_aes128(key.data(), impl);
      Bytes out(ct.size());
      c->decrypt_blocks(ct.data(), out.data(), blocks);
      ASSERT_EQ(to_hex(openssl_ecb(false, key, ct.data(), ct.size())), to_hex(out)) << aes_impl_name(impl);
    }
  }
}

TEST(AesImpls, AllImplementationsAgree) {
  std::mt19937_64 rng(7);
  auto impls = aes_available_impls();
  for (int it = 0; it < 100; ++it) {
    Bytes key = aesxfer::test::random_bytes(rng, 16);
    Bytes pt = aesxfer::test::random_bytes(rng, 16 * 17);
    Bytes ref(pt.size());
    make_aes128(key.data(), AesImpl::software)->encrypt_blocks(pt.data(), ref.data(), 17);
    for (AesImpl impl : impls) {
      Bytes out(pt.size());
      make_aes128(key.data(), impl)->encrypt_blocks(pt.data(), out.data(), 17);
      ASSERT_EQ(to_hex(ref), to_hex(out)) << aes_impl_name(impl);
    }
  }
}

}  // namespace
