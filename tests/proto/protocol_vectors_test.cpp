// docs/PROTOCOL.md section 6 ("Test vectors"), re-derived with the product's own code: records
// through the record protection of each cipher (sealed and opened again), the crypto_kx
// halves with the libsodium calls the handshake makes, one complete handshake through
// proto::ClientHandshake and proto::ServerHandshake with the documented ephemeral keys and randoms
// injected (set_ephemeral_for_test), and the resume digests through files::resume_key and
// files::prefix_mac. The test reads every "label = hex" line of section 6 from the document and
// requires the set of labels to be exactly the set it computes, so that no documented value goes
// unchecked. On a mismatch (a protocol change, say the version byte) it prints the whole
// recomputed block, ready to paste into the document after review.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "crypto/aes.h"
#include "crypto/suite.h"
#include "crypto/util.h"
#include "files/resume.h"
#include "proto/handshake.h"
#include "proto/kdf.h"
#include "proto/record.h"
#include "proto/record_protection.h"
#include "tests/harness.h"
#include "tests/test_util.h"

namespace aesxfer::proto {
namespace {

using test::Bytes;
using test::to_hex;

// ---- The document ------------------------------------------------------------------------------

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Section 6 of PROTOCOL.md: from "## 6." to the next "## " heading.
std::string section6() {
  const std::string doc = slurp(std::string(AESXFER_SOURCE_DIR) + "/docs/PROTOCOL.md");
  const size_t at = doc.find("\n## 6. ");
  if (at == std::string::npos) return {};
  const size_t end = doc.find("\n## ", at + 1);
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Every "label = hex" line of section 6 (continuation lines: indented hex only). Spaces inside the
// hex are for reading and are dropped.
std::map<std::string, std::string> documented() {
  std::map<std::string, std::string> out;
  std::istringstream in(section6());
  const std::regex first(R"(^(\S[^=]*\S) = ([0-9a-f ]+)$)"), more(R"(^ +([0-9a-f ]+)$)");
  std::string line, last;
  std::smatch m;
  auto squeeze = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
    return s;
  };
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, first)) {
      last = m[1];
      EXPECT_EQ(out.count(last), 0u) << "label twice in PROTOCOL.md section 6: " << last;
      out[last] = squeeze(m[2]);
    } else if (!last.empty() && std::regex_match(line, m, more)) {
      out[last] += squeeze(m[1]);
    } else {
      last.clear();
    }
  }
  return out;
}

// "label = hex" lines as the document writes them (hex in lines of at most 64 digits).
std::string as_document(const std::vector<std::pair<std::string, std::string>>& v) {
  std::string s;
  for (const auto& [label, hex] : v) {
    s += label + " = ";
    for (size_t i = 0; i < hex.size(); i += 64) s += (i ? "\n    " : "") + hex.substr(i, 64);
    s += "\n";
  }
  return s;
}

// ---- Inputs of section 6 -------------------------------------------------------------------------

std::array<uint8_t, 32> run32(uint8_t from) {
  std::array<uint8_t, 32> a{};
  for (size_t i = 0; i < 32; ++i) a[i] = uint8_t(from + i);
  return a;
}

// 6.1: enc = 00..1f, mac = 20..3f, iv = 40..4f.
DirectionKeys record_keys() {
  DirectionKeys k{};
  for (size_t i = 0; i < 32; ++i) k.enc[i] = uint8_t(i), k.mac[i] = uint8_t(0x20 + i);
  for (size_t i = 0; i < 16; ++i) k.iv[i] = uint8_t(0x40 + i);
  return k;
}
const std::string kPayload = "aesxfer record known-answer test";  // 32 bytes
constexpr uint64_t kHighSeq = (uint64_t(1) << 32) + 2;            // 0x0000000100000002

std::string be64_hex(uint64_t v) {
  uint8_t b[8];
  crypto::store_be64(b, v);
  return to_hex(b, 8);
}

