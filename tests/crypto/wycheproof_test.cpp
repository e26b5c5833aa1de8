// Project Wycheproof's edge cases (tests/vectors/wycheproof/, commit dac1dd4) on every
// implementation of the primitive that the product has, and through the product's own layers where
// a case can reach them. Every failure names the file, the group, the tcId and the implementation.
//
//   aes_gcm_test.json        every 128-bit-key group on every AES-GCM implementation of this CPU
//                            (vaes + VPCLMULQDQ, aesni + PCLMULQDQ, vperm512 / vperm / software with
//                            the portable GHASH). Aes128Gcm takes 96-bit nonces only: cases with
//                            any other IV length (SmallIv, LongIv, CounterWrap, ZeroLengthIv...)
//                            must be refused by seal_checked/open_checked with the output untouched.
//   aes_cbc_pkcs5_test.json  the 128-bit-key cases on every AES implementation's CBC core, on the
//                            record layer's padding check and through RecordOpener itself.
//   hmac_sha256_test.json    every case, full and truncated tags, on the one-stream SHA-NI and
//                            portable code and on every multi-lane path.
//   x25519_test.json         libsodium's crypto_scalarmult and crypto_kx_*_session_keys (the calls
//                            the handshake makes) and, for every public key, the handshake itself.
//   ed25519_test.json        crypto_sign_verify_detached (the handshake's call) and the handshake's
//                            two signature checks (ClientAuth on the server, ServerHello on the
//                            client).
#include <gtest/gtest.h>
#include <sodium.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
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
#include "proto/handshake.h"
#include "proto/init.h"
#include "proto/record.h"
#include "tests/test_util.h"

