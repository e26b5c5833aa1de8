// Record layer: round trips for every cipher x MAC, tampering, reordering, bounds, and known-answer
// tests computed independently with OpenSSL (the spec in docs/PROTOCOL.md, second implementation).
#include "proto/record.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sodium.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crypto/blowfish.h"
#include "crypto/rc4.h"
#include "crypto/suite.h"
#include "crypto/util.h"
#include "proto/error.h"
#include "proto/record_protection.h"
#include "proto/record_reader.h"
#include "tests/test_util.h"

namespace aesxfer::proto {
namespace {

using test::Bytes;

// Computed with Python's `cryptography` from the spec (a third implementation); see PROTOCOL.md.
constexpr const char* KAT_CBC_HEX =
    "0000003001000000963c70ffa4bc0bcf331ea327ed7570b5d2900d9b99ccb77d9d2629c3aa8591cf983863378c726a50"
    "17b95541ad9d4e75740e0015917da496fe41ac8ddb24fa2f5a594666ce60527cba18add9ea561f9d";
constexpr const char* KAT_GCM_HEX =
    "0000002001000000584c1ab20b2e8b90fedc20708c435d932212ce0530b3fbedcc25ba0108b9707d1b1196ac1d20e453"
    "9380b8c814d02154";

DirectionKeys pattern_keys(uint8_t start = 0) {
  DirectionKeys k{};
  for (size_t i = 0; i < 32; ++i) k.enc[i] = uint8_t(start + i);
  for (size_t i = 0; i < 32; ++i) k.mac[i] = uint8_t(start + 0x20 + i);
  for (size_t i = 0; i < 16; ++i) k.iv[i] = uint8_t(start + 0x40 + i);
  return k;
}

std::string combo_name(const crypto::CipherDesc& c, const crypto::MacDesc& m) {
  return std::string(c.name) + "+" + m.name;
}
bool authenticated(const crypto::CipherDesc& c, const crypto::MacDesc& m) { return c.aead || m.tag_len > 0; }

uint8_t flags_for(RecordType t) { return t == RecordType::end ? kFlagFinal : 0; }

// Seals one record and returns its wire bytes.
Bytes seal_one(RecordSealer& s, RecordType type, const Bytes& payload) {
  Bytes buf(payload.size() + s.max_overhead());
  if (!payload.empty()) std::memcpy(buf.data() + kHeaderLen, payload.data(), payload.size());
  size_t n = s.seal(type, flags_for(type), buf.data(), payload.size());
  EXPECT_LE(n, buf.size());
  buf.resize(n);
  return buf;
}

// Seals a data record as record number seq through the record protection itself (a sealer
// starts at 0; this reaches any sequence number), with the header the spec gives it.
Bytes seal_with(RecordProtection& p, uint64_t seq, const Bytes& payload) {
  Bytes buf(kHeaderLen + payload.size() + p.max_pad() + p.tag_len());
  if (!payload.empty()) std::memcpy(buf.data() + kHeaderLen, payload.data(), payload.size());
  const size_t body_len = p.body_len(payload.size());
  crypto::store_be32(buf.data(), uint32_t(body_len));
  buf[4] = uint8_t(RecordType::data);
  p.seal(seq, buf.data(), payload.size());
  buf.resize(kHeaderLen + body_len + p.tag_len());
  return buf;
}

Bytes seal_at(const crypto::CipherDesc& c, const crypto::MacDesc& m, const DirectionKeys& k, uint64_t seq,
              const Bytes& payload, crypto::Impl impl = crypto::Impl::best) {
  return seal_with(*make_record_protection(c, m, k, crypto::dispatch(impl)), seq, payload);
}

struct Opened {
  std::vector<Bytes> payloads;
  std::vector<RecordHeader> headers;
  std::error_code ec;
};

// Feeds a stream through a RecordReader in chunks of `chunk` bytes (1 = byte at a time).
Opened read_stream(RecordOpener& o, const Bytes& stream, size_t chunk) {
  Opened out;
  RecordReader r(o);
  size_t off = 0;
  while (off < stream.size()) {
    size_t n = std::min(chunk, stream.size() - off);
    size_t used = r.feed(stream.data() + off, n);
    off += used;
    RecordHeader h{};
    std::span<uint8_t> p;
    RecordReader::Status st;
    while ((st = r.next(h, p, out.ec)) == RecordReader::Status::record) {
      out.payloads.emplace_back(p.begin(), p.end());
      out.headers.push_back(h);
    }
    if (st == RecordReader::Status::error) return out;
    if (used == 0 && n != 0) {
      ADD_FAILURE() << "reader stalled without a record or an error";
      return out;
    }
  }
  EXPECT_FALSE(r.mid_record()) << "stream ended inside a record";
  return out;
}

TEST(Record, RoundTripEveryCipherAndMac) {
  const size_t sizes[] = {0, 1, 15, 16, 17, 4095, kDefaultPayload, kMaxPayload};
  std::mt19937_64 rng(42);
  for (const auto& c : crypto::ciphers()) {
    for (const auto& m : crypto::macs()) {
      SCOPED_TRACE(combo_name(c, m));
      DirectionKeys k = pattern_keys(7);
      RecordSealer s(c, m, k);
      RecordOpener o(c, m, k);
      EXPECT_EQ(s.tag_len(), o.tag_len());
      EXPECT_EQ(s.tag_len(), c.aead ? c.tag_len : m.tag_len);
      Bytes small_stream, big_stream;
      std::vector<Bytes> small_payloads, big_payloads;
      for (size_t n : sizes) {
        Bytes p = test::random_bytes(rng, n);
        RecordType t = n == 17 ? RecordType::end : n == 15 ? RecordType::control : RecordType::data;
        Bytes rec = seal_one(s, t, p);
        EXPECT_EQ(rec.size(), kHeaderLen + crypto::load_be32(rec.data()) + s.tag_len());
        EXPECT_LE(rec.size(), n + s.max_overhead());
        if (c.mode != crypto::CipherMode::none && n >= 16) {
          EXPECT_NE(0, std::memcmp(rec.data() + kHeaderLen, p.data(), 16)) << "payload in clear";
        }
        Bytes& stream = n <= 4095 ? small_stream : big_stream;
        (n <= 4095 ? small_payloads : big_payloads).push_back(p);
        stream.insert(stream.end(), rec.begin(), rec.end());
      }
      EXPECT_EQ(s.next_seq(), std::size(sizes));
      // Small records byte at a time, then the large ones in odd chunks.
      Opened a = read_stream(o, small_stream, 1);
      ASSERT_FALSE(a.ec) << a.ec.message();
      ASSERT_EQ(a.payloads, small_payloads);
      EXPECT_EQ(a.headers[2].type, RecordType::control);
      EXPECT_EQ(a.headers[0].type, RecordType::data);
      EXPECT_EQ(a.headers[4].flags, kFlagFinal);
      EXPECT_EQ(a.headers[4].type, RecordType::end);
      Opened b = read_stream(o, big_stream, 4093);
      ASSERT_FALSE(b.ec) << b.ec.message();
      ASSERT_EQ(b.payloads, big_payloads);
      EXPECT_EQ(o.next_seq(), std::size(sizes));
    }
  }
}

TEST(Record, LargeRecordsByteAtATime) {
  // One combination per mode, the largest record fed one byte at a time.
  std::mt19937_64 rng(7);
  for (const char* name : {"aes128-gcm", "aes128-cbc", "blowfish-cbc", "arcfour", "aes128-ctr"}) {
    SCOPED_TRACE(name);
    const auto* c = crypto::find_cipher(name);
    const auto* m = crypto::find_mac("hmac-sha256");
    DirectionKeys k = pattern_keys(1);
    RecordSealer s(*c, *m, k);
    RecordOpener o(*c, *m, k);
    Bytes p = test::random_bytes(rng, kMaxPayload);
    Bytes rec = seal_one(s, RecordType::data, p);
    Opened r = read_stream(o, rec, 1);
    ASSERT_FALSE(r.ec) << r.ec.message();
    ASSERT_EQ(r.payloads.size(), 1u);
    EXPECT_EQ(r.payloads[0], p);
  }
}

TEST(Record, BatchSizeFollowsWhatInterleavesAcrossRecords) {
  // 16 where CBC chains run as lanes or HMACs run 16 at a time, 3 for GCM (its opener: 2), 4
  // otherwise; sealer and opener agree but for GCM.
  struct Case {
    const char* cipher;
    const char* mac;
    size_t want;
  };
  for (const Case& t :
       {Case{"aes128-gcm", "hmac-sha256", 3}, Case{"none", "none", 4}, Case{"arcfour", "none", 4},
        Case{"aes128-ctr", "none", 4}, Case{"aes128-cbc", "hmac-sha256", 16}, Case{"aes128-cbc", "none", 16},
        Case{"blowfish-cbc", "none", 16}, Case{"aes128-ctr", "hmac-sha256", 16},
        Case{"none", "hmac-sha256", 16}, Case{"arcfour", "hmac-sha256", 16}}) {
    SCOPED_TRACE(std::string(t.cipher) + " " + t.mac);
    const auto* c = crypto::find_cipher(t.cipher);
    const auto* m = crypto::find_mac(t.mac);
    ASSERT_TRUE(c && m);
    DirectionKeys k = pattern_keys(2);
    EXPECT_EQ(RecordSealer(*c, *m, k).batch_records(), t.want);
    EXPECT_EQ(RecordOpener(*c, *m, k).batch_records(), t.cipher == std::string("aes128-gcm") ? 2 : t.want);
  }
}

TEST(Record, ProtectionAtSeqMatchesSequentialSeal) {
  for (const auto& c : crypto::ciphers()) {
    SCOPED_TRACE(c.name);
    const auto* m = crypto::find_mac("hmac-sha256");
    DirectionKeys k = pattern_keys(3);
    RecordSealer s(c, *m, k);
    Bytes p(100, 0x5a);
    Bytes r0 = seal_one(s, RecordType::data, p);
    Bytes r1 = seal_one(s, RecordType::data, p);
    EXPECT_EQ(seal_at(c, *m, k, 1, p), r1);
    EXPECT_EQ(seal_at(c, *m, k, 0, p), r0);
    if (c.mode != crypto::CipherMode::none) {
      EXPECT_NE(r0, r1);
    }
    // Record 1 opens as record 1 and as nothing else.
    auto prot = make_record_protection(c, *m, k, crypto::dispatch());
    size_t len = 0;
    Bytes t = r1;
    EXPECT_EQ(prot->open(0, t.data(), len), make_error_code(errc::bad_mac));
    t = r1;
    ASSERT_FALSE(prot->open(1, t.data(), len));
    EXPECT_EQ(Bytes(t.begin() + kHeaderLen, t.begin() + kHeaderLen + len), p);
  }
}

// The portable code (Impl::portable, as --no-aesni runs it) and the best code make the same
// records, and each opens the other's.
TEST(Record, PortableAndBestCodeAgree) {
  std::mt19937_64 rng(99);
  for (const auto& c : crypto::ciphers()) {
    for (const auto& m : crypto::macs()) {
      SCOPED_TRACE(combo_name(c, m));
      DirectionKeys k = pattern_keys(4);
      RecordSealer best(c, m, k), portable(c, m, k, crypto::Impl::portable);
      RecordOpener open_best(c, m, k), open_portable(c, m, k, crypto::Impl::portable);
      for (size_t n : {size_t(0), size_t(31), size_t(4096), size_t(70001)}) {
        Bytes p = test::random_bytes(rng, n);
        Bytes a = seal_one(best, RecordType::data, p), b = seal_one(portable, RecordType::data, p);
        ASSERT_EQ(test::to_hex(a), test::to_hex(b)) << n;
        RecordHeader h{};
        std::span<uint8_t> out;
        ASSERT_FALSE(open_portable.open(a.data(), a.size(), h, out));
        EXPECT_EQ(Bytes(out.begin(), out.end()), p);
        ASSERT_FALSE(open_best.open(b.data(), b.size(), h, out));
        EXPECT_EQ(Bytes(out.begin(), out.end()), p);
      }
    }
  }
}

// Flip every byte position (two bit masks) of a small record followed by a second record: the
// reader must never deliver the first record; it reports an error (bad_mac or a header error).
TEST(Record, TamperingEveryByteIsDetected) {
  size_t checked = 0;
  for (const auto& c : crypto::ciphers()) {
    for (const auto& m : crypto::macs()) {
      if (!authenticated(c, m)) continue;
      SCOPED_TRACE(combo_name(c, m));
      DirectionKeys k = pattern_keys(9);
      RecordSealer s(c, m, k);
      Bytes rec = seal_one(s, RecordType::control, Bytes{'h', 'e', 'l', 'l', 'o'});
      Bytes second = seal_one(s, RecordType::data, Bytes(40, 1));
      for (size_t i = 0; i < rec.size(); ++i) {
        for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
          Bytes t = rec;
          t[i] ^= mask;
          t.insert(t.end(), second.begin(), second.end());
          RecordOpener o(c, m, k);
          RecordReader r(o);
          size_t off = 0;
          std::error_code ec;
          RecordHeader h{};
          std::span<uint8_t> p;
          RecordReader::Status st = RecordReader::Status::need_more;
          Bytes zeros(65536, 0);
          for (int rounds = 0; rounds < 40 && st == RecordReader::Status::need_more; ++rounds) {
            if (off < t.size())
              off += r.feed(t.data() + off, t.size() - off);
            else
              r.feed(zeros.data(), zeros.size());  // a longer length field waits for more bytes
            st = r.next(h, p, ec);
          }
          ASSERT_EQ(st, RecordReader::Status::error) << "byte " << i << " mask " << int(mask);
          ++checked;
          EXPECT_TRUE(ec == errc::bad_mac || ec == errc::record_too_large || ec == errc::bad_record_type ||
                      ec == errc::bad_record_length)
              << ec.message();
          if (i >= kHeaderLen) {
            EXPECT_EQ(ec, make_error_code(errc::bad_mac)) << "byte " << i;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 800u);
}

TEST(Record, ReorderReplayDropAreDetected) {
  for (const auto& c : crypto::ciphers()) {
    for (const auto& m : crypto::macs()) {
      if (!authenticated(c, m)) continue;
      SCOPED_TRACE(combo_name(c, m));
      DirectionKeys k = pattern_keys(11);
      RecordSealer s(c, m, k);
      Bytes r0 = seal_one(s, RecordType::data, Bytes(32, 0));
      Bytes r1 = seal_one(s, RecordType::data, Bytes(32, 0));  // same payload: only seq differs
      Bytes r2 = seal_one(s, RecordType::end, Bytes(32, 0));
      auto cat = [](std::initializer_list<const Bytes*> l) {
        Bytes b;
        for (auto* x : l) b.insert(b.end(), x->begin(), x->end());
        return b;
      };
      {
        RecordOpener o(c, m, k);
        Opened x = read_stream(o, cat({&r1, &r0}), 1);  // reordered
        EXPECT_EQ(x.ec, make_error_code(errc::bad_mac));
        EXPECT_TRUE(x.payloads.empty());
      }
      {
        RecordOpener o(c, m, k);
        Opened x = read_stream(o, cat({&r0, &r0}), 1);  // replayed
        EXPECT_EQ(x.ec, make_error_code(errc::bad_mac));
        EXPECT_EQ(x.payloads.size(), 1u);
      }
      {
        RecordOpener o(c, m, k);
        Opened x = read_stream(o, cat({&r0, &r2}), 1);  // dropped r1
        EXPECT_EQ(x.ec, make_error_code(errc::bad_mac));
        EXPECT_EQ(x.payloads.size(), 1u);
      }
      {
        RecordOpener o(c, m, k);
        Opened x = read_stream(o, cat({&r0, &r1, &r2}), 7);
        EXPECT_FALSE(x.ec);
        EXPECT_EQ(x.payloads.size(), 3u);
      }
      {  // wrong key (other direction)
        RecordOpener o(c, m, pattern_keys(12));
        Opened x = read_stream(o, r0, 1);
        EXPECT_EQ(x.ec, make_error_code(errc::bad_mac));
      }
    }
  }
}

TEST(Record, ErrorIsSticky) {
  const auto* c = crypto::find_cipher("aes128-gcm");
  const auto* m = crypto::find_mac("none");
  DirectionKeys k = pattern_keys();
  RecordSealer s(*c, *m, k);
  RecordOpener o(*c, *m, k);
  Bytes r0 = seal_one(s, RecordType::data, Bytes(3, 3));
  Bytes bad = r0;
  bad.back() ^= 1;
  RecordReader r(o);
  EXPECT_EQ(r.feed(bad.data(), bad.size()), bad.size());
  RecordHeader h{};
  std::span<uint8_t> p;
  std::error_code ec;
  EXPECT_EQ(r.next(h, p, ec), RecordReader::Status::error);
  EXPECT_EQ(r.feed(r0.data(), r0.size()), 0u);
  EXPECT_EQ(r.next(h, p, ec), RecordReader::Status::error);
  EXPECT_EQ(ec, make_error_code(errc::bad_mac));
}

Bytes header(uint32_t len, uint8_t type, uint8_t flags, uint8_t r0 = 0, uint8_t r1 = 0) {
  Bytes h(8);
  crypto::store_be32(h.data(), len);
  h[4] = type;
  h[5] = flags;
  h[6] = r0;
  h[7] = r1;
  return h;
}

std::error_code header_error(const crypto::CipherDesc& c, const Bytes& h) {
  DirectionKeys k = pattern_keys();
  RecordOpener o(c, *crypto::find_mac("hmac-sha256"), k);
  RecordHeader out{};
  std::error_code ec;
  size_t rest = o.parse_header(h.data(), out, ec);
  if (!ec) {
    EXPECT_EQ(rest, out.body_len + o.tag_len());
  }
  return ec;
}

TEST(Record, HeaderBoundsCheckedBeforeAllocation) {
  const auto& gcm = *crypto::find_cipher("aes128-gcm");
  const auto& cbc = *crypto::find_cipher("aes128-cbc");
  const auto& bf = *crypto::find_cipher("blowfish-cbc");
  const auto& rc4 = *crypto::find_cipher("arcfour");
  auto E = [](errc e) { return make_error_code(e); };
  EXPECT_EQ(header_error(gcm, header(0xffffffff, 1, 0)), E(errc::record_too_large));
  EXPECT_EQ(header_error(gcm, header(kMaxPayload + 1, 1, 0)), E(errc::record_too_large));
  EXPECT_FALSE(header_error(gcm, header(kMaxPayload, 1, 0)));
  EXPECT_FALSE(header_error(gcm, header(0, 1, 0)));
  EXPECT_FALSE(header_error(rc4, header(kMaxPayload, 1, 0)));
  EXPECT_EQ(header_error(rc4, header(kMaxPayload + 1, 1, 0)), E(errc::record_too_large));
  EXPECT_FALSE(header_error(cbc, header(kMaxPayload + 16, 1, 0)));
  EXPECT_EQ(header_error(cbc, header(kMaxPayload + 32, 1, 0)), E(errc::record_too_large));
  EXPECT_FALSE(header_error(bf, header(kMaxPayload + 8, 1, 0)));
  EXPECT_EQ(header_error(bf, header(kMaxPayload + 16, 1, 0)), E(errc::record_too_large));
  EXPECT_EQ(header_error(cbc, header(0, 1, 0)), E(errc::bad_record_length));
  EXPECT_EQ(header_error(cbc, header(17, 1, 0)), E(errc::bad_record_length));
  EXPECT_EQ(header_error(cbc, header(8, 1, 0)), E(errc::bad_record_length));
  EXPECT_FALSE(header_error(bf, header(8, 1, 0)));
  EXPECT_EQ(header_error(gcm, header(16, 0, 0)), E(errc::bad_record_type));
  EXPECT_EQ(header_error(gcm, header(16, 4, 0)), E(errc::bad_record_type));
  EXPECT_EQ(header_error(gcm, header(16, 1, 2)), E(errc::bad_record_type));
  EXPECT_EQ(header_error(gcm, header(16, 1, kFlagFinal)), E(errc::bad_record_type));  // final only on end
  EXPECT_EQ(header_error(gcm, header(16, 3, 0)), E(errc::bad_record_type));           // end needs final
  EXPECT_FALSE(header_error(gcm, header(16, 3, kFlagFinal)));
  EXPECT_FALSE(header_error(gcm, header(16, 2, 0)));
  EXPECT_EQ(header_error(gcm, header(16, 1, 0, 1, 0)), E(errc::bad_record_type));
  EXPECT_EQ(header_error(gcm, header(16, 1, 0, 0, 0x80)), E(errc::bad_record_type));

  // The reader reports an oversized length after 8 bytes, having allocated nothing for it.
  DirectionKeys k = pattern_keys();
  RecordOpener o(gcm, *crypto::find_mac("none"), k);
  RecordReader r(o);
  Bytes h = header(0x7fffffff, 1, 0);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(r.feed(&h[i], 1), 1u);
  RecordHeader out{};
  std::span<uint8_t> p;
  std::error_code ec;
  EXPECT_EQ(r.next(out, p, ec), RecordReader::Status::error);
  EXPECT_EQ(ec, E(errc::record_too_large));
  uint8_t more = 0;
  EXPECT_EQ(r.feed(&more, 1), 0u);
}

TEST(Record, OpenRejectsLengthMismatch) {
  const auto& c = *crypto::find_cipher("aes128-ctr");
  const auto& m = *crypto::find_mac("hmac-sha256");
  DirectionKeys k = pattern_keys();
  RecordSealer s(c, m, k);
  RecordOpener o(c, m, k);
  Bytes r = seal_one(s, RecordType::data, Bytes(10, 1));
  RecordHeader h{};
  std::span<uint8_t> p;
  EXPECT_EQ(o.open(r.data(), r.size() - 1, h, p), make_error_code(errc::bad_record_length));
  EXPECT_EQ(o.open(r.data(), 3, h, p), make_error_code(errc::bad_record_length));
  EXPECT_FALSE(o.open(r.data(), r.size(), h, p));
}

// ---- Known answers: OpenSSL computes the same records from the spec in docs/PROTOCOL.md. ----

Bytes evp(const EVP_CIPHER* cipher, const uint8_t* key, const uint8_t* iv, const Bytes& in) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  EVP_EncryptInit_ex(ctx, cipher, nullptr, key, iv);
  EVP_CIPHER_CTX_set_padding(ctx, 0);
  Bytes out(in.size() + 32);
  int l1 = 0, l2 = 0;
  EVP_EncryptUpdate(ctx, out.data(), &l1, in.data(), int(in.size()));
  EVP_EncryptFinal_ex(ctx, out.data() + l1, &l2);
  EVP_CIPHER_CTX_free(ctx);
  out.resize(size_t(l1 + l2));
  return out;
}

Bytes kat_payload() {
  std::string s = "aesxfer record known-answer test";  // 32 bytes
  return Bytes(s.begin(), s.end());
}

// CBC record around an already padded plaintext (so tests can also build bad padding).
Bytes openssl_cbc_padded(const DirectionKeys& k, uint64_t seq, const Bytes& padded) {
  Bytes hdr = header(uint32_t(padded.size()), 1, 0);
  Bytes ivin(k.iv, k.iv + 16);
  for (int i = 0; i < 8; ++i) ivin[8 + i] ^= uint8_t(seq >> (56 - 8 * i));
  Bytes iv = evp(EVP_aes_128_ecb(), k.enc, nullptr, ivin);
  Bytes ct = evp(EVP_aes_128_cbc(), k.enc, iv.data(), padded);
  Bytes mac_in(8);
  crypto::store_be64(mac_in.data(), seq);
  mac_in.insert(mac_in.end(), hdr.begin(), hdr.end());
  mac_in.insert(mac_in.end(), ct.begin(), ct.end());
  uint8_t tag[32];
  unsigned tl = 0;
  HMAC(EVP_sha256(), k.mac, 32, mac_in.data(), mac_in.size(), tag, &tl);
  Bytes rec = hdr;
  rec.insert(rec.end(), ct.begin(), ct.end());
  rec.insert(rec.end(), tag, tag + 32);
  return rec;
}

Bytes openssl_cbc_record(const DirectionKeys& k, uint64_t seq, const Bytes& payload) {
  Bytes padded = payload;
  size_t n = 16 - payload.size() % 16;
  padded.insert(padded.end(), n, uint8_t(n));
  return openssl_cbc_padded(k, seq, padded);
}

Bytes openssl_ctr_record(const DirectionKeys& k, uint64_t seq, const Bytes& payload) {
  Bytes hdr = header(uint32_t(payload.size()), 1, 0);
  Bytes ctr(k.iv, k.iv + 16);
  for (int i = 0; i < 8; ++i) ctr[4 + i] ^= uint8_t(seq >> (56 - 8 * i));
  for (int i = 12; i < 16; ++i) ctr[i] = 0;
  Bytes ct = evp(EVP_aes_128_ctr(), k.enc, ctr.data(), payload);
  Bytes mac_in(8);
  crypto::store_be64(mac_in.data(), seq);
  mac_in.insert(mac_in.end(), hdr.begin(), hdr.end());
  mac_in.insert(mac_in.end(), ct.begin(), ct.end());
  uint8_t tag[32];
  unsigned tl = 0;
  HMAC(EVP_sha256(), k.mac, 32, mac_in.data(), mac_in.size(), tag, &tl);
  Bytes rec = hdr;
  rec.insert(rec.end(), ct.begin(), ct.end());
  rec.insert(rec.end(), tag, tag + 32);
  return rec;
}

Bytes openssl_gcm_record(const DirectionKeys& k, uint64_t seq, const Bytes& payload) {
  Bytes hdr = header(uint32_t(payload.size()), 1, 0);
  uint8_t nonce[12];
  std::memcpy(nonce, k.iv, 12);
  for (int i = 0; i < 8; ++i) nonce[4 + i] ^= uint8_t(seq >> (56 - 8 * i));
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, nullptr, nullptr);
  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, 12, nullptr);
  EVP_EncryptInit_ex(ctx, nullptr, nullptr, k.enc, nonce);
  int l = 0;
  EVP_EncryptUpdate(ctx, nullptr, &l, hdr.data(), int(hdr.size()));
  Bytes ct(payload.size() + 16);
  int l1 = 0, l2 = 0;
  EVP_EncryptUpdate(ctx, ct.data(), &l1, payload.data(), int(payload.size()));
  EVP_EncryptFinal_ex(ctx, ct.data() + l1, &l2);
  ct.resize(size_t(l1 + l2));
  uint8_t tag[16];
  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag);
  EVP_CIPHER_CTX_free(ctx);
  Bytes rec = hdr;
  rec.insert(rec.end(), ct.begin(), ct.end());
  rec.insert(rec.end(), tag, tag + 16);
  return rec;
}

TEST(RecordKat, MatchesOpenSsl) {
  DirectionKeys k = pattern_keys(0);  // enc = 00..1f, mac = 20..3f, iv = 40..4f
  const auto& hm = *crypto::find_mac("hmac-sha256");
  struct Case {
    const char* cipher;
    Bytes (*oracle)(const DirectionKeys&, uint64_t, const Bytes&);
  } cases[] = {{"aes128-cbc", openssl_cbc_record},
               {"aes128-ctr", openssl_ctr_record},
               {"aes128-gcm", openssl_gcm_record}};
  for (const auto& cs : cases) {
    SCOPED_TRACE(cs.cipher);
    const auto& c = *crypto::find_cipher(cs.cipher);
    for (size_t len : {size_t(0), size_t(5), size_t(32), size_t(100)}) {
      Bytes p = kat_payload();
      p.resize(len, 0xa5);
      for (uint64_t seq : {uint64_t(0), uint64_t(1), uint64_t(0x0102030405060708)}) {
        for (crypto::Impl impl : {crypto::Impl::best, crypto::Impl::portable})
          EXPECT_EQ(test::to_hex(seal_at(c, hm, k, seq, p, impl)), test::to_hex(cs.oracle(k, seq, p)))
              << "len " << len << " seq " << seq << " portable " << (impl == crypto::Impl::portable);
      }
    }
  }
}

// The vectors printed in docs/PROTOCOL.md ("Test vectors"); also computed by OpenSSL above.
TEST(RecordKat, DocumentedVectors) {
  DirectionKeys k = pattern_keys(0);
  const auto& hm = *crypto::find_mac("hmac-sha256");
  Bytes p = kat_payload();
  RecordSealer cbc(*crypto::find_cipher("aes128-cbc"), hm, k);
  RecordSealer gcm(*crypto::find_cipher("aes128-gcm"), hm, k);
  std::string cbc_hex = test::to_hex(seal_one(cbc, RecordType::data, p));
  std::string gcm_hex = test::to_hex(seal_one(gcm, RecordType::data, p));
  EXPECT_EQ(cbc_hex, test::to_hex(openssl_cbc_record(k, 0, p)));
  EXPECT_EQ(gcm_hex, test::to_hex(openssl_gcm_record(k, 0, p)));
  EXPECT_EQ(cbc_hex, KAT_CBC_HEX);
  EXPECT_EQ(gcm_hex, KAT_GCM_HEX);
}

// Blowfish epochs and per-record RC4 keys, computed from the spec with the primitives directly.
TEST(RecordKat, BlowfishRekeyAndRc4PerRecordKeys) {
  DirectionKeys k = pattern_keys(0);
  const auto& none = *crypto::find_mac("none");
  Bytes p = kat_payload();
  auto blake = [&](const char* label, uint64_t v, size_t outlen) {
    Bytes msg(label, label + std::strlen(label));
    uint8_t be[8];
    crypto::store_be64(be, v);
    msg.insert(msg.end(), be, be + 8);
    Bytes out(outlen);
    crypto_generichash(out.data(), outlen, msg.data(), msg.size(), k.enc, 32);
    return out;
  };
  {
    // One object for all: it moves between key epochs in both directions.
    auto prot = make_record_protection(*crypto::find_cipher("blowfish-cbc"), none, k, crypto::dispatch());
    for (uint64_t seq : {uint64_t(0), uint64_t(1023), uint64_t(1024), uint64_t(5000), uint64_t(1)}) {
      uint64_t epoch = seq >> 10;
      Bytes key = epoch == 0 ? Bytes(k.enc, k.enc + 16) : blake("aesxfer-v1 rekey", epoch, 16);
      auto bf = crypto::make_blowfish(key.data(), key.size());
      uint8_t iv[8];
      for (int i = 0; i < 8; ++i) iv[i] = uint8_t(k.iv[i] ^ uint8_t(seq >> (56 - 8 * i)));
      bf->encrypt_blocks(iv, iv, 1);
      Bytes body = p;
      body.insert(body.end(), 8, 8);
      bf->cbc_encrypt(iv, body.data(), body.data(), body.size() / 8);
      Bytes expect = header(uint32_t(body.size()), 1, 0);
      expect.insert(expect.end(), body.begin(), body.end());
      EXPECT_EQ(test::to_hex(seal_with(*prot, seq, p)), test::to_hex(expect)) << "seq " << seq;
    }
  }
  {
    const auto& rc4c = *crypto::find_cipher("arcfour");
    for (uint64_t seq : {uint64_t(0), uint64_t(1), uint64_t(77)}) {
      Bytes key = blake("aesxfer-v1 rc4", seq, 16);
      crypto::Rc4 rc4(key.data(), key.size(), 1536);
      Bytes body = p;
      rc4.xor_stream(body.data(), body.data(), body.size());
      Bytes expect = header(uint32_t(body.size()), 1, 0);
      expect.insert(expect.end(), body.begin(), body.end());
      EXPECT_EQ(test::to_hex(seal_at(rc4c, none, k, seq, p)), test::to_hex(expect)) << "seq " << seq;
    }
  }
}

TEST(Record, CbcBadPaddingAfterValidMac) {
  // Only a key holder can produce a valid MAC over bad padding: build such records with OpenSSL.
  DirectionKeys k = pattern_keys(0);
  const auto& c = *crypto::find_cipher("aes128-cbc");
  const auto& m = *crypto::find_mac("hmac-sha256");
  struct Case {
    uint8_t last, fill;
    bool ok;
  } cases[] = {{0, 0, false},   {17, 17, false}, {255, 255, false}, {2, 1, false},
               {16, 15, false}, {1, 9, true},    {16, 16, true},    {3, 3, true}};
  for (const auto& cs : cases) {
    Bytes padded(32, 0x41);
    for (size_t i = 0; i < 16; ++i) padded[16 + i] = cs.fill;
    padded[31] = cs.last;
    Bytes rec = openssl_cbc_padded(k, 0, padded);
    RecordOpener o(c, m, k);
    RecordHeader h{};
    std::span<uint8_t> out;
    std::error_code ec = o.open(rec.data(), rec.size(), h, out);
    if (cs.ok) {
      EXPECT_FALSE(ec) << int(cs.last);
      EXPECT_EQ(out.size(), 32u - cs.last);
    } else {
      EXPECT_EQ(ec, make_error_code(errc::bad_padding)) << int(cs.last) << "/" << int(cs.fill);
    }
  }
}

// Random bytes and random mutations of valid streams: the reader never crashes (ASan/UBSan), never
// hands out a mutated record of an authenticated combination, and never stalls with input left.
TEST(Record, RandomInputFuzz) {
  std::mt19937_64 rng(1234);
  for (const auto& c : crypto::ciphers()) {
    for (const auto& m : crypto::macs()) {
      SCOPED_TRACE(combo_name(c, m));
      DirectionKeys k = pattern_keys(5);
      RecordSealer s(c, m, k);
      Bytes valid;
      for (size_t n : {size_t(0), size_t(3), size_t(16), size_t(33)}) {
        Bytes r = seal_one(s, n == 16 ? RecordType::end : RecordType::data, test::random_bytes(rng, n));
        valid.insert(valid.end(), r.begin(), r.end());
      }
      for (int iter = 0; iter < 200; ++iter) {
        Bytes in;
        if (iter % 2) {
          in = test::random_bytes(rng, 2 + rng() % 200);
          if (iter % 4 == 1) in[0] = in[1] = 0;  // plausible lengths
        } else {
          in = valid;
          size_t flips = 1 + rng() % 3;
          for (size_t f = 0; f < flips; ++f) in[rng() % in.size()] ^= uint8_t(1 + rng() % 255);
        }
        RecordOpener o(c, m, k);
        RecordReader r(o);
        size_t off = 0;
        size_t records = 0;
        std::error_code ec;
        RecordReader::Status st = RecordReader::Status::need_more;
        while (off < in.size()) {
          size_t chunk = 1 + rng() % 17;
          size_t used = r.feed(in.data() + off, std::min(chunk, in.size() - off));
          off += used;
          RecordHeader h{};
          std::span<uint8_t> p;
          while ((st = r.next(h, p, ec)) == RecordReader::Status::record) ++records;
          if (st == RecordReader::Status::error) break;
          ASSERT_GT(used, 0u);
        }
        if (authenticated(c, m) && iter % 2 == 0) {
          EXPECT_LT(records, 4u) << "a mutated stream opened completely";
        }
      }
    }
  }
}

TEST(Record, ErrorMessages) {
  EXPECT_STREQ(category().name(), "aesxfer.proto");
  std::error_code ec = errc::bad_mac;
  EXPECT_NE(ec.message().find("authentication failed"), std::string::npos);
  for (int i = 1; i <= int(errc::sequence_exhausted); ++i)
    EXPECT_EQ(make_error_code(errc(i)).message().find("unknown aesxfer"), std::string::npos) << i;
}

}  // namespace
}  // namespace aesxfer::proto