// BLAKE2b(n, key = enc, label || u64 v): the Blowfish epoch and RC4 per-record keys (2.3).
std::string sub_key(const DirectionKeys& k, const std::string& label, uint64_t v) {
  Bytes msg(label.begin(), label.end());
  uint8_t be[8];
  crypto::store_be64(be, v);
  msg.insert(msg.end(), be, be + 8);
  uint8_t out[16];
  crypto_generichash(out, 16, msg.data(), msg.size(), k.enc, 32);
  return to_hex(out, 16);
}

// ---- 6.1 Records -------------------------------------------------------------------------------

// Seals the documented payload with the product's sealer at `seq`, opens it again with the
// product's opener, and returns the record's wire bytes.
std::string record(const char* cipher, const char* mac, uint64_t seq, RecordType type = RecordType::data) {
  const DirectionKeys k = record_keys();
  const auto& c = *crypto::find_cipher(cipher);
  const auto& m = *crypto::find_mac(mac);
  // The record protection itself reaches any sequence number (a sealer starts at 0); the header
  // is the one the spec gives the record.
  auto seal = make_record_protection(c, m, k, crypto::dispatch());
  const size_t body_len = seal->body_len(kPayload.size());
  Bytes buf(kHeaderLen + kPayload.size() + seal->max_pad() + seal->tag_len());
  std::memcpy(buf.data() + kHeaderLen, kPayload.data(), kPayload.size());
  crypto::store_be32(buf.data(), uint32_t(body_len));
  buf[4] = uint8_t(type);
  buf[5] = type == RecordType::end ? kFlagFinal : 0;
  seal->seal(seq, buf.data(), kPayload.size());
  buf.resize(kHeaderLen + body_len + seal->tag_len());
  const std::string wire = to_hex(buf);
  auto open = make_record_protection(c, m, k, crypto::dispatch());
  size_t n = 0;
  EXPECT_FALSE(open->open(seq, buf.data(), n)) << cipher << " " << mac << " seq " << seq;
  EXPECT_EQ(std::string(buf.begin() + kHeaderLen, buf.begin() + kHeaderLen + std::ptrdiff_t(n)), kPayload)
      << cipher << " " << mac << " seq " << seq;
  // The record is bound to its sequence number: one off is refused.
  if (m.tag_len || c.aead) {
    Bytes again = test::hex(wire);
    EXPECT_TRUE(open->open(seq + 1, again.data(), n)) << cipher << " seq " << seq;
  }
  return wire;
}

