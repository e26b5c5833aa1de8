// Constant time, checked by valgrind's memcheck (issue 18; build with -DAESXFER_CT_CHECK=ON, run
// as the CtCheck.* tests of ctest, or scripts/test.sh's constant-time stage).
//
// Every test marks its secrets (keys, plaintext, tags under comparison) as undefined memory with
// crypto::ct_secret() before the code under test sees them. Memcheck then follows everything
// computed from them and reports any conditional branch and any memory address that depends on
// them: exactly the two ways software leaks secrets through timing and cache state. Results are
// marked defined again (ct_public) where they become public by design (ciphertext and tags going on
// the wire, the plaintext handed to the caller, the verdict of a tag comparison or padding check);
// only then may the test compare them. Zero memcheck errors is the pass mark
// (valgrind --error-exitcode=1).
//
// What runs here, each chosen explicitly rather than by CPUID:
//   AES         software (bitsliced, aes_soft.cpp) and vperm (the SSSE3 build of
//               aes_vperm_impl.h): key expansion, ECB both ways, CBC both ways, multi-lane CBC,
//               CTR; and aesni when valgrind's virtual CPU offers AES-NI (constant time by the
//               instruction, checked here for the code around it).
//   GCM         both portable AES with the portable GHASH (gcm.cpp): seal, open, refused open.
//   SHA-256     the portable compression and HMAC-SHA256 (sha256.cpp), one stream and through
//               hmac_sha256_many's portable path; avx2x8 when valgrind's CPU offers AVX2.
//   Checks      ct_equal (crypto/util.cpp) and proto::check_cbc_padding (proto/record.cpp).
//   Records     RecordSealer/RecordOpener for aes128-cbc + hmac-sha256, aes128-ctr + hmac-sha256 and
//               aes128-gcm on the portable code (crypto::Impl::portable, what --no-aesni runs).
// Valgrind 3.19 cannot execute AVX-512, VAES, VPCLMULQDQ or SHA-NI; docs/SECURITY.md says how
// those implementations are argued instead.
//
// CtLeakyCanary.* are deliberately leaky variants (an early-exit tag comparison, an S-box table
// indexed by a secret byte). They are excluded from the pass run; tests/ct/expect_memcheck_error.sh
// runs each alone and passes only if memcheck reports it, proving the check catches both kinds.
#include "crypto/ct.h"

#include <gtest/gtest.h>
#include <valgrind/valgrind.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crypto/aes.h"
#include "crypto/cpu.h"
#include "crypto/gcm.h"
#include "crypto/sha256.h"
#include "crypto/sha256_mb.h"
#include "crypto/suite.h"
#include "crypto/util.h"
#include "proto/error.h"
#include "proto/record.h"

