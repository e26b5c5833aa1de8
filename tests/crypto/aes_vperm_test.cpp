// Both builds of the vector-permute AES (impls "vperm" and "vperm512") against the bitsliced software AES on
// random inputs: every entry point (ECB both ways, CBC, CTR with partial blocks, multi-lane CBC), every small
// block count so that the 1-4 block interleaving and the tails all run, in place and misaligned.
// (The known-answer and OpenSSL differential tests already run it through aes_available_impls.)
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crypto/aes.h"
#include "crypto/cpu.h"
#include "tests/test_util.h"

namespace {

using aesxfer::test::Bytes;
using aesxfer::test::random_bytes;
using aesxfer::test::to_hex;
using namespace aesxfer::crypto;

// Both builds of the vector-permute code: "vperm" (SSSE3) and "vperm512" (AVX-512VL encodings).
class AesVperm : public ::testing::TestWithParam<AesImpl> {};

// What the CPU must report for an implementation to be offered.
bool cpu_allows(AesImpl impl) {
  const CpuFeatures& f = cpu();
  if (impl == AesImpl::vperm) return f.ssse3;
  return f.ssse3 && f.avx2 && f.avx512f && f.avx512bw && f.avx512vl;
}

bool have(AesImpl impl) {
  for (AesImpl i : aes_available_impls())
    if (i == impl) return true;
  return false;
}

void expect_refused(AesImpl impl) {
  const uint8_t key[16] = {1};
  EXPECT_EQ(make_aes128(key, impl), nullptr);
  for (AesImpl i : aes_available_impls()) EXPECT_NE(i, impl);
}

TEST_P(AesVperm, AvailableExactlyWhenTheCpuAllows) {
  EXPECT_EQ(cpu_allows(GetParam()), have(GetParam()));
  const uint8_t key[16] = {9};
  auto c = make_aes128(key, GetParam());
  EXPECT_EQ(cpu_allows(GetParam()), c != nullptr);
  if (c) {
    EXPECT_STREQ(aes_impl_name(GetParam()), c->impl());
  }
  EXPECT_STREQ(GetParam() == AesImpl::vperm ? "vperm" : "vperm512", aes_impl_name(GetParam()));
}

TEST(AesVpermChoice, PortableDefaultPrefersTheWiderBuild) {
  // With AES-NI present the best choice is never a vperm build; when a vperm build is the best,
  // it is the AVX-512VL one whenever that runs here.
  const std::string best = aes_best_impl_name();
  if (best == "vperm" || best == "vperm512")
    EXPECT_EQ(cpu_allows(AesImpl::vperm512) ? "vperm512" : "vperm", best);
  else
    EXPECT_NE(best, "software");
}

TEST_P(AesVperm, EcbAgreesWithSoftwareOnRandomInputs) {
  // Without the instructions there is nothing to compare: what must hold then is that it is refused.
  if (!have(GetParam())) return expect_refused(GetParam());
  std::mt19937_64 rng(0x7e7e);
  for (int it = 0; it < 400; ++it) {
    const Bytes key = random_bytes(rng, 16);
    const size_t blocks = size_t(it % 23);
    const size_t off = size_t(it % 7);
    auto v = make_aes128(key.data(), GetParam());
    auto s = make_aes128(key.data(), AesImpl::software);
    Bytes pt = random_bytes(rng, 16 * blocks + off);
    Bytes want(16 * blocks), got(16 * blocks + off);
    s->encrypt_blocks(pt.data() + off, want.data(), blocks);
    v->encrypt_blocks(pt.data() + off, got.data() + off, blocks);
    ASSERT_EQ(to_hex(want), to_hex(got.data() + off, 16 * blocks)) << "enc it " << it;
    // Decrypt in place and misaligned.
    v->decrypt_blocks(got.data() + off, got.data() + off, blocks);
    ASSERT_EQ(to_hex(pt.data() + off, 16 * blocks), to_hex(got.data() + off, 16 * blocks)) << "dec it " << it;
    Bytes sdec(16 * blocks);
    s->decrypt_blocks(pt.data() + off, sdec.data(), blocks);
    v->decrypt_blocks(pt.data() + off, got.data(), blocks);
    ASSERT_EQ(to_hex(sdec), to_hex(got.data(), 16 * blocks)) << "dec vs software it " << it;
  }
}

TEST_P(AesVperm, SpecialBlocksAgreeWithSoftware) {
  // Without the instructions there is nothing to compare: what must hold then is that it is refused.
  if (!have(GetParam())) return expect_refused(GetParam());
  // Zero and all-ones keys and data exercise the "infinity" path of the nibble inversion.
  for (uint8_t kb : {uint8_t(0x00), uint8_t(0xff), uint8_t(0x63), uint8_t(0x52)}) {
    Bytes key(16, kb);
    auto v = make_aes128(key.data(), GetParam());
    auto s = make_aes128(key.data(), AesImpl::software);
    Bytes pt(256 * 16);
    for (size_t i = 0; i < pt.size(); ++i) pt[i] = uint8_t(i / 16);  // every byte value, whole blocks
    Bytes a(pt.size()), b(pt.size());
    s->encrypt_blocks(pt.data(), a.data(), 256);
    v->encrypt_blocks(pt.data(), b.data(), 256);
    ASSERT_EQ(to_hex(a), to_hex(b)) << int(kb);
    s->decrypt_blocks(pt.data(), a.data(), 256);
    v->decrypt_blocks(pt.data(), b.data(), 256);
    ASSERT_EQ(to_hex(a), to_hex(b)) << int(kb);
  }
}

TEST_P(AesVperm, ModesAgreeWithSoftwareOnRandomInputs) {
  // Without the instructions there is nothing to compare: what must hold then is that it is refused.
  if (!have(GetParam())) return expect_refused(GetParam());
  std::mt19937_64 rng(0xc0ffee);
  for (int it = 0; it < 300; ++it) {
    const Bytes key = random_bytes(rng, 16);
    auto v = make_aes128(key.data(), GetParam());
    auto s = make_aes128(key.data(), AesImpl::software);
    const size_t blocks = size_t(rng() % 40);
    const Bytes pt = random_bytes(rng, 16 * blocks);
    const Bytes iv = random_bytes(rng, 16);

    Bytes iv1 = iv, iv2 = iv, a(pt.size()), b = pt;
    s->cbc_encrypt(iv1.data(), pt.data(), a.data(), blocks);
    v->cbc_encrypt(iv2.data(), b.data(), b.data(), blocks);  // in place
    ASSERT_EQ(to_hex(a), to_hex(b)) << "cbc enc it " << it;
    ASSERT_EQ(to_hex(iv1), to_hex(iv2));
    iv1 = iv;
    iv2 = iv;
    Bytes c(pt.size());
    s->cbc_decrypt(iv1.data(), a.data(), c.data(), blocks);
    v->cbc_decrypt(iv2.data(), b.data(), b.data(), blocks);  // in place
    ASSERT_EQ(to_hex(pt), to_hex(b)) << "cbc dec it " << it;
    ASSERT_EQ(to_hex(c), to_hex(b));
    ASSERT_EQ(to_hex(iv1), to_hex(iv2));

    // CTR, with a counter that wraps its low 64 bits now and then, and a partial last block.
    Bytes ctr1 = random_bytes(rng, 16);
    if (it % 3 == 0) std::memset(ctr1.data() + 8, 0xff, 8);
    Bytes ctr2 = ctr1;
    const size_t len = blocks * 16 + size_t(rng() % 16);
    const Bytes msg = random_bytes(rng, len);
    Bytes x1(len), x2 = msg;
    s->ctr_xor(ctr1.data(), msg.data(), x1.data(), len);
    v->ctr_xor(ctr2.data(), x2.data(), x2.data(), len);
    ASSERT_EQ(to_hex(x1), to_hex(x2)) << "ctr it " << it << " len " << len;
    ASSERT_EQ(to_hex(ctr1), to_hex(ctr2)) << "ctr it " << it;
  }
}

TEST_P(AesVperm, LanesAgreeWithSoftware) {
  // Without the instructions there is nothing to compare: what must hold then is that it is refused.
  if (!have(GetParam())) return expect_refused(GetParam());
  std::mt19937_64 rng(42);
  for (int it = 0; it < 60; ++it) {
    const Bytes key = random_bytes(rng, 16);
    auto v = make_aes128(key.data(), GetParam());
    auto s = make_aes128(key.data(), AesImpl::software);
    const size_t n = 1 + size_t(rng() % 9);
    std::vector<Bytes> in(n), iv(n), out1(n), out2(n), iv1(n), iv2(n);
    std::vector<CbcLane> l1(n), l2(n);
    for (size_t i = 0; i < n; ++i) {
      const size_t blocks = size_t(rng() % 12);  // some lanes empty, lengths differ
      in[i] = random_bytes(rng, 16 * blocks);
      iv1[i] = iv2[i] = random_bytes(rng, 16);
      out1[i].assign(in[i].size(), 0);
      out2[i].assign(in[i].size(), 0);
      l1[i] = {iv1[i].data(), in[i].data(), out1[i].data(), blocks};
      l2[i] = {iv2[i].data(), in[i].data(), out2[i].data(), blocks};
    }
    s->cbc_encrypt_lanes(l1.data(), n);
    v->cbc_encrypt_lanes(l2.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(to_hex(out1[i]), to_hex(out2[i])) << "it " << it << " lane " << i;
      ASSERT_EQ(to_hex(iv1[i]), to_hex(iv2[i])) << "it " << it << " lane " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Builds, AesVperm, ::testing::Values(AesImpl::vperm, AesImpl::vperm512),
                         [](const ::testing::TestParamInfo<AesImpl>& i) {
                           return std::string(aes_impl_name(i.param));
                         });

}  // namespace