std::vector<std::pair<std::string, std::string>> record_vectors() {
  const DirectionKeys k = record_keys();
  std::vector<std::pair<std::string, std::string>> v;
  v.emplace_back("aes128-cbc hmac-sha256 seq 0", record("aes128-cbc", "hmac-sha256", 0));
  v.emplace_back("aes128-ctr hmac-sha256 seq 0", record("aes128-ctr", "hmac-sha256", 0));
  v.emplace_back("aes128-gcm seq 0", record("aes128-gcm", "hmac-sha256", 0));
  v.emplace_back("blowfish-cbc hmac-sha256 seq 1023", record("blowfish-cbc", "hmac-sha256", 1023));
  v.emplace_back("blowfish-cbc K_1", sub_key(k, "aesxfer-v1 rekey", 1));
  v.emplace_back("blowfish-cbc hmac-sha256 seq 1024", record("blowfish-cbc", "hmac-sha256", 1024));
  v.emplace_back("arcfour K_seq 0", sub_key(k, "aesxfer-v1 rc4", 0));
  v.emplace_back("arcfour hmac-sha256 seq 0", record("arcfour", "hmac-sha256", 0));
  v.emplace_back("arcfour K_seq 1", sub_key(k, "aesxfer-v1 rc4", 1));
  v.emplace_back("arcfour hmac-sha256 seq 1", record("arcfour", "hmac-sha256", 1));
  v.emplace_back("none hmac-sha256 seq 0", record("none", "hmac-sha256", 0));
  v.emplace_back("none none seq 0", record("none", "none", 0));
  v.emplace_back("aes128-cbc none end seq 0", record("aes128-cbc", "none", 0, RecordType::end));
  // Above 2^32: the whole u64 reaches IV, counter, nonce and MAC.
  {
    Bytes in(k.iv, k.iv + 16);
    for (int i = 0; i < 8; ++i) in[8 + size_t(i)] ^= uint8_t(kHighSeq >> (56 - 8 * i));
    auto aes = crypto::make_aes128(k.enc);
    Bytes iv(16);
    aes->encrypt_blocks(in.data(), iv.data(), 1);
    v.emplace_back("aes128-cbc IV seq 4294967298", to_hex(iv));
    v.emplace_back("aes128-cbc hmac-sha256 seq 4294967298", record("aes128-cbc", "hmac-sha256", kHighSeq));
    Bytes ctr(k.iv, k.iv + 16);
    for (int i = 0; i < 8; ++i) ctr[4 + size_t(i)] ^= uint8_t(kHighSeq >> (56 - 8 * i));
    std::fill(ctr.begin() + 12, ctr.end(), 0);
    v.emplace_back("aes128-ctr counter block seq 4294967298", to_hex(ctr));
    v.emplace_back("aes128-ctr hmac-sha256 seq 4294967298", record("aes128-ctr", "hmac-sha256", kHighSeq));
    Bytes nonce(k.iv, k.iv + 12);
    for (int i = 0; i < 8; ++i) nonce[4 + size_t(i)] ^= uint8_t(kHighSeq >> (56 - 8 * i));
    v.emplace_back("aes128-gcm nonce seq 4294967298", to_hex(nonce));
    v.emplace_back("aes128-gcm seq 4294967298", record("aes128-gcm", "hmac-sha256", kHighSeq));
  }
  EXPECT_EQ(be64_hex(kHighSeq), "0000000100000002");
  return v;
}

// ---- 6.2 crypto_kx -----------------------------------------------------------------------------

const std::array<uint8_t, 32> kClientSeed = run32(0x00), kHostSeed = run32(0x20), kClientKx = run32(0x40),
                              kServerKx = run32(0x60), kClientRandom = run32(0x80),
                              kServerRandom = run32(0xa0);

std::vector<std::pair<std::string, std::string>> kx_vectors() {
  EXPECT_GE(sodium_init(), 0);
  std::vector<std::pair<std::string, std::string>> v;
  uint8_t cpk[32], spk[32], q[32];
  crypto_scalarmult_base(cpk, kClientKx.data());
  crypto_scalarmult_base(spk, kServerKx.data());
  EXPECT_EQ(0, crypto_scalarmult(q, kClientKx.data(), spk));
  uint8_t q2[32];
  EXPECT_EQ(0, crypto_scalarmult(q2, kServerKx.data(), cpk));
  EXPECT_EQ(to_hex(q, 32), to_hex(q2, 32));
  v.emplace_back("client X25519 public", to_hex(cpk, 32));
  v.emplace_back("server X25519 public", to_hex(spk, 32));
  v.emplace_back("X25519 shared secret", to_hex(q, 32));
  uint8_t h[64];
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, 64);
  crypto_generichash_update(&st, q, 32);
  crypto_generichash_update(&st, cpk, 32);
  crypto_generichash_update(&st, spk, 32);
  crypto_generichash_final(&st, h, 64);
  v.emplace_back("BLAKE2b-512(shared || client public || server public)", to_hex(h, 64));
  // The calls the handshake makes (proto/handshake.cpp), with the same keys.
  uint8_t crx[32], ctx[32], srx[32], stx[32];
  EXPECT_EQ(0, crypto_kx_client_session_keys(crx, ctx, cpk, kClientKx.data(), spk));
  EXPECT_EQ(0, crypto_kx_server_session_keys(srx, stx, spk, kServerKx.data(), cpk));
  v.emplace_back("client rx", to_hex(crx, 32));
  v.emplace_back("client tx", to_hex(ctx, 32));
  v.emplace_back("server rx", to_hex(srx, 32));
  v.emplace_back("server tx", to_hex(stx, 32));
  // The halves: client rx = server tx = first half (K_s2c), client tx = server rx = second (K_c2s).
  EXPECT_EQ(to_hex(crx, 32), to_hex(h, 32));
  EXPECT_EQ(to_hex(stx, 32), to_hex(h, 32));
  EXPECT_EQ(to_hex(ctx, 32), to_hex(h + 32, 32));
  EXPECT_EQ(to_hex(srx, 32), to_hex(h + 32, 32));
  return v;
}