namespace aesxfer::proto {
namespace {

// seal_batch must produce exactly the records n calls of seal() produce (CBC lanes and the
// multi-buffer MAC are an optimisation, not a format), and open_batch must open them, or refuse
// the whole batch when any record in it was modified.
TEST(RecordBatch, SealBatchEqualsSealAndOpenBatchOpens) {
  std::mt19937_64 rng(20261129);
  for (const auto& c : crypto::ciphers()) {
    for (const auto& m : crypto::macs()) {
      SCOPED_TRACE(combo_name(c, m));
      DirectionKeys k = pattern_keys(21);
      RecordSealer one(c, m, k), batch(c, m, k);
      RecordOpener opener(c, m, k);
      for (size_t n : {size_t(1), size_t(2), size_t(5), size_t(16), size_t(19)}) {
        std::vector<Bytes> payloads, expect;
        for (size_t i = 0; i < n; ++i) {
          size_t len = (i % 3 == 0) ? rng() % 40 : rng() % 5000;
          payloads.push_back(test::random_bytes(rng, len));
          expect.push_back(seal_one(one, RecordType::data, payloads.back()));
        }
        std::vector<Bytes> bufs(n);
        std::vector<RecordSealer::Job> jobs(n);
        for (size_t i = 0; i < n; ++i) {
          bufs[i].assign(payloads[i].size() + batch.max_overhead(), 0);
          if (!payloads[i].empty())
            std::memcpy(bufs[i].data() + kHeaderLen, payloads[i].data(), payloads[i].size());
          jobs[i] = {RecordType::data, 0, bufs[i].data(), payloads[i].size(), 0};
        }
        batch.seal_batch(jobs.data(), n);
        EXPECT_EQ(batch.next_seq(), one.next_seq());
        for (size_t i = 0; i < n; ++i) {
          bufs[i].resize(jobs[i].wire_len);
          ASSERT_EQ(bufs[i], expect[i]) << "record " << i << " of " << n;
        }
        // A modified record anywhere in the batch fails the batch when records are authenticated.
        if (authenticated(c, m) && n >= 2) {
          std::vector<Bytes> bad = bufs;
          size_t victim = rng() % n;
          bad[victim][kHeaderLen + rng() % (bad[victim].size() - kHeaderLen)] ^= 0x20;
          std::vector<RecordOpener::Job> oj(n);
          for (size_t i = 0; i < n; ++i) oj[i] = {bad[i].data(), bad[i].size(), {}, {}};
          uint64_t before = opener.next_seq();
          EXPECT_EQ(opener.open_batch(oj.data(), n), make_error_code(errc::bad_mac));
          EXPECT_EQ(opener.next_seq(), before);
        }
        std::vector<RecordOpener::Job> oj(n);
        for (size_t i = 0; i < n; ++i) oj[i] = {bufs[i].data(), bufs[i].size(), {}, {}};
        ASSERT_FALSE(opener.open_batch(oj.data(), n));
        for (size_t i = 0; i < n; ++i) {
          EXPECT_EQ(oj[i].hdr.type, RecordType::data);
          ASSERT_EQ(Bytes(oj[i].payload.begin(), oj[i].payload.end()), payloads[i]) << "record " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace aesxfer::proto