namespace aesxfer {
namespace {

using test::Bytes;
using test::hex;
using test::Json;
using test::to_hex;

// ---- Loading -----------------------------------------------------------------------------------

struct Case {
  const Json* group;
  const Json* t;
  size_t group_index;
  int tc_id;
  std::string where;  // "aes_gcm_test.json group 3 tcId 17 [ModifiedTag] comment"
  const std::string& str(const char* k) const { return t->obj.at(k).str; }
  Bytes bytes(const char* k) const { return hex(str(k)); }
  const std::string& result() const { return str("result"); }
  bool has_flag(const char* f) const {
    for (const Json& j : t->obj.at("flags").arr)
      if (j.str == f) return true;
    return false;
  }
  int group_int(const char* k) const { return int(group->obj.at(k).num); }
};

struct Suite {
  std::string text;
  Json root;
  std::vector<Case> cases;
};

const Suite& load(const std::string& name) {
  static std::map<std::string, Suite> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  Suite& s = cache[name];
  std::ifstream f(std::string(AESXFER_VECTORS_DIR) + "/wycheproof/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  s.text = ss.str();
  test::JsonParser p(s.text);
  if (!p.parse(s.root)) ADD_FAILURE() << name << ": not valid JSON";
  if (s.root.kind != Json::Obj) return s;
  const auto& groups = s.root.obj.at("testGroups").arr;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const Json& t : groups[g].obj.at("tests").arr) {
      Case c{&groups[g], &t, g, int(t.obj.at("tcId").num), {}};
      c.where = name + " group " + std::to_string(g) + " tcId " + std::to_string(c.tc_id) + " [";
      for (const Json& fl : t.obj.at("flags").arr) c.where += fl.str + " ";
      c.where += "] " + t.obj.at("comment").str;
      s.cases.push_back(c);
    }
  }
  // The file says how many cases it holds; all of them must have been read.
  EXPECT_EQ(size_t(s.root.obj.at("numberOfTests").num), s.cases.size()) << name;
  return s;
}

std::string impl_param_name(const ::testing::TestParamInfo<crypto::AesImpl>& i) {
  return crypto::aes_impl_name(i.param);
}

bool aes_impl_here(crypto::AesImpl impl) {
  for (crypto::AesImpl i : crypto::aes_available_impls())
    if (i == impl) return true;
  return false;
}

const auto kAllAes =
    ::testing::Values(crypto::AesImpl::vaes, crypto::AesImpl::aesni, crypto::AesImpl::vperm512,
                      crypto::AesImpl::vperm, crypto::AesImpl::software);

// ---- AES-GCM -----------------------------------------------------------------------------------

class WycheproofGcm : public ::testing::TestWithParam<crypto::AesImpl> {};

TEST_P(WycheproofGcm, Every128BitKeyCase) {
  const crypto::AesImpl impl = GetParam();
  if (!aes_impl_here(impl)) GTEST_SKIP() << crypto::aes_impl_name(impl) << " cannot run on this CPU";
  const Suite& s = load("aes_gcm_test.json");
  int valid_ok = 0, invalid_refused = 0, iv_refused = 0;
  for (const Case& c : s.cases) {
    if (c.group_int("keySize") != 128) continue;
    SCOPED_TRACE(c.where + " on " + crypto::aes_impl_name(impl));
    ASSERT_EQ(128, c.group_int("tagSize"));  // the only tag size Aes128Gcm has (and the file holds)
    const Bytes key = c.bytes("key"), iv = c.bytes("iv"), aad = c.bytes("aad"), msg = c.bytes("msg"),
                ct = c.bytes("ct"), tag = c.bytes("tag");
    ASSERT_EQ(size_t(c.group_int("ivSize")), 8 * iv.size());
    auto g = crypto::Aes128Gcm::make(key.data(), impl);
    ASSERT_NE(nullptr, g);
    ASSERT_STREQ(crypto::aes_impl_name(impl), g->impl());
    const bool valid = c.result() == "valid";
    ASSERT_TRUE(valid || c.result() == "invalid") << "GCM has no acceptable cases";
    const size_t n = msg.size();
    if (iv.size() != crypto::Aes128Gcm::kNonceLen) {
      // Not a 96-bit nonce: refused both ways, nothing written.
      Bytes out(n + 1, 0xA5), t(16, 0xA5);
      EXPECT_FALSE(
          g->seal_checked(iv.data(), iv.size(), aad.data(), aad.size(), msg.data(), out.data(), n, t.data()));
      EXPECT_EQ(Bytes(n + 1, 0xA5), out);
      EXPECT_EQ(Bytes(16, 0xA5), t);
      Bytes dec(ct.size() + 1, 0x5A);
      EXPECT_FALSE(g->open_checked(iv.data(), iv.size(), aad.data(), aad.size(), ct.data(), dec.data(),
                                   ct.size(), tag.data()));
      EXPECT_EQ(Bytes(ct.size() + 1, 0x5A), dec);
      if (valid)
        ++iv_refused;
      else
        ++invalid_refused;
      continue;
    }
    if (valid) {
      Bytes out(n + 1, 0xA5), t(16);
      ASSERT_TRUE(
          g->seal_checked(iv.data(), iv.size(), aad.data(), aad.size(), msg.data(), out.data(), n, t.data()));
      EXPECT_EQ(to_hex(ct), to_hex(out.data(), n));
      EXPECT_EQ(0xA5, out[n]);
      EXPECT_EQ(to_hex(tag), to_hex(t));
      Bytes dec = ct;  // in place
      EXPECT_TRUE(g->open_checked(iv.data(), iv.size(), aad.data(), aad.size(), dec.data(), dec.data(),
                                  dec.size(), tag.data()));
      EXPECT_EQ(to_hex(msg), to_hex(dec));
      Bytes dec2(ct.size() + 1, 0x5A);  // out of place
      EXPECT_TRUE(g->open_checked(iv.data(), iv.size(), aad.data(), aad.size(), ct.data(), dec2.data(),
                                  ct.size(), tag.data()));
      EXPECT_EQ(to_hex(msg), to_hex(dec2.data(), n));
      if (!::testing::Test::HasFailure()) ++valid_ok;
    } else {
      // Modified tags: the open fails and writes nothing, out of place or in place.
      ASSERT_EQ(16u, tag.size());
      Bytes out(ct.size() + 1, 0x5A);
      EXPECT_FALSE(g->open_checked(iv.data(), iv.size(), aad.data(), aad.size(), ct.data(), out.data(),
                                   ct.size(), tag.data()));
      EXPECT_EQ(Bytes(ct.size() + 1, 0x5A), out) << "output written despite a bad tag";
      Bytes inplace = ct;
      EXPECT_FALSE(g->open_checked(iv.data(), iv.size(), aad.data(), aad.size(), inplace.data(),
                                   inplace.data(), inplace.size(), tag.data()));
      EXPECT_EQ(ct, inplace);
      ++invalid_refused;
    }
  }
  // 108 cases have 128-bit keys: 40 valid with 96-bit nonces, 27 invalid (modified tags) with
  // 96-bit nonces, 2 invalid with an empty nonce, 39 valid with nonces of other lengths.
  EXPECT_EQ(40, valid_ok);
  EXPECT_EQ(29, invalid_refused);
  EXPECT_EQ(39, iv_refused);
  std::printf(
      "[wycheproof] aes_gcm %s: %d valid passed, %d invalid refused, %d refused (IV length != 96 bits)\n",
      crypto::aes_impl_name(impl), valid_ok, invalid_refused, iv_refused);
}

INSTANTIATE_TEST_SUITE_P(Impl, WycheproofGcm, kAllAes, impl_param_name);

TEST(WycheproofGcmLimits, OverlongMessagesAreRefused) {
  // GCM's block counter is 32 bits: more than 2^32 - 2 blocks would wrap it. The checked entry
  // points refuse such lengths before touching anything (the buffers here are never read).
  const uint8_t key[16] = {1}, nonce[12] = {2};
  auto g = crypto::Aes128Gcm::make(key);
  uint8_t tag[16] = {0}, byte = 0x77;
  EXPECT_FALSE(g->seal_checked(nonce, 12, nullptr, 0, &byte, &byte, crypto::Aes128Gcm::kMaxLen + 1, tag));
  EXPECT_FALSE(g->open_checked(nonce, 12, nullptr, 0, &byte, &byte, crypto::Aes128Gcm::kMaxLen + 1, tag));
  EXPECT_EQ(0x77, byte);
  EXPECT_TRUE(crypto::Aes128Gcm::params_ok(12, crypto::Aes128Gcm::kMaxLen));
  EXPECT_FALSE(crypto::Aes128Gcm::params_ok(16, 0));
  EXPECT_FALSE(crypto::Aes128Gcm::params_ok(0, 0));
}

// ---- AES-CBC -----------------------------------------------------------------------------------
//
// How the PKCS#5 cases map onto the product. Wycheproof's "PKCS5" padding for AES is n bytes of
// value n, 1 <= n <= 16 (PKCS#7 with b = 16), which is exactly the record layer's padding rule
// (docs/PROTOCOL.md, aes128-cbc): so every valid case's ciphertext decrypts to msg || padding that
// check_cbc_padding accepts with n = 16 - |msg| % 16, and every BadPadding case (ANSI X.923,
// ISO 10126, ISO 7816-4, zero or 0xff padding, padding longer than the block or the message, no
// padding) decrypts to a body the check must refuse. What the record layer does differently is the
// IV and the MAC: its IV is not sent but derived, IV = E_K(iv_salt XOR (0^8 || u64 seq)), and the
// MAC is checked before the padding. The RecordOpener test below therefore picks
// iv_salt = D_K(IV) for sequence number 0, so that the case's IV is the one the record layer uses,
// and frames the case's ciphertext as a record with MAC none and with a valid HMAC-SHA256 tag.
// The empty ciphertext (NoPadding) is refused before decryption (a CBC body must be a non-zero
// multiple of 16 bytes: bad_record_length).

Bytes pkcs7(const Bytes& m) {
  Bytes p = m;
  const size_t n = 16 - m.size() % 16;
  p.insert(p.end(), n, uint8_t(n));
  return p;
}

class WycheproofCbc : public ::testing::TestWithParam<crypto::AesImpl> {};

TEST_P(WycheproofCbc, Every128BitKeyCaseOnTheCbcCore) {
  const crypto::AesImpl impl = GetParam();
  if (!aes_impl_here(impl)) GTEST_SKIP() << crypto::aes_impl_name(impl) << " cannot run on this CPU";
  const Suite& s = load("aes_cbc_pkcs5_test.json");
  int valid_ok = 0, invalid_refused = 0;
  for (const Case& c : s.cases) {
    if (c.group_int("keySize") != 128) continue;
    SCOPED_TRACE(c.where + " on " + crypto::aes_impl_name(impl));
    const Bytes key = c.bytes("key"), iv = c.bytes("iv"), msg = c.bytes("msg"), ct = c.bytes("ct");
    auto bc = crypto::make_aes128(key.data(), impl);
    ASSERT_NE(nullptr, bc);
    ASSERT_EQ(0u, ct.size() % 16);
    const size_t blocks = ct.size() / 16;
    if (c.result() == "valid") {
      const Bytes padded = pkcs7(msg);
      ASSERT_EQ(padded.size(), ct.size());
      Bytes v = iv, out(padded.size());
      bc->cbc_encrypt(v.data(), padded.data(), out.data(), blocks);
      EXPECT_EQ(to_hex(ct), to_hex(out));
      EXPECT_EQ(to_hex(ct.data() + ct.size() - 16, 16), to_hex(v)) << "chaining IV";
      // The multi-lane encryption, the case as one of three lanes.
      Bytes ivs[3] = {iv, iv, iv}, outs[3] = {Bytes(ct.size()), Bytes(ct.size()), Bytes(ct.size())};
      crypto::CbcLane lanes[3];
      for (int k = 0; k < 3; ++k) lanes[k] = {ivs[k].data(), padded.data(), outs[k].data(), blocks};
      bc->cbc_encrypt_lanes(lanes, 3);
      for (int k = 0; k < 3; ++k) EXPECT_EQ(to_hex(ct), to_hex(outs[k])) << "lane " << k;
      v = iv;
      Bytes dec = ct;
      bc->cbc_decrypt(v.data(), dec.data(), dec.data(), blocks);
      EXPECT_EQ(to_hex(padded), to_hex(dec));
      size_t n = 0;
      EXPECT_TRUE(proto::check_cbc_padding(dec.data(), dec.size(), 16, n));
      EXPECT_EQ(padded.size() - msg.size(), n);
      if (!::testing::Test::HasFailure()) ++valid_ok;
    } else {
      ASSERT_EQ("invalid", c.result());
      ASSERT_TRUE(c.has_flag("BadPadding") || c.has_flag("NoPadding"));
      if (ct.empty()) {
        ++invalid_refused;  // nothing to decrypt: the record layer refuses the length (below)
        continue;
      }
      Bytes v = iv, dec = ct;
      bc->cbc_decrypt(v.data(), dec.data(), dec.data(), blocks);
      size_t n = 99;
      EXPECT_FALSE(proto::check_cbc_padding(dec.data(), dec.size(), 16, n)) << "decrypted " << to_hex(dec);
      ++invalid_refused;
    }
  }
  EXPECT_EQ(24, valid_ok);
  EXPECT_EQ(48, invalid_refused);
  std::printf("[wycheproof] aes_cbc_pkcs5 %s: %d valid passed, %d invalid refused\n",
              crypto::aes_impl_name(impl), valid_ok, invalid_refused);
}

INSTANTIATE_TEST_SUITE_P(Impl, WycheproofCbc, kAllAes, impl_param_name);

// Opens the case's ciphertext as record 0 with the given MAC; returns the opener's verdict.
std::error_code open_cbc_case(const Bytes& key, const Bytes& iv, const Bytes& ct, const char* mac_name,
                              crypto::Impl impl, Bytes& payload_out) {
  proto::DirectionKeys k{};
  std::memcpy(k.enc, key.data(), 16);
  for (int i = 0; i < 32; ++i) k.mac[i] = uint8_t(0xC0 + i);
  // iv_salt = D_K(IV): E_K(iv_salt XOR (0^8 || u64 0)) = IV for sequence number 0.
  auto bc = crypto::make_aes128(key.data());
  bc->decrypt_blocks(iv.data(), k.iv, 1);
  const crypto::MacDesc& mac = *crypto::find_mac(mac_name);
  proto::RecordOpener o(*crypto::find_cipher("aes128-cbc"), mac, k, impl);
  Bytes rec(proto::kHeaderLen);
  crypto::store_be32(rec.data(), uint32_t(ct.size()));
  rec[4] = uint8_t(proto::RecordType::data);
  rec.insert(rec.end(), ct.begin(), ct.end());
  if (mac.tag_len) {
    // HMAC-SHA256(mac key, u64 BE seq || header || body), docs/PROTOCOL.md.
    crypto::HmacSha256 h(k.mac, 32);
    uint8_t seq[8] = {0}, tag[32];
    h.begin();
    h.update(seq, 8);
    h.update(rec.data(), rec.size());
    h.finish(tag);
    rec.insert(rec.end(), tag, tag + 32);
  }
  proto::RecordHeader hdr{};
  std::span<uint8_t> payload;
  std::error_code ec = o.open(rec.data(), rec.size(), hdr, payload);
  if (!ec) payload_out.assign(payload.begin(), payload.end());
  return ec;
}

TEST(WycheproofCbcRecord, Every128BitKeyCaseThroughRecordOpener) {
  const Suite& s = load("aes_cbc_pkcs5_test.json");
  for (crypto::Impl impl : {crypto::Impl::best, crypto::Impl::portable}) {
    // The record layer's AES: the best one, then the portable one.
    const char* aes = crypto::aes_impl_name(crypto::dispatch(impl).aes);
    int valid_ok = 0, refused = 0;
    for (const Case& c : s.cases) {
      if (c.group_int("keySize") != 128) continue;
      for (const char* mac : {"none", "hmac-sha256"}) {
        SCOPED_TRACE(c.where + " MAC " + mac + " AES " + aes);
        Bytes payload;
        std::error_code ec = open_cbc_case(c.bytes("key"), c.bytes("iv"), c.bytes("ct"), mac, impl, payload);
        if (c.result() == "valid") {
          EXPECT_FALSE(ec) << ec.message();
          EXPECT_EQ(to_hex(c.bytes("msg")), to_hex(payload));
          ++valid_ok;
        } else if (c.bytes("ct").empty()) {
          EXPECT_EQ(make_error_code(proto::errc::bad_record_length), ec);
          ++refused;
        } else {
          EXPECT_EQ(make_error_code(proto::errc::bad_padding), ec);
          ++refused;
        }
      }
    }
    EXPECT_EQ(2 * 24, valid_ok);
    EXPECT_EQ(2 * 48, refused);
  }
}

// ---- HMAC-SHA256 -------------------------------------------------------------------------------

// Checks one computed 32-byte tag against the case: the first tagSize/8 bytes compared in constant
// time must match for valid cases and must not for invalid ones (modified tags).
void check_tag(const Case& c, const uint8_t full[32], int& ok, int& refused) {
  const Bytes want = c.bytes("tag");
  const size_t tlen = size_t(c.group_int("tagSize")) / 8;
  ASSERT_EQ(tlen, want.size());
  ASSERT_TRUE(tlen == 16 || tlen == 32);
  const bool match = crypto::ct_equal(full, want.data(), tlen);
  if (c.result() == "valid") {
    EXPECT_TRUE(match) << "computed " << to_hex(full, tlen) << " want " << to_hex(want);
    if (match) ++ok;
  } else {
    ASSERT_EQ("invalid", c.result());
    EXPECT_FALSE(match) << "modified tag accepted";
    if (!match) ++refused;
  }
}

class WycheproofHmacOneStream : public ::testing::TestWithParam<crypto::ShaImpl> {};

TEST_P(WycheproofHmacOneStream, EveryCase) {
  const crypto::ShaImpl impl = GetParam();
  if (!crypto::sha256_impl_available(impl)) GTEST_SKIP() << "SHA-NI is not available on this CPU";
  const Suite& s = load("hmac_sha256_test.json");
  int ok = 0, refused = 0;
  for (const Case& c : s.cases) {
    SCOPED_TRACE(c.where + " on " + crypto::sha256_impl_name(impl));
    const Bytes key = c.bytes("key"), msg = c.bytes("msg");
    crypto::HmacSha256 h(key.data(), key.size(), impl);
    uint8_t tag[32], tag2[32];
    h.mac(msg.data(), msg.size(), tag);
    // Incremental, in uneven pieces, must give the same tag.
    h.begin();
    for (size_t off = 0; off < msg.size();) {
      const size_t n = std::min<size_t>(msg.size() - off, 1 + off % 37);
      h.update(msg.data() + off, n);
      off += n;
    }
    h.finish(tag2);
    EXPECT_EQ(to_hex(tag, 32), to_hex(tag2, 32));
    check_tag(c, tag, ok, refused);
  }
  // 174 cases: 66 valid (keys of 128, 256 and 520 bits; 16- and 32-byte tags), 108 modified tags.
  EXPECT_EQ(66, ok);
  EXPECT_EQ(108, refused);
  std::printf("[wycheproof] hmac_sha256 %s: %d valid passed, %d invalid refused\n",
              crypto::sha256_impl_name(impl), ok, refused);
}

INSTANTIATE_TEST_SUITE_P(Impl, WycheproofHmacOneStream,
                         ::testing::Values(crypto::ShaImpl::shani, crypto::ShaImpl::software),
                         [](const ::testing::TestParamInfo<crypto::ShaImpl>& i) {
                           return std::string(i.param == crypto::ShaImpl::shani ? "shani" : "software");
                         });

class WycheproofHmacMultiLane : public ::testing::TestWithParam<crypto::ShaMbImpl> {};

TEST_P(WycheproofHmacMultiLane, EveryCase) {
  const crypto::ShaMbImpl impl = GetParam();
  if (!crypto::sha256_mb_impl_available(impl)) GTEST_SKIP() << "not available on this CPU";
  const std::string name = crypto::sha256_mb_impl_name(impl);
  // Keep the SIMD lanes running to the last message (no hand-over to the one-stream code), so
  // that every case is computed in a lane; restored however the test ends.
  struct TailLanes {
    TailLanes() { crypto::detail::sha256_mb_set_tail_lanes_for_testing(1); }
    ~TailLanes() { crypto::detail::sha256_mb_set_tail_lanes_for_testing(0); }
  } tail_lanes;
  const Suite& s = load("hmac_sha256_test.json");
  int ok = 0, refused = 0;
  for (const Case& c : s.cases) {
    SCOPED_TRACE(c.where + " on multi-lane " + name);
    const Bytes key = c.bytes("key"), msg = c.bytes("msg");
    crypto::HmacSha256 h(key.data(), key.size());
    // The message as three jobs split p1 || p2 at different points (whole message in p1, in p2,
    // and cut in the middle), so lanes of different layouts run together.
    const size_t cuts[3] = {msg.size(), 0, msg.size() / 2};
    uint8_t tags[3][32];
    crypto::HmacJob jobs[3];
    for (int k = 0; k < 3; ++k)
      jobs[k] = {msg.data(), cuts[k], msg.data() + cuts[k], msg.size() - cuts[k], tags[k]};
    crypto::hmac_sha256_many_with(impl, h, jobs, 3);
    for (int k = 1; k < 3; ++k) EXPECT_EQ(to_hex(tags[0], 32), to_hex(tags[k], 32)) << "split " << cuts[k];
    check_tag(c, tags[0], ok, refused);
  }
  EXPECT_EQ(66, ok);
  EXPECT_EQ(108, refused);
  std::printf("[wycheproof] hmac_sha256 multi-lane %s: %d valid passed, %d invalid refused\n", name.c_str(),
              ok, refused);
}

INSTANTIATE_TEST_SUITE_P(Impl, WycheproofHmacMultiLane,
                         ::testing::Values(crypto::ShaMbImpl::avx512x16, crypto::ShaMbImpl::avx2x8,
                                           crypto::ShaMbImpl::shani, crypto::ShaMbImpl::software),
                         [](const ::testing::TestParamInfo<crypto::ShaMbImpl>& i) {
                           switch (i.param) {
                             case crypto::ShaMbImpl::avx512x16:
                               return std::string("avx512x16");
                             case crypto::ShaMbImpl::avx2x8:
                               return std::string("avx2x8");
                             case crypto::ShaMbImpl::shani:
                               return std::string("shani");
                             default:
                               return std::string("software");
                           }
                         });

// ---- A peer that follows the protocol but sends chosen key-exchange values and signatures -------
//
// What it needs to know of the handshake (docs/PROTOCOL.md, "Handshake"): frames are u32 BE
// length | type | body; the ClientHello carries the client's X25519 value at body offset 12, the
// ServerHello the server's at body offset 10; the ServerHello ends with the host's signature over
// "aesxfer-v1 host-sig" || SHA-256(ClientHello || ServerHello without the signature); ClientAuth
// (type 3) is, sealed with AES-128-GCM under a key from K_c2s and TH2 = SHA-256(ClientHello ||
// ServerHello), the client key and its signature over "aesxfer-v4 client-sig" || TH2 || client
// key. The peer made here knows one end's ephemeral secret (the test seam), so it can seal.

constexpr size_t kFrameHead = 5;
constexpr size_t kClientKxAt = kFrameHead + 12, kServerKxAt = kFrameHead + 10;

const crypto::CipherDesc& gcm_cipher() { return *crypto::find_cipher("aes128-gcm"); }
const crypto::MacDesc& hmac_mac() { return *crypto::find_mac("hmac-sha256"); }

Bytes sha256_of(const Bytes& a, const uint8_t* b, size_t blen) {
  crypto::Sha256 h;
  h.update(a.data(), a.size());
  h.update(b, blen);
  Bytes d(32);
  h.final(d.data());
  return d;
}

Bytes sign(const std::string& label, const Bytes& th, const proto::Identity& id) {
  Bytes m(label.begin(), label.end());
  m.insert(m.end(), th.begin(), th.end());
  Bytes sig(64);
  crypto_sign_detached(sig.data(), nullptr, m.data(), m.size(), id.sk.data());
  return sig;
}

// Replaces the last 64 bytes of a frame (a signature) by sig, of any length; fixes the length.
Bytes with_signature(const Bytes& frame, const Bytes& sig) {
  Bytes f(frame.begin(), frame.end() - 64);
  f.insert(f.end(), sig.begin(), sig.end());
  crypto::store_be32(f.data(), uint32_t(f.size() - 4));
  return f;
}

const std::array<uint8_t, 32> kSeamKx = {0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47}, kSeamRandom{};

// The ClientAuth frame for plain (client key || signature of any length), sealed as 1.4 says.
Bytes client_auth_frame(const uint8_t k_c2s[32], const Bytes& th2, const Bytes& plain) {
  std::array<uint8_t, 32> th{};
  std::memcpy(th.data(), th2.data(), 32);
  const Bytes body = proto::seal_client_auth(k_c2s, th, plain);
  Bytes f(4);
  crypto::store_be32(f.data(), uint32_t(1 + body.size()));
  f.push_back(3);
  f.insert(f.end(), body.begin(), body.end());
  return f;
}

// Server side: a client sends `kx` as its X25519 value and signs the transcript properly. The
// server's ephemeral secret is fixed, so the client's K_c2s (= the server's rx) is computable
// without the secret of `kx`.
proto::Step server_meets_client_kx(const Bytes& kx) {
  proto::Identity host = proto::Identity::generate(), client = proto::Identity::generate();
  proto::ClientHandshake c(client, gcm_cipher(), hmac_mac());
  proto::ServerHandshake s(host, [](const proto::PublicKey&) { return true; });
  s.set_ephemeral_for_test(kSeamKx, kSeamRandom);
  Bytes ch = c.start().send;
  std::memcpy(ch.data() + kClientKxAt, kx.data(), 32);
  proto::Step sh = s.feed(ch.data(), ch.size());
  if (sh.ec) return sh;  // refused at the ClientHello: a low-order value (nothing signed, nothing sent)
  uint8_t spk[32], rx[32], tx[32];
  crypto_scalarmult_base(spk, kSeamKx.data());
  EXPECT_EQ(0, crypto_kx_server_session_keys(rx, tx, spk, kSeamKx.data(), kx.data()));
  const Bytes th2 = sha256_of(ch, sh.send.data(), sh.send.size());
  Bytes plain(client.pk.begin(), client.pk.end()), msg = th2;
  msg.insert(msg.end(), client.pk.begin(), client.pk.end());
  const Bytes sig = sign("aesxfer-v4 client-sig", msg, client);
  plain.insert(plain.end(), sig.begin(), sig.end());
  const Bytes auth = client_auth_frame(rx, th2, plain);
  return s.feed(auth.data(), auth.size());
}

// Client side: the (genuine, signing) server sends `kx` as its X25519 value.
proto::Step client_meets_server_kx(const Bytes& kx) {
  proto::Identity host = proto::Identity::generate(), client = proto::Identity::generate();
  proto::ClientHandshake c(client, gcm_cipher(), hmac_mac());
  proto::ServerHandshake s(host, [](const proto::PublicKey&) { return true; });
  Bytes ch = c.start().send;
  Bytes sh = s.feed(ch.data(), ch.size()).send;
  std::memcpy(sh.data() + kServerKxAt, kx.data(), 32);
  const Bytes th1 = sha256_of(ch, sh.data(), sh.size() - 64);
  sh = with_signature(sh, sign("aesxfer-v1 host-sig", th1, host));
  return c.feed(sh.data(), sh.size());
}

// ---- X25519 ------------------------------------------------------------------------------------
//
// Wycheproof marks no X25519 case invalid: 264 are valid and 254 acceptable (implementations may
// compute them or refuse them). What libsodium, and therefore the handshake, does with the
// acceptable ones:
//   - LowOrderPublic / ZeroSharedSecret (31 cases): the shared secret would be all zero, whatever
//     the private key. crypto_scalarmult and crypto_kx_*_session_keys refuse them (-1), and so does
//     the handshake, from either side ("invalid ... key exchange value", bad_handshake): the server
//     at the ClientHello, before it signs a ServerHello; the client at the ServerHello, before it
//     signs a ClientAuth (docs/PROTOCOL.md 1.5).
//   - Twist, NonCanonicalPublic, EdgeCase* (223 cases): computed as RFC 7748 says (the top bit
//     masked, coordinates reduced mod p); libsodium's result equals Wycheproof's, and the handshake
//     accepts such a value (X25519 is twist-secure; an honest peer never sends one, and a dishonest
//     one gains nothing it could not get with its own ordinary key).

bool all_zero(const Bytes& b) {
  for (uint8_t x : b)
    if (x) return false;
  return true;
}

TEST(WycheproofX25519, LibsodiumCallsOfTheHandshake) {
  ASSERT_NO_THROW(proto::init());
  const Suite& s = load("x25519_test.json");
  int valid_ok = 0, acceptable_computed = 0, acceptable_refused = 0;
  for (const Case& c : s.cases) {
    SCOPED_TRACE(c.where);
    const Bytes pub = c.bytes("public"), priv = c.bytes("private"), shared = c.bytes("shared");
    ASSERT_EQ(32u, pub.size());
    ASSERT_EQ(32u, priv.size());
    const bool zero = all_zero(shared);
    EXPECT_EQ(zero, c.has_flag("ZeroSharedSecret"));
    // The primitive.
    Bytes q(32, 0xEE);
    const int rc = crypto_scalarmult(q.data(), priv.data(), pub.data());
    // The key exchange calls, as the handshake makes them: session keys =
    // BLAKE2b-512(shared || client_pk || server_pk), client rx = first half, tx = second half.
    Bytes own_pk(32);
    crypto_scalarmult_base(own_pk.data(), priv.data());
    uint8_t rx[32], tx[32], srx[32], stx[32];
    const int rc_client = crypto_kx_client_session_keys(rx, tx, own_pk.data(), priv.data(), pub.data());
    const int rc_server = crypto_kx_server_session_keys(srx, stx, own_pk.data(), priv.data(), pub.data());
    if (zero) {
      EXPECT_EQ("acceptable", c.result());
      EXPECT_EQ(-1, rc) << "all-zero shared secret computed";
      EXPECT_EQ(-1, rc_client);
      EXPECT_EQ(-1, rc_server);
      ++acceptable_refused;
      continue;
    }
    ASSERT_EQ(0, rc);
    EXPECT_EQ(to_hex(shared), to_hex(q));
    ASSERT_EQ(0, rc_client);
    ASSERT_EQ(0, rc_server);
    uint8_t h[64];
    crypto_generichash_state st;
    crypto_generichash_init(&st, nullptr, 0, 64);
    crypto_generichash_update(&st, shared.data(), 32);
    crypto_generichash_update(&st, own_pk.data(), 32);  // we are the client: client_pk first
    crypto_generichash_update(&st, pub.data(), 32);
    crypto_generichash_final(&st, h, 64);
    EXPECT_EQ(to_hex(h, 32), to_hex(rx, 32));
    EXPECT_EQ(to_hex(h + 32, 32), to_hex(tx, 32));
    crypto_generichash_init(&st, nullptr, 0, 64);
    crypto_generichash_update(&st, shared.data(), 32);
    crypto_generichash_update(&st, pub.data(), 32);  // we are the server: the peer's key first
    crypto_generichash_update(&st, own_pk.data(), 32);
    crypto_generichash_final(&st, h, 64);
    EXPECT_EQ(to_hex(h, 32), to_hex(stx, 32));
    EXPECT_EQ(to_hex(h + 32, 32), to_hex(srx, 32));
    if (c.result() == "valid")
      ++valid_ok;
    else
      ++acceptable_computed;
  }
  EXPECT_EQ(264, valid_ok);
  EXPECT_EQ(223, acceptable_computed);
  EXPECT_EQ(31, acceptable_refused);
  std::printf(
      "[wycheproof] x25519 libsodium: %d valid passed, %d acceptable computed, %d acceptable refused\n",
      valid_ok, acceptable_computed, acceptable_refused);
}

TEST(WycheproofX25519, EveryPublicKeyThroughTheHandshake) {
  const Suite& s = load("x25519_test.json");
  std::map<std::string, bool> seen;  // public key -> zero shared secret (the same for any key)
  for (const Case& c : s.cases) {
    const bool zero = all_zero(c.bytes("shared"));
    auto [it, fresh] = seen.emplace(c.str("public"), zero);
    EXPECT_EQ(it->second, zero) << c.where;
  }
  int refused = 0, accepted = 0;
  for (const auto& [pub_hex, zero] : seen) {
    SCOPED_TRACE("x25519_test.json public key " + pub_hex);
    const Bytes pub = hex(pub_hex);
    const proto::Step srv = server_meets_client_kx(pub);
    const proto::Step cli = client_meets_server_kx(pub);
    if (zero) {
      EXPECT_EQ(make_error_code(proto::errc::bad_handshake), srv.ec);
      EXPECT_FALSE(srv.done);
      EXPECT_TRUE(srv.send.empty());  // refused at the ClientHello, before the server signs
      EXPECT_NE(std::string::npos, srv.detail.find("invalid client key exchange value")) << srv.detail;
      EXPECT_EQ(make_error_code(proto::errc::bad_handshake), cli.ec);
      EXPECT_NE(std::string::npos, cli.detail.find("invalid server key exchange value")) << cli.detail;
      ++refused;
    } else {
      EXPECT_FALSE(srv.ec) << srv.ec.message();
      EXPECT_TRUE(srv.done);
      EXPECT_FALSE(cli.ec) << cli.ec.message();
      ++accepted;
    }
  }
  EXPECT_GT(refused, 10);
  EXPECT_GT(accepted, 100);
  std::printf(
      "[wycheproof] x25519 handshake: %zu distinct public keys, %d refused (zero shared secret), "
      "%d accepted\n",
      seen.size(), refused, accepted);
}

// ---- Ed25519 -----------------------------------------------------------------------------------
//
// The handshake verifies signatures over its own transcript, never over a Wycheproof message, so a
// Wycheproof signature reaches it in one of two forms:
//   - as it is, with the case's public key as the client key (sealed ClientAuth) or host key
//     (ServerHello).
//     That is a real attempt for every defect that does not depend on the message: wrong lengths
//     (TruncatedSignature, SignatureWithGarbage, CompressedSignature: the frame length is refused,
//     bad_handshake), special values of R and S (identity, 0, L...), S just above L, R with y = 1
//     and the sign bit set.
//   - transplanted: where the file has a valid signature of the same message under the same key,
//     the case's difference from it (R XOR R', S' - S as integers) is applied to the handshake's
//     own genuine signature, whose message is the transcript. SignatureMalleability (S + L, S + 2L,
//     ..., S + 2^255) then becomes exactly the attack on the handshake: a valid signature made
//     malleable must still be refused; the modified bits of R (InvalidEncoding) likewise.
// Valid cases cannot be replayed into the handshake (their message is not a transcript); they are
// checked on crypto_sign_verify_detached, the call the handshake makes.

TEST(WycheproofEd25519, LibsodiumVerifyOfTheHandshake) {
  ASSERT_NO_THROW(proto::init());
  const Suite& s = load("ed25519_test.json");
  int valid_ok = 0, invalid_refused = 0, length_refused = 0;
  for (const Case& c : s.cases) {
    SCOPED_TRACE(c.where);
    const Bytes pk = hex(c.group->obj.at("publicKey").obj.at("pk").str), msg = c.bytes("msg"),
                sig = c.bytes("sig");
    ASSERT_EQ(32u, pk.size());
    if (sig.size() != crypto_sign_BYTES) {
      // The API takes exactly 64 bytes, as the handshake's fixed-size ClientAuth body and
      // ServerHello field do; other lengths never reach it (see the handshake test).
      EXPECT_EQ("invalid", c.result());
      ++length_refused;
      continue;
    }
    const int rc = crypto_sign_verify_detached(sig.data(), msg.data(), msg.size(), pk.data());
    if (c.result() == "valid") {
      EXPECT_EQ(0, rc);
      if (rc == 0) ++valid_ok;
    } else {
      ASSERT_EQ("invalid", c.result()) << "no acceptable Ed25519 cases in this file";
      EXPECT_NE(0, rc) << "invalid signature accepted";
      if (rc != 0) ++invalid_refused;
    }
  }
  EXPECT_EQ(88, valid_ok);
  EXPECT_EQ(51, invalid_refused);
  EXPECT_EQ(12, length_refused);
  std::printf(
      "[wycheproof] ed25519 libsodium: %d valid passed, %d invalid refused, %d refused (length != 64)\n",
      valid_ok, invalid_refused, length_refused);
}

// S' = S + d (mod 2^256), little-endian 32-byte integers.
void add_le(uint8_t* s, const Bytes& d) {
  unsigned carry = 0;
  for (size_t i = 0; i < 32; ++i) {
    const unsigned v = unsigned(s[i]) + d[i] + carry;
    s[i] = uint8_t(v);
    carry = v >> 8;
  }
}
// d = a - b (mod 2^256).
Bytes sub_le(const uint8_t* a, const uint8_t* b) {
  Bytes d(32);
  int borrow = 0;
  for (size_t i = 0; i < 32; ++i) {
    const int v = int(a[i]) - int(b[i]) - borrow;
    d[i] = uint8_t(v);
    borrow = v < 0;
  }
  return d;
}

// What the handshake is given for one case: either the case's signature as it is (with the case's
// key), or the case's defect applied to a genuine signature (with our own key).
struct SigAttempt {
  bool transplant = false;
  Bytes verbatim;        // when !transplant
  Bytes r_xor, s_delta;  // when transplant
  Bytes apply(const Bytes& genuine) const {
    if (!transplant) return verbatim;
    Bytes out = genuine;
    for (size_t i = 0; i < 32; ++i) out[i] ^= r_xor[i];
    add_le(out.data() + 32, s_delta);
    return out;
  }
};

// A client's ClientAuth (its ephemeral secret kSeamKx) with the attempt applied to its signature:
// opened with K_c2s (the client's tx), the signature changed, sealed again; empty if it does not open.
Bytes with_client_signature(const Bytes& ch, const Bytes& sh, const Bytes& auth, const SigAttempt& a) {
  uint8_t cpk[32], rx[32], tx[32];
  crypto_scalarmult_base(cpk, kSeamKx.data());
  if (crypto_kx_client_session_keys(rx, tx, cpk, kSeamKx.data(), sh.data() + kServerKxAt) != 0) return {};
  const Bytes th2 = sha256_of(ch, sh.data(), sh.size());
  std::array<uint8_t, 32> th{};
  std::memcpy(th.data(), th2.data(), 32);
  const auto opened = proto::open_client_auth(tx, th, std::span(auth).subspan(kFrameHead));
  if (!opened) return {};
  Bytes plain(opened->begin(), opened->begin() + 32);  // the client key (the case's, verbatim)
  const Bytes attempt = a.apply(Bytes(opened->begin() + 32, opened->end()));
  plain.insert(plain.end(), attempt.begin(), attempt.end());
  return client_auth_frame(tx, th2, plain);
}

TEST(WycheproofEd25519, EveryInvalidSignatureIsRefusedByTheHandshake) {
  const Suite& s = load("ed25519_test.json");
  std::map<std::pair<std::string, std::string>, Bytes> valid;  // (pk, msg) -> a valid signature
  for (const Case& c : s.cases)
    if (c.result() == "valid")
      valid.emplace(std::make_pair(c.group->obj.at("publicKey").obj.at("pk").str, c.str("msg")),
                    c.bytes("sig"));
  int verbatim = 0, transplanted = 0;
  for (const Case& c : s.cases) {
    if (c.result() != "invalid") continue;
    SCOPED_TRACE(c.where);
    const std::string pk_hex = c.group->obj.at("publicKey").obj.at("pk").str;
    const Bytes sig = c.bytes("sig");
    SigAttempt a;
    auto v = valid.find({pk_hex, c.str("msg")});
    if (v != valid.end() && sig.size() == 64) {
      a.transplant = true;
      a.r_xor.resize(32);
      for (size_t i = 0; i < 32; ++i) a.r_xor[i] = uint8_t(sig[i] ^ v->second[i]);
      a.s_delta = sub_le(sig.data() + 32, v->second.data() + 32);
      ++transplanted;
    } else {
      a.verbatim = sig;
      ++verbatim;
    }
    const auto expected_ec = [&](std::error_code sig_error) {
      return sig.size() == 64 ? sig_error : make_error_code(proto::errc::bad_handshake);
    };

    // 1. The server checks ClientAuth.
    {
      proto::Identity host = proto::Identity::generate(), me = proto::Identity::generate();
      if (!a.transplant) std::memcpy(me.pk.data(), hex(pk_hex).data(), 32);  // claim the case's key
      proto::ClientHandshake cl(me, gcm_cipher(), hmac_mac());
      proto::ServerHandshake sv(host, [](const proto::PublicKey&) { return true; });
      cl.set_ephemeral_for_test(kSeamKx, kSeamRandom);
      proto::Step a1 = cl.start();
      proto::Step b1 = sv.feed(a1.send.data(), a1.send.size());
      ASSERT_FALSE(b1.ec);
      ASSERT_FALSE(cl.feed(b1.send.data(), b1.send.size()).ec);
      proto::Step d1 = cl.confirm_host();
      ASSERT_TRUE(d1.done);
      const Bytes auth = with_client_signature(a1.send, b1.send, d1.send, a);
      ASSERT_FALSE(auth.empty());
      proto::Step e1 = sv.feed(auth.data(), auth.size());
      EXPECT_EQ(expected_ec(make_error_code(proto::errc::client_signature)), e1.ec) << "ClientAuth accepted";
      EXPECT_FALSE(e1.done);
    }
    // 2. The client checks the ServerHello.
    {
      proto::Identity host = proto::Identity::generate(), me = proto::Identity::generate();
      if (!a.transplant) std::memcpy(host.pk.data(), hex(pk_hex).data(), 32);  // present the case's key
      proto::ClientHandshake cl(me, gcm_cipher(), hmac_mac());
      proto::ServerHandshake sv(host, [](const proto::PublicKey&) { return true; });
      proto::Step a2 = cl.start();
      proto::Step b2 = sv.feed(a2.send.data(), a2.send.size());
      ASSERT_FALSE(b2.ec);
      const Bytes genuine(b2.send.end() - 64, b2.send.end());
      const Bytes sh = with_signature(b2.send, a.apply(genuine));
      proto::Step c2 = cl.feed(sh.data(), sh.size());
      EXPECT_EQ(expected_ec(make_error_code(proto::errc::host_key_signature)), c2.ec)
          << "ServerHello accepted";
      EXPECT_FALSE(cl.host_key());
    }
  }
  EXPECT_EQ(63, verbatim + transplanted);
  EXPECT_GE(transplanted, 8 + 21);  // the malleability group and the modified bits of R
  std::printf(
      "[wycheproof] ed25519 handshake: %d invalid signatures refused as they are, %d refused transplanted "
      "onto the handshake's own signature (both the client's and the host's check)\n",
      verbatim, transplanted);
}

TEST(WycheproofEd25519, TransplantControlGenuineSignaturesStillPass) {
  // The control for the transplant: with a zero difference the handshake's signature goes through,
  // so the refusals above come from the defects, not from the re-framing.
  SigAttempt none;
  none.transplant = true;
  none.r_xor.assign(32, 0);
  none.s_delta.assign(32, 0);
  proto::Identity host = proto::Identity::generate(), me = proto::Identity::generate();
  proto::ClientHandshake cl(me, gcm_cipher(), hmac_mac());
  proto::ServerHandshake sv(host, [](const proto::PublicKey&) { return true; });
  cl.set_ephemeral_for_test(kSeamKx, kSeamRandom);
  proto::Step a = cl.start();
  proto::Step b = sv.feed(a.send.data(), a.send.size());
  const Bytes sh = with_signature(b.send, none.apply(Bytes(b.send.end() - 64, b.send.end())));
  ASSERT_FALSE(cl.feed(sh.data(), sh.size()).ec);
  proto::Step d = cl.confirm_host();
  const Bytes auth = with_client_signature(a.send, sh, d.send, none);
  ASSERT_FALSE(auth.empty());
  proto::Step e = sv.feed(auth.data(), auth.size());
  EXPECT_FALSE(e.ec) << e.ec.message();
  EXPECT_TRUE(e.done);
  // And the X25519 peer: an ordinary public key sent by the test's peer is accepted both ways.
  uint8_t pk[32], sk[32];
  crypto_box_keypair(pk, sk);
  EXPECT_FALSE(server_meets_client_kx(Bytes(pk, pk + 32)).ec);
  EXPECT_FALSE(client_meets_server_kx(Bytes(pk, pk + 32)).ec);
}

}  // namespace
}  // namespace aesxfer