namespace aesxfer {
namespace {

using Bytes = std::vector<uint8_t>;
using crypto::ct_public;
using crypto::ct_secret;

Bytes rand_bytes(std::mt19937_64& rng, size_t n) {
  Bytes b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}
void secret(Bytes& b) { ct_secret(b.data(), b.size()); }
void make_public(Bytes& b) { ct_public(b.data(), b.size()); }

// The AES implementations valgrind can run and that claim constant time.
std::vector<crypto::AesImpl> aes_impls() {
  std::vector<crypto::AesImpl> v = {crypto::AesImpl::software, crypto::AesImpl::vperm};
  for (crypto::AesImpl i : crypto::aes_available_impls())
    if (i == crypto::AesImpl::aesni) v.push_back(i);
  return v;
}

TEST(CtHarness, RunsUnderValgrind) {
  // Outside valgrind the marks are no-ops and nothing below proves anything: refuse to pass.
  EXPECT_TRUE(RUNNING_ON_VALGRIND) << "run this binary under valgrind (ctest -R CtCheck)";
  // Nothing valgrind cannot execute may be chosen by CPUID in this process.
  EXPECT_FALSE(crypto::cpu().avx512f) << "valgrind 3.19 reports no AVX-512";
  EXPECT_FALSE(crypto::cpu().shani);
  // The implementations exercised below exist.
  EXPECT_TRUE(crypto::make_aes128(Bytes(16).data(), crypto::AesImpl::vperm)) << "SSSE3 missing";
  std::printf("[ct] AES implementations checked:");
  for (auto i : aes_impls()) std::printf(" %s", crypto::aes_impl_name(i));
  std::printf("; GHASH: portable%s; multi-lane SHA-256 paths: software%s\n",
              crypto::cpu().pclmul ? ", pclmul (with aesni)" : "",
              crypto::sha256_mb_impl_available(crypto::ShaMbImpl::avx2x8) ? ", avx2x8" : "");
}

// ---- AES ---------------------------------------------------------------------------------------

TEST(CtAes, KeyScheduleAndEveryModeWithSecretKeyAndPlaintext) {
  std::mt19937_64 rng(18);
  for (crypto::AesImpl impl : aes_impls()) {
    SCOPED_TRACE(crypto::aes_impl_name(impl));
    Bytes key = rand_bytes(rng, 16), pt = rand_bytes(rng, 16 * 9), iv = rand_bytes(rng, 16);
    // The reference: the same computations on the bitsliced code with nothing marked.
    auto ref = crypto::make_aes128(key.data(), crypto::AesImpl::software);
    Bytes want_ecb(pt.size()), want_cbc(pt.size());
    ref->encrypt_blocks(pt.data(), want_ecb.data(), 9);
    Bytes v = iv;
    ref->cbc_encrypt(v.data(), pt.data(), want_cbc.data(), 9);

    Bytes k = key;
    secret(k);
    auto bc = crypto::make_aes128(k.data(), impl);  // key expansion on a secret key
    ASSERT_NE(nullptr, bc);
    ASSERT_STREQ(crypto::aes_impl_name(impl), bc->impl());
    for (size_t blocks : {size_t(1), size_t(3), size_t(4), size_t(9)}) {
      Bytes p(pt.begin(), pt.begin() + 16 * blocks), out(p.size()), back(p.size());
      secret(p);
      bc->encrypt_blocks(p.data(), out.data(), blocks);
      bc->decrypt_blocks(out.data(), back.data(), blocks);
      make_public(out);
      make_public(back);
      EXPECT_EQ(Bytes(want_ecb.begin(), want_ecb.begin() + 16 * blocks), out) << blocks << " blocks";
      EXPECT_EQ(Bytes(pt.begin(), pt.begin() + 16 * blocks), back);
    }
    // CBC (the IV is public), both directions, in place.
    Bytes p = pt;
    secret(p);
    v = iv;
    bc->cbc_encrypt(v.data(), p.data(), p.data(), 9);
    make_public(p);
    make_public(v);
    EXPECT_EQ(want_cbc, p);
    v = iv;
    bc->cbc_decrypt(v.data(), p.data(), p.data(), 9);
    make_public(p);
    EXPECT_EQ(pt, p);
    // Multi-lane CBC: three chains of 9, 2 and 5 blocks.
    Bytes ivs[3] = {iv, iv, iv}, ins[3] = {pt, pt, pt},
          outs[3] = {Bytes(pt.size()), Bytes(pt.size()), Bytes(pt.size())};
    crypto::CbcLane lanes[3];
    const size_t nb[3] = {9, 2, 5};
    for (int j = 0; j < 3; ++j) {
      secret(ins[j]);
      lanes[j] = {ivs[j].data(), ins[j].data(), outs[j].data(), nb[j]};
    }
    bc->cbc_encrypt_lanes(lanes, 3);
    for (int j = 0; j < 3; ++j) {
      make_public(outs[j]);
      EXPECT_EQ(Bytes(want_cbc.begin(), want_cbc.begin() + 16 * nb[j]),
                Bytes(outs[j].begin(), outs[j].begin() + 16 * nb[j]));
    }
    // CTR over a partial last block with a secret counter (the record layer derives its counters
    // from the secret iv salt), also from a counter whose low 64 bits wrap inside the message.
    for (int wrap = 0; wrap < 2; ++wrap) {
      Bytes c0 = iv;
      if (wrap) {
        std::memset(c0.data() + 8, 0xFF, 8);
        c0[15] = 0xFD;
      }
      Bytes want(100), rc = c0;
      ref->ctr_xor(rc.data(), pt.data(), want.data(), 100);
      Bytes q(pt.begin(), pt.begin() + 100), o(100), cc = c0;
      secret(q);
      secret(cc);
      bc->ctr_xor(cc.data(), q.data(), o.data(), 100);
      make_public(o);
      make_public(cc);
      EXPECT_EQ(want, o) << "wrap " << wrap;
      EXPECT_EQ(rc, cc) << "counter after, wrap " << wrap;
    }
  }
}

// ---- AES-GCM with the portable GHASH -----------------------------------------------------------

TEST(CtGcm, SealOpenAndRefusalWithSecretKeyAndPlaintext) {
  std::mt19937_64 rng(0x6C);
  for (crypto::AesImpl impl : aes_impls()) {
    SCOPED_TRACE(crypto::aes_impl_name(impl));
    Bytes key = rand_bytes(rng, 16), nonce = rand_bytes(rng, 12), aad = rand_bytes(rng, 21);
    for (size_t len : {size_t(0), size_t(15), size_t(64), size_t(100)}) {
      Bytes pt = rand_bytes(rng, len);
      auto ref = crypto::Aes128Gcm::make(key.data(), crypto::AesImpl::software);
      Bytes want_ct(len);
      uint8_t want_tag[16];
      ref->seal(nonce.data(), aad.data(), aad.size(), pt.data(), want_ct.data(), len, want_tag);

      // The nonce is secret too: the record layer derives it from the iv salt.
      Bytes k = key, p = pt, ct(len), tag(16), nc = nonce;
      secret(k);
      secret(p);
      secret(nc);
      auto g = crypto::Aes128Gcm::make(k.data(), impl);
      ASSERT_NE(nullptr, g);
      g->seal(nc.data(), aad.data(), aad.size(), p.data(), ct.data(), len, tag.data());
      make_public(ct);  // on the wire
      make_public(tag);
      EXPECT_EQ(want_ct, ct);
      EXPECT_EQ(Bytes(want_tag, want_tag + 16), tag);
      // Open: the expected tag is secret until ct_equal's verdict; the plaintext until handed over.
      Bytes dec(len + 1, 0x5A);
      EXPECT_TRUE(g->open(nc.data(), aad.data(), aad.size(), ct.data(), dec.data(), len, tag.data()));
      make_public(dec);
      EXPECT_EQ(pt, Bytes(dec.begin(), dec.begin() + long(len)));
      // A modified tag: refused, nothing written.
      tag[len % 16] ^= 0x10;
      Bytes untouched(len + 1, 0x5A);
      EXPECT_FALSE(
          g->open(nonce.data(), aad.data(), aad.size(), ct.data(), untouched.data(), len, tag.data()));
      EXPECT_EQ(Bytes(len + 1, 0x5A), untouched);
    }
  }
}

// ---- SHA-256 and HMAC-SHA256, portable ---------------------------------------------------------

TEST(CtSha256, PortableDigestOfASecretMessage) {
  std::mt19937_64 rng(256);
  for (size_t len : {size_t(0), size_t(3), size_t(55), size_t(56), size_t(64), size_t(130)}) {
    Bytes m = rand_bytes(rng, len), want(32), got(32);
    crypto::Sha256::digest(m.data(), len, want.data(), crypto::ShaImpl::software);
    secret(m);
    crypto::Sha256 h(crypto::ShaImpl::software);
    ASSERT_STREQ("software", h.impl());
    h.update(m.data(), len / 2);
    h.update(m.data() + len / 2, len - len / 2);
    h.final(got.data());
    make_public(got);
    EXPECT_EQ(want, got) << len;
  }
}

TEST(CtHmac, PortableMacWithSecretKeyAndMessage) {
  std::mt19937_64 rng(2104);
  for (size_t klen : {size_t(16), size_t(32), size_t(64), size_t(100)}) {
    for (size_t len : {size_t(0), size_t(40), size_t(200)}) {
      SCOPED_TRACE("key " + std::to_string(klen) + " message " + std::to_string(len));
      Bytes key = rand_bytes(rng, klen), m = rand_bytes(rng, len), want(32), got(32);
      crypto::HmacSha256(key.data(), klen, crypto::ShaImpl::software).mac(m.data(), len, want.data());
      secret(key);
      secret(m);
      crypto::HmacSha256 h(key.data(), klen, crypto::ShaImpl::software);
      h.mac(m.data(), len, got.data());
      make_public(got);
      EXPECT_EQ(want, got);
      // The multi-buffer entry point's portable path (and AVX2 lanes where valgrind has AVX2).
      std::vector<crypto::ShaMbImpl> mb = {crypto::ShaMbImpl::software};
      if (crypto::sha256_mb_impl_available(crypto::ShaMbImpl::avx2x8))
        mb.push_back(crypto::ShaMbImpl::avx2x8);
      for (crypto::ShaMbImpl impl : mb) {
        crypto::detail::sha256_mb_set_tail_lanes_for_testing(1);
        uint8_t tags[3][32];
        crypto::HmacJob jobs[3];
        for (int j = 0; j < 3; ++j)
          jobs[j] = {m.data(), len / (j + 1), m.data() + len / (j + 1), len - len / (j + 1), tags[j]};
        crypto::hmac_sha256_many_with(impl, h, jobs, 3);
        crypto::detail::sha256_mb_set_tail_lanes_for_testing(0);
        for (int j = 0; j < 3; ++j) {
          ct_public(tags[j], 32);
          EXPECT_EQ(want, Bytes(tags[j], tags[j] + 32)) << crypto::sha256_mb_impl_name(impl) << " job " << j;
        }
      }
    }
  }
}

// ---- The tag comparison and the CBC padding check ----------------------------------------------

TEST(CtChecks, TagComparisonTouchesEveryByteWhateverTheContents) {
  std::mt19937_64 rng(7);
  Bytes a = rand_bytes(rng, 32);
  for (int pos = -1; pos < 32; ++pos) {
    Bytes x = a, y = a;
    if (pos >= 0) y[size_t(pos)] ^= uint8_t(1u << (pos % 8));
    secret(x);
    secret(y);
    for (size_t n : {size_t(16), size_t(32)}) {
      const bool eq = crypto::ct_equal(x.data(), y.data(), n);  // the verdict is public
      EXPECT_EQ(pos < 0 || size_t(pos) >= n, eq) << "difference at " << pos << ", length " << n;
    }
  }
}

TEST(CtChecks, CbcPaddingCheckOnASecretBody) {
  std::mt19937_64 rng(5);
  int accepted = 0, refused = 0;
  for (size_t block : {size_t(16), size_t(8)}) {
    for (unsigned n = 0; n <= block + 2; ++n) {
      for (int corrupt = -1; corrupt < int(block); ++corrupt) {
        Bytes body = rand_bytes(rng, 3 * block);
        const size_t pad = std::min<size_t>(n, block);
        for (size_t i = 0; i < pad; ++i) body[body.size() - 1 - i] = uint8_t(n);
        body.back() = uint8_t(n);
        if (corrupt > 0) body[body.size() - 1 - size_t(corrupt)] ^= 0x80;
        // Ground truth, computed before marking.
        bool valid = n >= 1 && n <= block;
        for (size_t i = 0; valid && i < n; ++i) valid = body[body.size() - 1 - i] == n;
        secret(body);
        size_t got_n = 0;
        const bool ok = proto::check_cbc_padding(body.data(), body.size(), block, got_n);
        EXPECT_EQ(valid, ok) << "block " << block << " n " << n << " corrupt " << corrupt;
        if (ok) {
          EXPECT_EQ(n, got_n);
        }
        (ok ? accepted : refused)++;
      }
    }
  }
  EXPECT_GT(accepted, 20);
  EXPECT_GT(refused, 100);
}

// ---- The record layer, portable code forced ----------------------------------------------------

void record_roundtrip(const char* cipher, const char* mac) {
  SCOPED_TRACE(std::string(cipher) + " + " + mac);
  std::mt19937_64 rng(0xEC);
  constexpr crypto::Impl kPortable = crypto::Impl::portable;
  proto::DirectionKeys keys{};
  Bytes kb = rand_bytes(rng, sizeof keys);
  std::memcpy(&keys, kb.data(), sizeof keys);
  ct_secret(&keys, sizeof keys);
  const crypto::CipherDesc& c = *crypto::find_cipher(cipher);
  const crypto::MacDesc& m = *crypto::find_mac(mac);
  // Single records of a few lengths, each followed by a tampered one (refused on its tag; a
  // failure is final for a connection, so each length gets a fresh sealer and opener).
  for (size_t len : {size_t(0), size_t(1), size_t(16), size_t(77)}) {
    proto::RecordSealer sealer(c, m, keys, kPortable);
    proto::RecordOpener opener(c, m, keys, kPortable);
    Bytes pt = rand_bytes(rng, len), rec(len + sealer.max_overhead());
    std::memcpy(rec.data() + proto::kHeaderLen, pt.data(), len);
    ct_secret(rec.data() + proto::kHeaderLen, len);
    const size_t n = sealer.seal(proto::RecordType::data, 0, rec.data(), len);
    ct_public(rec.data(), n);  // on the wire
    proto::RecordHeader hdr{};
    std::span<uint8_t> payload;
    ASSERT_FALSE(opener.open(rec.data(), n, hdr, payload)) << len;
    ct_public(payload.data(), payload.size());
    EXPECT_EQ(pt, Bytes(payload.begin(), payload.end())) << len;
    Bytes pt2 = rand_bytes(rng, len), rec2(len + sealer.max_overhead());
    std::memcpy(rec2.data() + proto::kHeaderLen, pt2.data(), len);
    ct_secret(rec2.data() + proto::kHeaderLen, len);
    const size_t n2 = sealer.seal(proto::RecordType::data, 0, rec2.data(), len);
    ct_public(rec2.data(), n2);
    rec2[n2 - 1] ^= 0x01;
    EXPECT_EQ(make_error_code(proto::errc::bad_mac), opener.open(rec2.data(), n2, hdr, payload)) << len;
  }
  proto::RecordSealer s2(c, m, keys, kPortable);
  proto::RecordOpener o2(c, m, keys, kPortable);
  Bytes recs[4], pts[4];
  proto::RecordSealer::Job sj[4];
  for (int i = 0; i < 4; ++i) {
    pts[i] = rand_bytes(rng, size_t(5 + 40 * i));
    recs[i].assign(pts[i].size() + s2.max_overhead(), 0);
    std::memcpy(recs[i].data() + proto::kHeaderLen, pts[i].data(), pts[i].size());
    ct_secret(recs[i].data() + proto::kHeaderLen, pts[i].size());
    sj[i] = {proto::RecordType::data, 0, recs[i].data(), pts[i].size(), 0};
  }
  s2.seal_batch(sj, 4);
  proto::RecordOpener::Job oj[4];
  for (int i = 0; i < 4; ++i) {
    ct_public(recs[i].data(), sj[i].wire_len);
    oj[i] = {recs[i].data(), sj[i].wire_len, {}, {}};
  }
  ASSERT_FALSE(o2.open_batch(oj, 4));
  for (int i = 0; i < 4; ++i) {
    ct_public(oj[i].payload.data(), oj[i].payload.size());
    EXPECT_EQ(pts[i], Bytes(oj[i].payload.begin(), oj[i].payload.end())) << "record " << i;
  }
}

TEST(CtRecord, CbcHmacPortable) { record_roundtrip("aes128-cbc", "hmac-sha256"); }
TEST(CtRecord, CtrHmacPortable) { record_roundtrip("aes128-ctr", "hmac-sha256"); }
TEST(CtRecord, GcmPortable) { record_roundtrip("aes128-gcm", "none"); }

// ---- Deliberately leaky variants: memcheck must report these -----------------------------------

// memcmp-style comparison that stops at the first difference: its time tells how many leading
// bytes of a forged tag were right.
__attribute__((noinline)) bool leaky_tag_compare(const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// A table S-box, as textbook AES has: the cache line it touches depends on the secret byte.
__attribute__((noinline)) uint8_t leaky_sbox_lookup(const uint8_t* in, size_t n) {
  static const uint8_t table[256] = {
#define R16(b)                                                                                              \
  b, b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7, b + 8, b + 9, b + 10, b + 11, b + 12, b + 13, b + 14, \
      b + 15
      R16(0x63), R16(0x10), R16(0x20), R16(0x30), R16(0x40), R16(0x50), R16(0x60), R16(0x70), R16(0x80),
      R16(0x90), R16(0xA0), R16(0xB0), R16(0xC0), R16(0xD0), R16(0xE0), R16(0x00)
#undef R16
  };
  uint8_t acc = 0;
  for (size_t i = 0; i < n; ++i) acc ^= table[in[i]];
  return acc;
}

TEST(CtLeakyCanary, SecretBranch) {
  Bytes a(16, 0x42), b(16, 0x42);
  b[9] = 0x43;
  secret(a);
  secret(b);
  bool eq = leaky_tag_compare(a.data(), b.data(), 16);
  ct_public(&eq, sizeof eq);
  EXPECT_FALSE(eq);
}

TEST(CtLeakyCanary, SecretIndex) {
  Bytes k(16, 0x07);
  secret(k);
  uint8_t r = leaky_sbox_lookup(k.data(), k.size());
  ct_public(&r, 1);
  EXPECT_EQ(0, r);  // sixteen equal lookups cancel
}

}  // namespace
}  // namespace aesxfer
