// CBC and CTR over AES-128: SP 800-38A vectors on every implementation, differential tests
// against OpenSSL (random keys, IVs, lengths; misaligned and in-place buffers), chained calls,
// multi-lane CBC, and the generic BlockCipher modes (through a cipher that overrides nothing).
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crypto/aes.h"
#include "tests/test_util.h"

namespace {

using aesxfer::test::Bytes;
using aesxfer::test::hex;
using aesxfer::test::random_bytes;
using aesxfer::test::to_hex;
using namespace aesxfer::crypto;

// Exposes only the block function of another cipher, so that every mode runs the generic code
// in block_cipher.cpp.
class GenericModes final : public BlockCipher {
 public:
  explicit GenericModes(std::unique_ptr<BlockCipher> c) : c_(std::move(c)) {}
  size_t block_size() const noexcept override { return c_->block_size(); }
  const char* impl() const noexcept override { return c_->impl(); }
  void encrypt_blocks(const uint8_t* in, uint8_t* out, size_t n) const noexcept override {
    c_->encrypt_blocks(in, out, n);
  }
  void decrypt_blocks(const uint8_t* in, uint8_t* out, size_t n) const noexcept override {
    c_->decrypt_blocks(in, out, n);
  }

 private:
  std::unique_ptr<BlockCipher> c_;
};

struct Variant {
  std::string name;
  std::unique_ptr<BlockCipher> (*make)(const uint8_t* key, AesImpl impl);
  AesImpl impl;
};

std::unique_ptr<BlockCipher> make_direct(const uint8_t* key, AesImpl impl) { return make_aes128(key, impl); }
std::unique_ptr<BlockCipher> make_generic(const uint8_t* key, AesImpl impl) {
  return std::make_unique<GenericModes>(make_aes128(key, impl));
}

// Every available implementation with its own modes, and each again with only the generic modes.
std::vector<Variant> variants() {
  std::vector<Variant> v;
  for (AesImpl i : aes_available_impls()) {
    v.push_back({std::string(aes_impl_name(i)), make_direct, i});
    v.push_back({std::string(aes_impl_name(i)) + "+generic", make_generic, i});
  }
  return v;
}

Bytes openssl(const EVP_CIPHER* cipher, bool enc, const Bytes& key, const Bytes& iv, const Bytes& in) {
  Bytes out(in.size() + 16);
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  EXPECT_EQ(1, EVP_CipherInit_ex(c, cipher, nullptr, key.data(), iv.data(), enc ? 1 : 0));
  EVP_CIPHER_CTX_set_padding(c, 0);
  int n1 = 0, n2 = 0;
  EXPECT_EQ(1, EVP_CipherUpdate(c, out.data(), &n1, in.data(), int(in.size())));
  EXPECT_EQ(1, EVP_CipherFinal_ex(c, out.data() + n1, &n2));
  EVP_CIPHER_CTX_free(c);
  out.resize(size_t(n1 + n2));
  return out;
}

// A buffer holding `data` at a given misalignment.
struct Shifted {
  Bytes buf;
  size_t off;
  Shifted(const Bytes& data, size_t offset) : buf(data.size() + 32, 0xEE), off(offset) {
    if (!data.empty()) std::memcpy(buf.data() + off, data.data(), data.size());
  }
  uint8_t* p() { return buf.data() + off; }
  Bytes get(size_t n) const { return Bytes(buf.begin() + long(off), buf.begin() + long(off + n)); }
};

TEST(CbcKat, Sp80038aOnEveryImplementation) {
  auto recs = aesxfer::test::load_vectors("aes128_cbc.txt");
  ASSERT_GE(recs.size(), 3u);
  for (auto& v : variants()) {
    for (auto& r : recs) {
      SCOPED_TRACE(v.name + " line " + r["line"]);
      Bytes key = hex(r["key"]), iv0 = hex(r["iv"]), pt = hex(r["plaintext"]), ct = hex(r["ciphertext"]);
      auto c = v.make(key.data(), v.impl);
      Bytes iv = iv0, out(pt.size());
      c->cbc_encrypt(iv.data(), pt.data(), out.data(), pt.size() / 16);
      EXPECT_EQ(to_hex(ct), to_hex(out));
      EXPECT_EQ(r["next_iv"], to_hex(iv));
      iv = iv0;
      c->cbc_decrypt(iv.data(), ct.data(), out.data(), ct.size() / 16);
      EXPECT_EQ(to_hex(pt), to_hex(out));
      EXPECT_EQ(r["next_iv"], to_hex(iv));
      // In place, block by block (chained).
      Bytes buf = pt;
      iv = iv0;
      for (size_t b = 0; b < buf.size() / 16; ++b)
        c->cbc_encrypt(iv.data(), buf.data() + 16 * b, buf.data() + 16 * b, 1);
      EXPECT_EQ(to_hex(ct), to_hex(buf));
      iv = iv0;
      c->cbc_decrypt(iv.data(), buf.data(), buf.data(), buf.size() / 16);
      EXPECT_EQ(to_hex(pt), to_hex(buf));
    }
  }
}

TEST(CtrKat, Sp80038aOnEveryImplementation) {
  auto recs = aesxfer::test::load_vectors("aes128_ctr.txt");
  ASSERT_GE(recs.size(), 3u);
  for (auto& v : variants()) {
    for (auto& r : recs) {
      SCOPED_TRACE(v.name + " line " + r["line"]);
      Bytes key = hex(r["key"]), ctr0 = hex(r["counter"]), pt = hex(r["plaintext"]),
            ct = hex(r["ciphertext"]);
      auto c = v.make(key.data(), v.impl);
      Bytes ctr = ctr0, out(pt.size());
      c->ctr_xor(ctr.data(), pt.data(), out.data(), pt.size());
      EXPECT_EQ(to_hex(ct), to_hex(out));
      EXPECT_EQ(r["next_counter"], to_hex(ctr));
      Bytes buf = ct;  // decrypt in place
      ctr = ctr0;
      c->ctr_xor(ctr.data(), buf.data(), buf.data(), buf.size());
      EXPECT_EQ(to_hex(pt), to_hex(buf));
      EXPECT_EQ(r["next_counter"], to_hex(ctr));
    }
  }
}

TEST(CbcDiff, MatchesOpenSslMisalignedAndInPlace) {
  std::mt19937_64 rng(0xCBC0);
  int checked = 0;
  for (auto& v : variants()) {
    const int iters = v.impl == AesImpl::software ? 800 : 1500;
    for (int it = 0; it < iters; ++it) {
      Bytes key = random_bytes(rng, 16), iv0 = random_bytes(rng, 16);
      const size_t blocks = rng() % 48;
      Bytes pt = random_bytes(rng, blocks * 16);
      const Bytes want = openssl(EVP_aes_128_cbc(), true, key, iv0, pt);
      auto c = v.make(key.data(), v.impl);
      Shifted in(pt, rng() % 16), out(Bytes(pt.size()), rng() % 16);
      Bytes iv = iv0;
      c->cbc_encrypt(iv.data(), in.p(), out.p(), blocks);
      ASSERT_EQ(to_hex(want), to_hex(out.get(want.size()))) << v.name << " it " << it;
      ASSERT_EQ(blocks ? to_hex(want.data() + want.size() - 16, 16) : to_hex(iv0), to_hex(iv));
      EXPECT_EQ(0xEE, out.buf[out.off + want.size()]);  // nothing written past the end
      // Decrypt in place at the odd offset.
      iv = iv0;
      c->cbc_decrypt(iv.data(), out.p(), out.p(), blocks);
      ASSERT_EQ(to_hex(pt), to_hex(out.get(pt.size()))) << v.name << " it " << it;
      // Decrypt OpenSSL's ciphertext out of place.
      Bytes dec(pt.size());
      iv = iv0;
      c->cbc_decrypt(iv.data(), want.data(), dec.data(), blocks);
      ASSERT_EQ(to_hex(openssl(EVP_aes_128_cbc(), false, key, iv0, want)), to_hex(dec));
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(CbcChained, PiecesEqualOneCall) {
  std::mt19937_64 rng(0xC4A1);
  for (auto& v : variants()) {
    for (int it = 0; it < 100; ++it) {
      Bytes key = random_bytes(rng, 16), iv0 = random_bytes(rng, 16);
      const size_t blocks = rng() % 80;
      Bytes pt = random_bytes(rng, blocks * 16);
      auto c = v.make(key.data(), v.impl);
      Bytes one(pt.size()), iv_one = iv0;
      c->cbc_encrypt(iv_one.data(), pt.data(), one.data(), blocks);
      Bytes pieces(pt.size()), iv = iv0;
      for (size_t done = 0; done < blocks;) {
        const size_t n = std::min<size_t>(blocks - done, rng() % 20);
        c->cbc_encrypt(iv.data(), pt.data() + 16 * done, pieces.data() + 16 * done, n);
        done += n;
      }
      ASSERT_EQ(to_hex(one), to_hex(pieces)) << v.name;
      ASSERT_EQ(to_hex(iv_one), to_hex(iv));
      // Decrypt in pieces, in place.
      iv = iv0;
      for (size_t done = 0; done < blocks;) {
        const size_t n = std::min<size_t>(blocks - done, rng() % 20);
        c->cbc_decrypt(iv.data(), pieces.data() + 16 * done, pieces.data() + 16 * done, n);
        done += n;
      }
      ASSERT_EQ(to_hex(pt), to_hex(pieces)) << v.name;
      ASSERT_EQ(to_hex(iv_one), to_hex(iv));
    }
  }
}

TEST(CbcLanes, EqualPerLaneCbcWithDifferentLengths) {
  std::mt19937_64 rng(0x1A4E5);
  int lanes_checked = 0;
  for (auto& v : variants()) {
    for (int it = 0; it < 60; ++it) {
      Bytes key = random_bytes(rng, 16);
      auto c = v.make(key.data(), v.impl);
      const size_t n = rng() % 21;  // 0..20 lanes
      const bool in_place = rng() % 2;
      std::vector<Bytes> ivs, ins, outs, ref_outs, ref_ivs;
      std::vector<size_t> offs;
      for (size_t k = 0; k < n; ++k) {
        const size_t blocks = (rng() % 4 == 0) ? 0 : rng() % 40;
        ivs.push_back(random_bytes(rng, 16));
        ins.push_back(random_bytes(rng, blocks * 16 + 16));
        outs.push_back(Bytes(blocks * 16 + 16, 0));
        offs.push_back(rng() % 16);
        Bytes iv = ivs.back(), out(blocks * 16);
        c->cbc_encrypt(iv.data(), ins.back().data() + offs.back(), out.data(), blocks);
        ref_outs.push_back(out);
        ref_ivs.push_back(iv);
      }
      std::vector<CbcLane> lanes(n);
      for (size_t k = 0; k < n; ++k) {
        const size_t blocks = ref_outs[k].size() / 16;
        uint8_t* in = ins[k].data() + offs[k];
        lanes[k] = CbcLane{ivs[k].data(), in, in_place ? in : outs[k].data() + (15 - offs[k]), blocks};
      }
      c->cbc_encrypt_lanes(lanes.data(), n);
      for (size_t k = 0; k < n; ++k) {
        const size_t len = ref_outs[k].size();
        ASSERT_EQ(to_hex(ref_outs[k]), to_hex(lanes[k].out, len)) << v.name << " lane " << k << " of " << n;
        ASSERT_EQ(to_hex(ref_ivs[k]), to_hex(ivs[k])) << v.name << " lane " << k;
        ++lanes_checked;
      }
    }
  }
  EXPECT_GT(lanes_checked, 100);
}

TEST(CtrDiff, MatchesOpenSslMisalignedAndInPlace) {
  std::mt19937_64 rng(0xC7E);
  int checked = 0;
  for (auto& v : variants()) {
    const int iters = v.impl == AesImpl::software ? 800 : 1500;
    for (int it = 0; it < iters; ++it) {
      Bytes key = random_bytes(rng, 16), ctr0 = random_bytes(rng, 16);
      // Counters close to a 32-, 64- or 128-bit wrap now and then.
      switch (rng() % 6) {
        case 0:
          std::memset(ctr0.data() + 12, 0xFF, 4);
          break;
        case 1:
          std::memset(ctr0.data() + 8, 0xFF, 8);
          ctr0[15] = uint8_t(0xF0 | ctr0[15]);
          break;
        case 2:
          std::memset(ctr0.data(), 0xFF, 16);
          ctr0[15] = uint8_t(0xF8 | ctr0[15]);
          break;
        default:
          break;
      }
      const size_t len = rng() % 700;
      Bytes pt = random_bytes(rng, len);
      const Bytes want = openssl(EVP_aes_128_ctr(), true, key, ctr0, pt);
      auto c = v.make(key.data(), v.impl);
      Shifted in(pt, rng() % 16), out(Bytes(len), rng() % 16);
      Bytes ctr = ctr0;
      c->ctr_xor(ctr.data(), in.p(), out.p(), len);
      ASSERT_EQ(to_hex(want), to_hex(out.get(len))) << v.name << " it " << it << " ctr " << to_hex(ctr0);
      EXPECT_EQ(0xEE, out.buf[out.off + len]);
      // The counter advanced by ceil(len / 16) blocks.
      Bytes next = ctr0;
      for (size_t b = 0; b < (len + 15) / 16; ++b)
        for (size_t k = 16; k-- > 0;)
          if (++next[k] != 0) break;
      ASSERT_EQ(to_hex(next), to_hex(ctr));
      // In place back to the plaintext.
      ctr = ctr0;
      c->ctr_xor(ctr.data(), out.p(), out.p(), len);
      ASSERT_EQ(to_hex(pt), to_hex(out.get(len)));
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(CtrChained, WholeBlockPiecesEqualOneCall) {
  std::mt19937_64 rng(0xC7C);
  for (auto& v : variants()) {
    for (int it = 0; it < 100; ++it) {
      Bytes key = random_bytes(rng, 16), ctr0 = random_bytes(rng, 16);
      const size_t len = rng() % 1500;
      Bytes pt = random_bytes(rng, len);
      auto c = v.make(key.data(), v.impl);
      Bytes one(len), ctr_one = ctr0;
      c->ctr_xor(ctr_one.data(), pt.data(), one.data(), len);
      Bytes pieces(len), ctr = ctr0;
      for (size_t done = 0; done < len;) {
        size_t n = 16 * (rng() % 12);
        if (n > len - done) n = len - done;  // only the final piece may be partial
        c->ctr_xor(ctr.data(), pt.data() + done, pieces.data() + done, n);
        done += n;
      }
      ASSERT_EQ(to_hex(one), to_hex(pieces)) << v.name;
      ASSERT_EQ(to_hex(ctr_one), to_hex(ctr));
    }
  }
}

TEST(ModesLarge, LongBuffersMatchOpenSsl) {
  std::mt19937_64 rng(0x1A26E);
  Bytes key = random_bytes(rng, 16), iv = random_bytes(rng, 16);
  const size_t len = 64 * 1024 + 16 * 13;
  Bytes pt = random_bytes(rng, len);
  const Bytes cbc = openssl(EVP_aes_128_cbc(), true, key, iv, pt);
  const Bytes ctr = openssl(EVP_aes_128_ctr(), true, key, iv, pt);
  for (auto& v : variants()) {
    auto c = v.make(key.data(), v.impl);
    Bytes out(len), i2 = iv;
    c->cbc_encrypt(i2.data(), pt.data(), out.data(), len / 16);
    EXPECT_EQ(0, std::memcmp(cbc.data(), out.data(), len)) << v.name;
    i2 = iv;
    c->cbc_decrypt(i2.data(), out.data(), out.data(), len / 16);
    EXPECT_EQ(0, std::memcmp(pt.data(), out.data(), len)) << v.name;
    i2 = iv;
    c->ctr_xor(i2.data(), pt.data(), out.data(), len);
    EXPECT_EQ(0, std::memcmp(ctr.data(), out.data(), len)) << v.name;
  }
}

}  // namespace