// ---- 6.3 Handshake, 6.4 resume -----------------------------------------------------------------

Identity identity_from_seed(const std::array<uint8_t, 32>& seed) {
  EXPECT_GE(sodium_init(), 0);
  Identity id;
  crypto_sign_seed_keypair(id.pk.data(), id.sk.data(), seed.data());
  return id;
}

std::array<uint8_t, 32> sha256(const Bytes& a, size_t alen) {
  std::array<uint8_t, 32> h{};
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  crypto_hash_sha256_update(&st, a.data(), alen);
  crypto_hash_sha256_final(&st, h.data());
  return h;
}

std::vector<std::pair<std::string, std::string>> handshake_vectors() {
  std::vector<std::pair<std::string, std::string>> v;
  const Identity client = identity_from_seed(kClientSeed), host = identity_from_seed(kHostSeed);
  v.emplace_back("client Ed25519 public", to_hex(client.pk.data(), 32));
  v.emplace_back("host Ed25519 public", to_hex(host.pk.data(), 32));
  SessionParams params;
  params.checksum = crypto::ChecksumAlg::xxh128;
  params.record_size = 262144;
  ClientHandshake c(client, *crypto::find_cipher("aes128-cbc"), *crypto::find_mac("hmac-sha256"), params);
  ServerHandshake s(host, [&](const PublicKey& k) { return k == client.pk; });
  c.set_ephemeral_for_test(kClientKx, kClientRandom);
  s.set_ephemeral_for_test(kServerKx, kServerRandom);
  const Step a = c.start();
  EXPECT_FALSE(a.ec);
  const Step b = s.feed(a.send.data(), a.send.size());
  EXPECT_FALSE(b.ec) << b.detail;
  const Step b2 = c.feed(b.send.data(), b.send.size());
  EXPECT_FALSE(b2.ec) << b2.detail;
  EXPECT_EQ(c.host_key(), host.pk);
  const Step d = c.confirm_host();
  EXPECT_TRUE(d.done);
  const Step e = s.feed(d.send.data(), d.send.size());
  EXPECT_TRUE(e.done);
  EXPECT_FALSE(e.ec) << e.detail;
  EXPECT_TRUE(s.authorized());
  EXPECT_EQ(a.send.size(), 85u);
  EXPECT_EQ(b.send.size(), 179u);
  EXPECT_EQ(d.send.size(), 117u);
  v.emplace_back("ClientHello", to_hex(a.send));
  v.emplace_back("ServerHello", to_hex(b.send));
  Bytes t = a.send;
  t.insert(t.end(), b.send.begin(), b.send.end());
  const auto th1 = sha256(t, t.size() - 64), th2 = sha256(t, t.size());
  v.emplace_back("TH1", to_hex(th1.data(), 32));
  v.emplace_back("host signature", to_hex(b.send.data() + b.send.size() - 64, 64));
  v.emplace_back("TH2", to_hex(th2.data(), 32));
  EXPECT_EQ(to_hex(th2.data(), 32), to_hex(c.keys().transcript_hash.data(), 32));
  EXPECT_EQ(to_hex(th2.data(), 32), to_hex(s.keys().transcript_hash.data(), 32));
  // ClientAuth (1.4): the handshake key and nonce from K_c2s (the client's tx half, 6.2) and TH2;
  // the product's frame opens to client key || signature.
  uint8_t cpk[32], spk[32], rx[32], tx[32];
  crypto_scalarmult_base(cpk, kClientKx.data());
  crypto_scalarmult_base(spk, kServerKx.data());
  EXPECT_EQ(0, crypto_kx_client_session_keys(rx, tx, cpk, kClientKx.data(), spk));
  const auto plain = open_client_auth(tx, th2, std::span(d.send).subspan(5));
  const bool opened = plain && plain->size() == 96;
  EXPECT_TRUE(opened);
  const Bytes csig = opened ? Bytes(plain->begin() + 32, plain->end()) : Bytes(64);
  EXPECT_TRUE(opened && std::memcmp(plain->data(), client.pk.data(), 32) == 0);
  v.emplace_back("client signature", to_hex(csig));
  uint8_t auth_key[16], auth_iv[16];
  kdf(auth_key, 16, tx, "aesxfer-v4 auth key", th2);
  kdf(auth_iv, 16, tx, "aesxfer-v4 auth iv", th2);
  v.emplace_back("ClientAuth key", to_hex(auth_key, 16));
  v.emplace_back("ClientAuth nonce", to_hex(auth_iv, 12));
  v.emplace_back("ClientAuth", to_hex(d.send));
  // Both signatures verify as 1.3 and 1.4 say (Ed25519 is deterministic: RFC 8032).
  auto verify = [](const std::string& label, const std::array<uint8_t, 32>& th, const uint8_t* sig,
                   const PublicKey& pk, bool with_key) {
    Bytes msg(label.begin(), label.end());
    msg.insert(msg.end(), th.begin(), th.end());
    if (with_key) msg.insert(msg.end(), pk.begin(), pk.end());
    return crypto_sign_verify_detached(sig, msg.data(), msg.size(), pk.data()) == 0;
  };
  EXPECT_TRUE(verify("aesxfer-v1 host-sig", th1, b.send.data() + b.send.size() - 64, host.pk, false));
  EXPECT_TRUE(verify("aesxfer-v4 client-sig", th2, csig.data(), client.pk, true));
  // Both ends derived the same keys; K_c2s is the client's tx half (6.2).
  const SessionKeys &ck = c.keys(), &sk = s.keys();
  EXPECT_EQ(0, std::memcmp(&ck.c2s, &sk.c2s, sizeof ck.c2s));
  EXPECT_EQ(0, std::memcmp(&ck.s2c, &sk.s2c, sizeof ck.s2c));
  const DirectionKeys c2s = derive_direction_keys(tx, th2), s2c = derive_direction_keys(rx, th2);
  EXPECT_EQ(0, std::memcmp(&c2s, &ck.c2s, sizeof c2s));
  EXPECT_EQ(0, std::memcmp(&s2c, &ck.s2c, sizeof s2c));
  v.emplace_back("C2S enc", to_hex(ck.c2s.enc, 32));
  v.emplace_back("C2S mac", to_hex(ck.c2s.mac, 32));
  v.emplace_back("C2S iv", to_hex(ck.c2s.iv, 16));
  v.emplace_back("S2C enc", to_hex(ck.s2c.enc, 32));
  v.emplace_back("S2C mac", to_hex(ck.s2c.mac, 32));
  v.emplace_back("S2C iv", to_hex(ck.s2c.iv, 16));
  // 6.4: the resume key of this session and the prefix digest of "abc" (the first 3 bytes of
  // "abcdef"), through the product's functions.
  const auto kr = files::resume_key(ck);
  v.emplace_back("K_resume", to_hex(kr.data(), 32));
  test::TempDir dir("aesxfer-vectors");
  const std::string file = (dir / "abcdef").string();
  test::write_text_file(file, "abcdef");
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  for (uint64_t p : {uint64_t(3), uint64_t(6)}) {
    const std::string dg = files::prefix_mac(ck, fd, p);
    EXPECT_EQ(dg, files::prefix_mac(sk, fd, p));  // the server computes the same
    v.emplace_back("D over " + std::to_string(p) + " bytes",
                   to_hex(reinterpret_cast<const uint8_t*>(dg.data()), dg.size()));
  }
  ::close(fd);
  return v;
}

