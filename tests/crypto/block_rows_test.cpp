// Every block cipher of the cipher table, through the row's own factory, on both dispatch tables:
// its ECB known answers from tests/vectors/<cipher>_ecb.txt (<cipher> = the row name before the
// first '-': aes128-cbc -> aes128_ecb.txt), and CBC, multi-lane CBC and CTR equal to the same
// modes written block at a time over its block function. A new block cipher gets all of this by
// being a table row with a vector file; its own oracle tests (OpenSSL) sit in its own test file.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crypto/dispatch.h"
#include "crypto/suite.h"
#include "crypto/util.h"
#include "tests/test_util.h"

namespace aesxfer::crypto {
namespace {

using test::Bytes;

std::vector<const CipherDesc*> block_rows() {
  std::vector<const CipherDesc*> v;
  for (const auto& c : ciphers())
    if (c.make_block) v.push_back(&c);
  return v;
}

std::string vector_file(const CipherDesc& c) {
  const std::string name = c.name;
  return name.substr(0, name.find('-')) + "_ecb.txt";
}

const std::string& field(const test::Record& r, const char* a, const char* b) {
  auto it = r.find(a);
  if (it == r.end()) it = r.find(b);
  if (it == r.end()) throw std::runtime_error(std::string("vector without ") + a);
  return it->second;
}

class BlockRows : public ::testing::TestWithParam<Impl> {};

TEST_P(BlockRows, EcbKnownAnswersThroughTheRowFactory) {
  const Dispatch& d = dispatch(GetParam());
  ASSERT_FALSE(block_rows().empty());
  for (const CipherDesc* c : block_rows()) {
    SCOPED_TRACE(std::string(c->name) + " on " + cipher_impl_name(*c, d));
    int checked = 0;
    for (const auto& r : test::load_vectors(vector_file(*c))) {
      const Bytes key = test::hex(r.at("key"));
      const Bytes pt = test::hex(field(r, "plaintext", "plain")),
                  ct = test::hex(field(r, "ciphertext", "cipher"));
      auto bc = c->make_block(key.data(), key.size(), d);
      if (!bc) continue;  // a key length this cipher does not take (the file says which)
      ASSERT_EQ(bc->block_size(), c->block_len);
      ASSERT_EQ(pt.size() % c->block_len, 0u);
      Bytes out(pt.size());
      bc->encrypt_blocks(pt.data(), out.data(), pt.size() / c->block_len);
      EXPECT_EQ(test::to_hex(out), test::to_hex(ct)) << "key " << test::to_hex(key);
      bc->decrypt_blocks(ct.data(), out.data(), ct.size() / c->block_len);
      EXPECT_EQ(test::to_hex(out), test::to_hex(pt)) << "key " << test::to_hex(key);
      ++checked;
    }
    EXPECT_GE(checked, 4) << vector_file(*c);
    EXPECT_EQ(nullptr, c->make_block(Bytes(64).data(), 0, d)) << "an empty key must be refused";
  }
}

// CBC over the block function, one block at a time: the reference for every mode entry point.
Bytes cbc_reference(const BlockCipher& bc, Bytes iv, const Bytes& pt) {
  const size_t b = bc.block_size();
  Bytes out(pt.size());
  for (size_t i = 0; i < pt.size(); i += b) {
    crypto::xor_bytes(iv.data(), iv.data(), pt.data() + i, b);
    bc.encrypt_blocks(iv.data(), out.data() + i, 1);
    std::memcpy(iv.data(), out.data() + i, b);
  }
  return out;
}

Bytes ctr_reference(const BlockCipher& bc, Bytes ctr, const Bytes& pt) {
  const size_t b = bc.block_size();
  Bytes out(pt.size()), ks(b);
  for (size_t i = 0; i < pt.size(); i += b) {
    bc.encrypt_blocks(ctr.data(), ks.data(), 1);
    for (size_t j = 0; j < b && i + j < pt.size(); ++j) out[i + j] = uint8_t(pt[i + j] ^ ks[j]);
    for (size_t k = b; k-- > 0 && ++ctr[k] == 0;) {
    }
  }
  return out;
}

TEST_P(BlockRows, ModesEqualBlockAtATime) {
  const Dispatch& d = dispatch(GetParam());
  std::mt19937_64 rng(0xB10C);
  for (const CipherDesc* c : block_rows()) {
    SCOPED_TRACE(std::string(c->name) + " on " + cipher_impl_name(*c, d));
    const Bytes key = test::random_bytes(rng, c->key_len);
    auto bc = c->make_block(key.data(), key.size(), d);
    ASSERT_NE(nullptr, bc);
    const size_t b = c->block_len;
    constexpr size_t kLanes = 5;
    std::vector<Bytes> pts, ivs, outs;
    CbcLane lanes[kLanes];
    for (size_t i = 0; i < kLanes; ++i) {
      pts.push_back(test::random_bytes(rng, b * (1 + rng() % 40)));
      ivs.push_back(test::random_bytes(rng, b));
      outs.push_back(pts.back());
    }
    for (size_t i = 0; i < kLanes; ++i)
      lanes[i] = CbcLane{ivs[i].data(), outs[i].data(), outs[i].data(), pts[i].size() / b};
    const std::vector<Bytes> iv0 = ivs;
    bc->cbc_encrypt_lanes(lanes, kLanes);
    for (size_t i = 0; i < kLanes; ++i) {
      const Bytes want = cbc_reference(*bc, iv0[i], pts[i]);
      EXPECT_EQ(test::to_hex(outs[i]), test::to_hex(want)) << "lane " << i;
      Bytes one = pts[i], iv = iv0[i];
      bc->cbc_encrypt(iv.data(), one.data(), one.data(), one.size() / b);
      EXPECT_EQ(one, want);
      iv = iv0[i];
      bc->cbc_decrypt(iv.data(), one.data(), one.data(), one.size() / b);
      EXPECT_EQ(one, pts[i]);
      Bytes ctr = iv0[i], x = pts[i];
      x.resize(x.size() - rng() % b);  // a partial final block
      const Bytes want_ctr = ctr_reference(*bc, ctr, x);
      bc->ctr_xor(ctr.data(), x.data(), x.data(), x.size());
      EXPECT_EQ(x, want_ctr);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dispatch, BlockRows, ::testing::Values(Impl::best, Impl::portable),
                         [](const auto& i) { return i.param == Impl::best ? "best" : "portable"; });

}  // namespace
}  // namespace aesxfer::crypto