std::vector<std::pair<std::string, std::string>> all_vectors() {
  std::vector<std::pair<std::string, std::string>> v;
  for (auto part : {record_vectors(), kx_vectors(), handshake_vectors()})
    v.insert(v.end(), part.begin(), part.end());
  return v;
}

// ---- Tests -------------------------------------------------------------------------------------

// Compares computed values with the document; prints the recomputed block on any difference.
void expect_documented(const std::vector<std::pair<std::string, std::string>>& v) {
  const auto doc = documented();
  bool ok = true;
  for (const auto& [label, hex] : v) {
    auto it = doc.find(label);
    if (it == doc.end()) {
      ADD_FAILURE() << "PROTOCOL.md section 6 lacks \"" << label << " = " << hex << "\"";
      ok = false;
    } else if (it->second != hex) {
      ADD_FAILURE() << "PROTOCOL.md section 6, " << label << ":\n  document " << it->second << "\n  computed "
                    << hex;
      ok = false;
    }
  }
  if (!ok) std::cerr << "--- recomputed (review before pasting into PROTOCOL.md) ---\n" << as_document(v);
}

TEST(ProtocolVectors, RecordsForEveryCipher) { expect_documented(record_vectors()); }

TEST(ProtocolVectors, KxHalves) { expect_documented(kx_vectors()); }

TEST(ProtocolVectors, HandshakeAndResumeDigests) {
  // The hellos carry the version byte: the document's vector is for this version.
  const auto doc = documented();
  const auto ch = doc.find("ClientHello");
  if (ch != doc.end() && ch->second.size() >= 28) {
    EXPECT_EQ(ch->second.substr(26, 2), to_hex(&kVersion, 1))
        << "the handshake vector of PROTOCOL.md 6.3 is for another protocol version than proto::kVersion: "
           "regenerate section 6.3 (and 6.4, which depends on it) from the values printed below";
  }
  expect_documented(handshake_vectors());
}

// No value in section 6 that this test does not compute (and so check).
TEST(ProtocolVectors, EveryDocumentedValueIsChecked) {
  const auto doc = documented();
  ASSERT_GT(doc.size(), 30u) << "section 6 of PROTOCOL.md not found or not parsed";
  std::map<std::string, std::string> computed;
  for (const auto& [label, hex] : all_vectors()) computed[label] = hex;
  for (const auto& [label, hex] : doc) EXPECT_TRUE(computed.count(label)) << "unchecked: " << label;
}

}  // namespace
}  // namespace aesxfer::proto

namespace aesxfer::proto {
namespace {

// Sections 1.2 and 1.3 state the version byte in prose and tables; an implementation written from
// them must speak this one (an eighteenth re-attack, N1: both hellos' tables and the busy answer
// still said version 4 when the code was at 5).
TEST(ProtocolVectors, TheHellosStateThisVersion) {
  const std::string doc = slurp(std::string(AESXFER_SOURCE_DIR) + "/docs/PROTOCOL.md");
  const size_t from = doc.find("\n### 1.2"), to = doc.find("\n### 1.4");
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  const std::string hellos = doc.substr(from, to - from);
  const std::regex stated(R"((version = |Version not |this server |magic, version )(\d+))");
  int seen = 0;
  for (std::sregex_iterator m(hellos.begin(), hellos.end(), stated), end; m != end; ++m, ++seen)
    EXPECT_EQ(std::stoi((*m)[2]), int(kVersion)) << "PROTOCOL.md 1.2/1.3 says: " << m->str();
  EXPECT_EQ(seen, 5) << "the five statements of the version in 1.2 and 1.3";
}

}  // namespace
}  // namespace aesxfer::proto
