// Handshake: both state machines talk to each other in memory, byte at a time, and every way a
// peer or a man in the middle can misbehave is refused.
#include "proto/handshake.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "crypto/suite.h"
#include "crypto/util.h"
#include "proto/error.h"
#include "proto/messages.h"
#include "proto/record.h"
#include "tests/test_util.h"

namespace aesxfer::proto {
namespace {

using test::Bytes;

const crypto::CipherDesc& cipher(const char* n) { return *crypto::find_cipher(n); }
const crypto::MacDesc& mac(const char* n) { return *crypto::find_mac(n); }

// Feeds bytes one at a time; returns the first step that sends something, finishes or fails,
// and checks that `consumed` adds up.
Step feed_bytewise(auto& hs, const Bytes& in, size_t* used_total = nullptr) {
  size_t used = 0;
  Step last;
  for (size_t i = 0; i < in.size(); ++i) {
    last = hs.feed(&in[i], 1);
    used += last.consumed;
    if (!last.send.empty() || last.done || last.ec) break;
    EXPECT_EQ(last.consumed, 1u);
  }
  if (used_total) *used_total = used;
  return last;
}

struct Pair {
  Identity host = Identity::generate();
  Identity client = Identity::generate();
  bool allow = true;
  std::unique_ptr<ClientHandshake> c;
  std::unique_ptr<ServerHandshake> s;
  Bytes client_hello, server_hello, client_auth;
  Pair(const crypto::CipherDesc& ci, const crypto::MacDesc& m) {
    c = std::make_unique<ClientHandshake>(client, ci, m);
    s = std::make_unique<ServerHandshake>(host,
                                          [this](const PublicKey& k) { return allow && k == client.pk; });
  }
};

// Runs the whole handshake; returns the server's final step.
Step run(Pair& p, bool bytewise = true) {
  Step a = p.c->start();
  EXPECT_FALSE(a.ec);
  p.client_hello = a.send;
  Step b = bytewise ? feed_bytewise(*p.s, a.send) : p.s->feed(a.send.data(), a.send.size());
  EXPECT_FALSE(b.ec) << b.ec.message();
  EXPECT_EQ(b.consumed, bytewise ? 1u : a.send.size());
  p.server_hello = b.send;
  EXPECT_FALSE(p.c->host_key());
  Step c = bytewise ? feed_bytewise(*p.c, b.send) : p.c->feed(b.send.data(), b.send.size());
  EXPECT_FALSE(c.ec) << c.ec.message();
  EXPECT_TRUE(c.send.empty());
  EXPECT_FALSE(c.done);
  EXPECT_TRUE(p.c->host_key());
  Step d = p.c->confirm_host();
  EXPECT_TRUE(d.done);
  EXPECT_FALSE(d.ec);
  p.client_auth = d.send;
  return bytewise ? feed_bytewise(*p.s, d.send) : p.s->feed(d.send.data(), d.send.size());
}

// Fixed ephemeral secrets (the test seam), so that a test knows K_c2s = the client's crypto_kx tx.
const std::array<uint8_t, 32> kCkx = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
                              kSkx = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12, 13, 14, 15, 16, 17}, kRnd = {42};
void fix_ephemerals(Pair& p) {
  p.c->set_ephemeral_for_test(kCkx, kRnd);
  p.s->set_ephemeral_for_test(kSkx, kRnd);
}
// K_c2s of a Pair with fixed ephemerals, computed with libsodium's crypto_kx as 1.5 says.
std::array<uint8_t, 32> k_c2s_of(const Bytes& server_hello) {
  uint8_t cpk[32], rx[32];
  std::array<uint8_t, 32> tx{};
  crypto_scalarmult_base(cpk, kCkx.data());
  EXPECT_EQ(0, crypto_kx_client_session_keys(rx, tx.data(), cpk, kCkx.data(), server_hello.data() + 15));
  return tx;
}
std::array<uint8_t, 32> th2_of(const Pair& p) {
  Bytes t = p.client_hello;
  t.insert(t.end(), p.server_hello.begin(), p.server_hello.end());
  std::array<uint8_t, 32> th{};
  SHA256(t.data(), t.size(), th.data());
  return th;
}
// BLAKE2b(n, key K, label || th), 1.5's kdf, with libsodium directly.
Bytes b2b(size_t n, const uint8_t* k, const std::string& label, const std::array<uint8_t, 32>& th) {
  Bytes m(label.begin(), label.end()), out(n);
  m.insert(m.end(), th.begin(), th.end());
  crypto_generichash(out.data(), n, m.data(), m.size(), k, 32);
  return out;
}
// Opens a ClientAuth frame with OpenSSL's AES-128-GCM, following 1.4 (not the product's code).
std::optional<Bytes> openssl_open_client_auth(const Bytes& frame, const std::array<uint8_t, 32>& kc2s,
                                              const std::array<uint8_t, 32>& th2) {
  const Bytes key = b2b(16, kc2s.data(), "aesxfer-v4 auth key", th2),
              iv = b2b(16, kc2s.data(), "aesxfer-v4 auth iv", th2);
  const size_t n = frame.size() - 5 - 16;
  Bytes out(n);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  bool ok =
      EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, key.data(), iv.data()) == 1 &&
      EVP_DecryptUpdate(ctx, out.data(), &len, frame.data() + 5, int(n)) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, const_cast<uint8_t*>(frame.data() + 5 + n)) == 1 &&
      EVP_DecryptFinal_ex(ctx, out.data() + len, &len) == 1;
  EVP_CIPHER_CTX_free(ctx);
  if (!ok) return std::nullopt;
  return out;
}
bool contains(const Bytes& hay, const uint8_t* needle, size_t n) {
  return std::search(hay.begin(), hay.end(), needle, needle + n) != hay.end();
}

bool same(const DirectionKeys& a, const DirectionKeys& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Seals a record on one side and opens it on the other.
void expect_channel(const crypto::CipherDesc& c, const crypto::MacDesc& m, const DirectionKeys& send_keys,
                    const DirectionKeys& recv_keys) {
  RecordSealer s(c, m, send_keys);
  RecordOpener o(c, m, recv_keys);
  Bytes buf(100 + s.max_overhead());
  std::memset(buf.data() + kHeaderLen, 0x33, 100);
  size_t n = s.seal(RecordType::data, 0, buf.data(), 100);
  RecordHeader h{};
  std::span<uint8_t> p;
  EXPECT_FALSE(o.open(buf.data(), n, h, p));
  EXPECT_EQ(p.size(), 100u);
}

TEST(Handshake, KeysAgreeForEveryCipher) {
  for (const auto& c : crypto::ciphers()) {
    for (const auto& m : crypto::macs()) {
      SCOPED_TRACE(std::string(c.name) + "+" + m.name);
      Pair p(c, m);
      Step fin = run(p, c.wire_id % 2 == 1);
      ASSERT_FALSE(fin.ec) << fin.ec.message();
      ASSERT_TRUE(fin.done);
      EXPECT_TRUE(p.s->authorized());
      SessionKeys& ck = p.c->keys();
      SessionKeys& sk = p.s->keys();
      EXPECT_EQ(ck.cipher, &c);
      EXPECT_EQ(sk.cipher, &c);
      EXPECT_EQ(sk.mac, &m);
      EXPECT_TRUE(same(ck.c2s, sk.c2s));
      EXPECT_TRUE(same(ck.s2c, sk.s2c));
      EXPECT_FALSE(same(ck.c2s, ck.s2c));
      EXPECT_EQ(ck.transcript_hash, sk.transcript_hash);
      EXPECT_EQ(ck.client_random, sk.client_random);
      EXPECT_EQ(ck.host_key, p.host.pk);
      EXPECT_EQ(sk.client_key, p.client.pk);
      EXPECT_EQ(*p.c->host_key(), p.host.pk);
      EXPECT_EQ(*p.s->client_key(), p.client.pk);
      EXPECT_EQ(ck.keylog_lines(), sk.keylog_lines());
      expect_channel(c, m, ck.c2s, sk.c2s);
      expect_channel(c, m, sk.s2c, ck.s2c);
      // Frame sizes are fixed by the spec.
      EXPECT_EQ(p.client_hello.size(), 4u + 1 + 80);
      EXPECT_EQ(p.server_hello.size(), 4u + 1 + 174);
      EXPECT_EQ(ck.checksum, sk.checksum);
      EXPECT_EQ(ck.record_size, sk.record_size);
      EXPECT_EQ(p.client_auth.size(), 4u + 1 + 112);
    }
  }
}

// The transcript hash and the key schedule recomputed from the frames with OpenSSL SHA-256 and
// libsodium directly, following docs/PROTOCOL.md.
TEST(Handshake, TranscriptAndKeyScheduleMatchSpec) {
  Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
  fix_ephemerals(p);
  ASSERT_FALSE(run(p, false).ec);
  Bytes t = p.client_hello;
  t.insert(t.end(), p.server_hello.begin(), p.server_hello.end());
  uint8_t th2[32];
  SHA256(t.data(), t.size(), th2);
  EXPECT_EQ(test::to_hex(th2, 32), test::to_hex(p.c->keys().transcript_hash.data(), 32));
  // Host signature over "aesxfer-v1 host-sig" || SHA-256(CH || SH minus the signature).
  uint8_t th1[32];
  SHA256(t.data(), t.size() - 64, th1);
  std::string label = "aesxfer-v1 host-sig";
  Bytes msg(label.begin(), label.end());
  msg.insert(msg.end(), th1, th1 + 32);
  EXPECT_EQ(0, crypto_sign_verify_detached(p.server_hello.data() + p.server_hello.size() - 64, msg.data(),
                                           msg.size(), p.host.pk.data()));
  // ClientAuth: AES-128-GCM under kdf(K_c2s, "aesxfer-v4 auth key"/"auth iv", TH2) of
  // client key || signature over "aesxfer-v4 client-sig" || TH2 || client key (1.4).
  const auto plain = openssl_open_client_auth(p.client_auth, k_c2s_of(p.server_hello), th2_of(p));
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->size(), 96u);
  EXPECT_EQ(0, std::memcmp(plain->data(), p.client.pk.data(), 32));
  label = "aesxfer-v4 client-sig";
  msg.assign(label.begin(), label.end());
  msg.insert(msg.end(), th2, th2 + 32);
  msg.insert(msg.end(), p.client.pk.begin(), p.client.pk.end());
  EXPECT_EQ(0, crypto_sign_verify_detached(plain->data() + 32, msg.data(), msg.size(), p.client.pk.data()));
  // Layout of ClientHello.
  EXPECT_EQ(test::to_hex(p.client_hello.data(), 5), "0000005101");
  EXPECT_EQ(std::string(p.client_hello.begin() + 5, p.client_hello.begin() + 13), "AESXFER1");
  EXPECT_EQ(p.client_hello[13], kVersion);  // version
  EXPECT_EQ(p.client_hello[14], cipher("aes128-gcm").wire_id);
  EXPECT_EQ(p.client_hello[15], mac("hmac-sha256").wire_id);
  EXPECT_EQ(p.client_hello[16], 2);                                    // checksum xxh128, the default
  EXPECT_EQ(test::to_hex(p.client_hello.data() + 81, 4), "00040000");  // record size 256 KiB
  EXPECT_EQ(0, std::memcmp(p.client_hello.data() + 49, p.c->keys().client_random.data(), 32));
  EXPECT_EQ(test::to_hex(p.server_hello.data(), 5), "000000af02");
  EXPECT_EQ(p.server_hello[13], kVersion);  // version
  EXPECT_EQ(p.server_hello[14], 0);         // status ok
  EXPECT_EQ(0, std::memcmp(p.server_hello.data() + 79, p.host.pk.data(), 32));
  EXPECT_EQ(test::to_hex(p.server_hello.data() + 111, 4), "00040000");  // agreed record size
  EXPECT_EQ(test::to_hex(p.client_auth.data(), 5), "0000007103");
}

// Issue 14 item 17: the client's long-term key never travels in clear; the server learns it
// from the sealed ClientAuth only.
TEST(Handshake, ClientKeyIsNotInTheClearInAnyFrame) {
  for (const char* c : {"none", "aes128-gcm"}) {
    Pair p(cipher(c), mac("none"));
    const Step fin = run(p, false);
    ASSERT_FALSE(fin.ec) << fin.detail;
    EXPECT_FALSE(contains(p.client_hello, p.client.pk.data(), 32));
    EXPECT_FALSE(contains(p.client_auth, p.client.pk.data(), 32));
    EXPECT_EQ(*p.s->client_key(), p.client.pk);
  }
  Pair p(cipher("aes128-gcm"), mac("none"));
  const Step a = p.c->start();
  ASSERT_FALSE(p.s->feed(a.send.data(), a.send.size()).ec);
  EXPECT_FALSE(p.s->client_key()) << "the server knows the client key before ClientAuth";
}

// Any changed bit of the sealed ClientAuth: bad_handshake, no key learnt, nothing authorized.
TEST(Handshake, TamperedSealedClientAuthIsRefused) {
  Pair ref(cipher("aes128-gcm"), mac("none"));
  ASSERT_FALSE(run(ref, false).ec);
  for (size_t i = 5; i < ref.client_auth.size(); ++i) {
    Pair p(cipher("aes128-gcm"), mac("none"));
    const Step a = p.c->start();
    const Step b = p.s->feed(a.send.data(), a.send.size());
    ASSERT_FALSE(p.c->feed(b.send.data(), b.send.size()).ec);
    Bytes d = p.c->confirm_host().send;
    d[i] ^= uint8_t(1u << (i % 8));
    const Step e = p.s->feed(d.data(), d.size());
    EXPECT_EQ(e.ec, make_error_code(errc::bad_handshake)) << "byte " << i;
    EXPECT_FALSE(e.done);
    EXPECT_FALSE(p.s->client_key());
    EXPECT_FALSE(p.s->authorized());
  }
}

// The sealed plaintext is checked as 1.4 says: a signature that does not cover the key it comes
// with (another key in front of a genuine signature, or a signature over TH2 alone, the protocol 3
// message) is client_signature, even under the right handshake key.
TEST(Handshake, SealedSignatureMustBindTheClientKey) {
  for (int variant = 0; variant < 3; ++variant) {
    Pair p(cipher("aes128-gcm"), mac("none"));
    fix_ephemerals(p);
    const Step a = p.c->start();
    p.client_hello = a.send;
    const Step b = p.s->feed(a.send.data(), a.send.size());
    p.server_hello = b.send;
    ASSERT_FALSE(p.c->feed(b.send.data(), b.send.size()).ec);
    const Bytes genuine = p.c->confirm_host().send;
    const auto k = k_c2s_of(p.server_hello);
    const auto th2 = th2_of(p);
    auto plain = open_client_auth(k.data(), th2, std::span(genuine).subspan(5));
    ASSERT_TRUE(plain);
    const Identity other = Identity::generate();
    if (variant == 0) std::memcpy(plain->data(), other.pk.data(), 32);  // claims another key
    if (variant == 1) {  // the protocol 3 signature: "aesxfer-v1 client-sig" || TH2
      std::string m = "aesxfer-v1 client-sig";
      Bytes msg(m.begin(), m.end());
      msg.insert(msg.end(), th2.begin(), th2.end());
      crypto_sign_detached(plain->data() + 32, nullptr, msg.data(), msg.size(), p.client.sk.data());
    }
    const Bytes body = seal_client_auth(k.data(), th2, *plain);
    Bytes f = {0, 0, 0, uint8_t(1 + body.size()), 3};
    f.insert(f.end(), body.begin(), body.end());
    const Step e = p.s->feed(f.data(), f.size());
    if (variant == 2) {  // resealed unchanged: accepted (the test's sealing is the protocol's)
      EXPECT_FALSE(e.ec) << e.detail;
      EXPECT_TRUE(e.done);
    } else {
      EXPECT_EQ(e.ec, make_error_code(errc::client_signature)) << variant;
      EXPECT_FALSE(e.done);
    }
  }
}

TEST(Handshake, KeyDerivationVector) {
  // Computed with Python's hashlib.blake2b(label || TH2, digest_size=n, key=K), K = 00..1f,
  // TH2 = 20..3f; the same vector is in docs/PROTOCOL.md.
  uint8_t kk[32];
  std::array<uint8_t, 32> th{};
  for (int i = 0; i < 32; ++i) kk[i] = uint8_t(i), th[size_t(i)] = uint8_t(0x20 + i);
  DirectionKeys d = derive_direction_keys(kk, th);
  EXPECT_EQ(test::to_hex(d.enc, 32), "12763974d4ccc33571a160709eb70fd8d3e5142642e1743d4df76e2a57e8c327");
  EXPECT_EQ(test::to_hex(d.mac, 32), "156eea07f949a4d42127094c2983f6be2ae6bffea03186270091401e47df666a");
  EXPECT_EQ(test::to_hex(d.iv, 16), "df32fc36e68543a363b70500f1140057");
}

TEST(Handshake, KeylogFormat) {
  Pair p(cipher("aes128-ctr"), mac("hmac-sha256"));
  ASSERT_FALSE(run(p, false).ec);
  const SessionKeys& k = p.c->keys();
  std::string log = k.keylog_lines();
  std::regex line(
      "AESXFER_V1 ([0-9a-f]{64}) (C2S|S2C) aes128-ctr hmac-sha256 enc=([0-9a-f]{64}) mac=([0-9a-f]{64}) "
      "iv=([0-9a-f]{32})\n");
  auto begin = std::sregex_iterator(log.begin(), log.end(), line);
  std::vector<std::smatch> m(begin, std::sregex_iterator());
  ASSERT_EQ(m.size(), 2u) << log;
  EXPECT_EQ(m[0][1], test::to_hex(k.client_random.data(), 32));
  EXPECT_EQ(m[0][2], "C2S");
  EXPECT_EQ(m[0][3], test::to_hex(k.c2s.enc, 32));
  EXPECT_EQ(m[0][4], test::to_hex(k.c2s.mac, 32));
  EXPECT_EQ(m[0][5], test::to_hex(k.c2s.iv, 16));
  EXPECT_EQ(m[1][2], "S2C");
  EXPECT_EQ(m[1][3], test::to_hex(k.s2c.enc, 32));
  EXPECT_EQ(log.size(), m[0].length() + m[1].length());
}

TEST(Handshake, TamperedServerHelloIsRejected) {
  // Any flipped byte after the status byte (keys, random, host key, signature) breaks the signature.
  for (size_t pos : {size_t(15), size_t(20), size_t(50), size_t(80), size_t(100), size_t(120), size_t(174)}) {
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    Step a = p.c->start();
    Step b = p.s->feed(a.send.data(), a.send.size());
    ASSERT_FALSE(b.ec);
    b.send[pos] ^= 0x01;
    Step c = feed_bytewise(*p.c, b.send);
    EXPECT_EQ(c.ec, make_error_code(errc::host_key_signature)) << "pos " << pos;
    EXPECT_FALSE(p.c->host_key());
    EXPECT_TRUE(p.c->confirm_host().ec);
  }
}

TEST(Handshake, ManInTheMiddleDowngradeIsDetected) {
  // An attacker rewrites the client's cipher from aes128-gcm to arcfour: the server signs a
  // transcript the client never sent, so the client rejects the ServerHello.
  Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
  Step a = p.c->start();
  a.send[14] = cipher("arcfour").wire_id;
  Step b = p.s->feed(a.send.data(), a.send.size());
  ASSERT_FALSE(b.ec);
  Step c = p.c->feed(b.send.data(), b.send.size());
  EXPECT_EQ(c.ec, make_error_code(errc::host_key_signature));
}

TEST(Handshake, ImpostorHostKeyIsRejected) {
  // A server that presents someone else's host key cannot sign with it.
  Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
  Identity real = Identity::generate();
  Step a = p.c->start();
  Step b = p.s->feed(a.send.data(), a.send.size());
  std::memcpy(b.send.data() + 79, real.pk.data(), 32);
  Step c = p.c->feed(b.send.data(), b.send.size());
  EXPECT_EQ(c.ec, make_error_code(errc::host_key_signature));
}

TEST(Handshake, BadClientSignatureIsRejected) {
  // A flipped bit of the signature inside a correctly sealed ClientAuth (a flipped bit of the
  // sealed bytes is bad_handshake: TamperedSealedClientAuthIsRefused).
  Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
  fix_ephemerals(p);
  Step a = p.c->start();
  p.client_hello = a.send;
  Step b = p.s->feed(a.send.data(), a.send.size());
  p.server_hello = b.send;
  ASSERT_FALSE(p.c->feed(b.send.data(), b.send.size()).ec);
  Step d = p.c->confirm_host();
  const auto k = k_c2s_of(p.server_hello);
  auto plain = open_client_auth(k.data(), th2_of(p), std::span(d.send).subspan(5));
  ASSERT_TRUE(plain);
  (*plain)[37] ^= 0x40;
  const Bytes body = seal_client_auth(k.data(), th2_of(p), *plain);
  std::copy(body.begin(), body.end(), d.send.begin() + 5);
  Step e = p.s->feed(d.send.data(), d.send.size());
  EXPECT_EQ(e.ec, make_error_code(errc::client_signature));
  EXPECT_FALSE(e.done);
}

TEST(Handshake, ClientWithoutTheSecretKeyIsRejected) {
  Identity victim = Identity::generate(), attacker = Identity::generate();
  Identity forged;
  forged.pk = victim.pk;
  forged.sk = attacker.sk;
  Identity host = Identity::generate();
  ClientHandshake c(forged, cipher("aes128-gcm"), mac("hmac-sha256"));
  ServerHandshake s(host, [&](const PublicKey& k) { return k == victim.pk; });
  Step a = c.start();
  Step b = s.feed(a.send.data(), a.send.size());
  ASSERT_FALSE(c.feed(b.send.data(), b.send.size()).ec);
  Step d = c.confirm_host();
  Step e = s.feed(d.send.data(), d.send.size());
  EXPECT_EQ(e.ec, make_error_code(errc::client_signature));
}

TEST(Handshake, UnauthorizedClientGetsAnAuthenticatedRefusal) {
  Pair p(cipher("aes128-cbc"), mac("hmac-sha256"));
  p.allow = false;
  Step fin = run(p);
  EXPECT_TRUE(fin.done);
  EXPECT_EQ(fin.ec, make_error_code(errc::unauthorized));
  EXPECT_FALSE(p.s->authorized());
  EXPECT_EQ(fin.detail, "client key " + fingerprint(p.client.pk) + " is not authorized");
  // The server tells the client inside the channel.
  const SessionKeys& sk = p.s->keys();
  RecordSealer seal(*sk.cipher, *sk.mac, sk.s2c);
  Message w;
  w.type = MsgType::welcome;
  w.status = Status::refused;
  w.text = fin.detail;
  Bytes payload;
  encode(w, payload);
  Bytes rec(payload.size() + seal.max_overhead());
  std::memcpy(rec.data() + kHeaderLen, payload.data(), payload.size());
  rec.resize(seal.seal(RecordType::control, 0, rec.data(), payload.size()));
  const SessionKeys& ck = p.c->keys();
  RecordOpener open(*ck.cipher, *ck.mac, ck.s2c);
  RecordHeader h{};
  std::span<uint8_t> pl;
  ASSERT_FALSE(open.open(rec.data(), rec.size(), h, pl));
  auto m = decode(pl);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, Status::refused);
  EXPECT_NE(m->text.find("SHA256:"), std::string::npos);
}

TEST(Handshake, UnknownCipherIsRefused) {
  crypto::CipherDesc bogus = cipher("aes128-gcm");
  bogus.wire_id = 99;
  Pair p(bogus, mac("hmac-sha256"));
  Step a = p.c->start();
  Step b = feed_bytewise(*p.s, a.send);
  EXPECT_EQ(b.ec, make_error_code(errc::unsupported_cipher));
  ASSERT_EQ(b.send.size(), 4u + 1 + 174);
  EXPECT_EQ(b.send[14], 1);  // status: unsupported cipher
  // Every key and signature field is zero; the u32 at body offset 106 names the allowed ciphers.
  for (size_t i = 15; i < b.send.size(); ++i)
    if (i < 5 + 106 || i >= 5 + 110) {
      ASSERT_EQ(b.send[i], 0) << i;
    }
  uint32_t all = 0;
  for (const auto& cd : crypto::ciphers()) all |= 1u << cd.wire_id;
  EXPECT_EQ(crypto::load_be32(b.send.data() + 5 + 106), all);
  Step c = p.c->feed(b.send.data(), b.send.size());
  EXPECT_EQ(c.ec, make_error_code(errc::unsupported_cipher));
  EXPECT_NE(c.detail.find("aes128-gcm"), std::string::npos);
  // The mask on the wire comes back as every row of the table, by name, in table order.
  std::string allows;
  // "none" says what it is (a sixty-first re-attack, S61-4: "(it allows: none)" read as nothing).
  for (const auto& cd : crypto::ciphers())
    allows += (allows.empty() ? "" : ", ") +
              (std::string(cd.name) == "none" ? std::string("none (no encryption)") : std::string(cd.name));
  EXPECT_NE(c.detail.find("(it allows: " + allows + ")"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("aes128-cbc, blowfish-cbc, arcfour"), std::string::npos) << c.detail;
  // Said to be unsigned: a host on the path can forge it (a fifty-first re-attack, C51-2).
  EXPECT_NE(c.detail.find("this refusal is not authenticated (any host on the path can send it)"),
            std::string::npos)
      << c.detail;
  // The server stays failed.
  EXPECT_TRUE(p.s->feed(a.send.data(), 1).ec);
}

TEST(Handshake, UnknownMacIsRefusedUnlessAead) {
  crypto::MacDesc bogus = mac("hmac-sha256");
  bogus.wire_id = 77;
  {
    Pair p(cipher("aes128-ctr"), bogus);
    Step a = p.c->start();
    Step b = p.s->feed(a.send.data(), a.send.size());
    EXPECT_EQ(b.ec, make_error_code(errc::unsupported_mac));
    EXPECT_EQ(b.send[14], 2);
    EXPECT_EQ(p.c->feed(b.send.data(), b.send.size()).ec, make_error_code(errc::unsupported_mac));
  }
  {
    Pair p(cipher("aes128-gcm"), bogus);  // AEAD: the MAC byte is ignored
    Step a = p.c->start();
    Step b = p.s->feed(a.send.data(), a.send.size());
    EXPECT_FALSE(b.ec);
    EXPECT_EQ(p.s->keys().mac, crypto::find_mac("none"));
  }
}

TEST(Handshake, WrongVersionAndMagic) {
  {  // A version 3 client (112-byte body with its key at offset 76): told both versions.
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    Step a = p.c->start();
    Bytes v3(a.send.begin(), a.send.begin() + 5 + 76);
    v3.insert(v3.end(), p.client.pk.begin(), p.client.pk.end());
    v3.insert(v3.end(), a.send.end() - 4, a.send.end());
    crypto::store_be32(v3.data(), 113);
    v3[13] = 3;
    Step b = p.s->feed(v3.data(), v3.size());
    EXPECT_EQ(b.ec, make_error_code(errc::bad_magic));
    EXPECT_NE(b.detail.find("version 3, this server " + std::to_string(kVersion)), std::string::npos)
        << b.detail;
    // The category's own words name the version this build speaks (not "version 1").
    EXPECT_EQ(b.ec.message(), "peer does not speak aesxfer protocol version " + std::to_string(kVersion) +
                                  " (bad magic or version)");
    ASSERT_EQ(b.send.size(), 4u + 1 + 174);
    EXPECT_EQ(b.send[13], kVersion);  // a version 3 client reads "the server speaks version 5"
    EXPECT_EQ(b.send[14], 3);
    EXPECT_FALSE(p.s->client_key());
  }
  {
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    Step a = p.c->start();
    a.send[13] = 2;  // a version 2 client: told the version
    Step b = p.s->feed(a.send.data(), a.send.size());
    EXPECT_EQ(b.ec, make_error_code(errc::bad_magic));
    ASSERT_FALSE(b.send.empty());
    EXPECT_EQ(b.send[14], 3);
    // Its ServerHello is of this client's own version: a refusal that contradicts itself (a
    // sixty-first re-attack, S61-3), as what changed the ClientHello on the way makes it.
    EXPECT_EQ(p.c->feed(b.send.data(), b.send.size()).ec, make_error_code(errc::bad_handshake));
  }
  {  // A version 1 client (108-byte ClientHello) is told the version, not "malformed".
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    Step a = p.c->start();
    Bytes v1(a.send.begin(), a.send.begin() + 5 + 76);  // ..., random, then its client key
    v1.insert(v1.end(), p.client.pk.begin(), p.client.pk.end());
    crypto::store_be32(v1.data(), 109);
    v1[13] = 1;
    v1[16] = 0;
    Step b = p.s->feed(v1.data(), v1.size());
    EXPECT_EQ(b.ec, make_error_code(errc::bad_magic));
    ASSERT_EQ(b.send.size(), 4u + 1 + 174);
    EXPECT_EQ(b.send[13], kVersion);
    EXPECT_EQ(b.send[14], 3);
  }
  for (uint8_t old :
       {uint8_t(1), uint8_t(3), uint8_t(4)}) {  // An older server's answer: both versions named.
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    p.c->start();
    const size_t body = old == 1 ? 170 : 174;
    Bytes f(4 + 1 + body, 0);
    crypto::store_be32(f.data(), uint32_t(body + 1));
    f[4] = 2;
    std::memcpy(f.data() + 5, "AESXFER1", 8);
    f[13] = old;
    Step c = p.c->feed(f.data(), f.size());
    EXPECT_EQ(c.ec, make_error_code(errc::bad_magic));
    EXPECT_NE(c.detail.find("version " + std::to_string(old) + ", this client " + std::to_string(kVersion)),
              std::string::npos)
        << c.detail;
  }
  {
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    Step a = p.c->start();
    a.send[5] = 'X';
    Step b = p.s->feed(a.send.data(), a.send.size());
    EXPECT_EQ(b.ec, make_error_code(errc::bad_magic));
    EXPECT_TRUE(b.send.empty());
  }
}

// Every refusal a ServerHello carries is unsigned, the version and busy ones as well as the cipher
// one: a host on the path can send any of them (a fifty-second re-attack's note; C51-2).
TEST(Handshake, EveryRefusalInAServerHelloIsSaidToBeUnauthenticated) {
  const std::string unsigned_note = "this refusal is not authenticated (any host on the path can send it)";
  {  // status 3 in a ServerHello of this client's version: it contradicts itself (S61-3)
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    Step a = p.c->start();
    a.send[13] = 2;
    Step b = p.s->feed(a.send.data(), a.send.size());
    Step c = p.c->feed(b.send.data(), b.send.size());
    EXPECT_EQ(c.ec, make_error_code(errc::bad_handshake));
    EXPECT_NE(c.detail.find("contradicts itself"), std::string::npos) << c.detail;
    EXPECT_NE(c.detail.find(unsigned_note), std::string::npos) << c.detail;
  }
  {  // a ServerHello of another version
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    p.c->start();
    Bytes f(4 + 1 + 174, 0);
    crypto::store_be32(f.data(), 175);
    f[4] = 2;
    std::memcpy(f.data() + 5, "AESXFER1", 8);
    f[13] = 4;
    Step c = p.c->feed(f.data(), f.size());
    EXPECT_EQ(c.ec, make_error_code(errc::bad_magic));
    EXPECT_NE(c.detail.find(unsigned_note), std::string::npos) << c.detail;
  }
  {  // status 5: busy
    Pair p(cipher("aes128-gcm"), mac("hmac-sha256"));
    p.c->start();
    const Bytes busy = busy_server_hello();
    Step c = p.c->feed(busy.data(), busy.size());
    EXPECT_EQ(c.ec, make_error_code(errc::server_busy));
    EXPECT_NE(c.detail.find("server busy: too many connections are waiting to log in"), std::string::npos)
        << c.detail;
    EXPECT_NE(c.detail.find(unsigned_note), std::string::npos) << c.detail;
  }
}

// A sixtieth re-attack (P60-2): an unsigned ServerHello refusal that contradicts itself (the
// cipher it refuses among those it allows, a MAC refused for an AEAD cipher, which has none, the
// checksum it refuses among those it allows) was shown as the server's policy. No server sends one:
// it is a malformed ServerHello. One that does not contradict itself is still the refusal.
TEST(Handshake, ARefusalThatContradictsItselfIsAMalformedServerHello) {
  // status, the u32 at body offset 106, the cipher, the MAC; and whether it contradicts itself
  struct Case {
    uint8_t status;
    uint32_t mask;
    const char* cipher;
    const char* mac;
    bool contradicts;
  };
  const uint32_t gcm = 1u << cipher("aes128-gcm").wire_id, cbc = 1u << cipher("aes128-cbc").wire_id;
  const uint32_t sha = 1u << mac("hmac-sha256").wire_id;
  const uint32_t xxh = 1u << uint8_t(crypto::ChecksumAlg::xxh128);
  for (const Case& k :
       {Case{1, gcm | cbc, "aes128-gcm", "none", true}, Case{1, cbc, "aes128-gcm", "none", false},
        Case{2, sha, "aes128-gcm", "none", true}, Case{2, sha, "aes128-cbc", "hmac-sha256", true},
        Case{2, sha, "aes128-cbc", "none", false}, Case{4, xxh, "aes128-gcm", "none", true},
        // A sixty-first (S61-3): the version refused in a ServerHello of the client's own version.
        Case{3, 0, "aes128-gcm", "none", true}}) {
    Pair p(cipher(k.cipher), mac(k.mac));
    p.c->start();
    std::vector<uint8_t> f = busy_server_hello();
    f[14] = k.status;
    crypto::store_be32(f.data() + 5 + 106, k.mask);
    Step c = p.c->feed(f.data(), f.size());
    const std::string what = std::to_string(k.status) + " " + k.cipher + " " + k.mac;
    if (k.contradicts) {
      EXPECT_EQ(c.ec, make_error_code(errc::bad_handshake)) << what << ": " << c.detail;
      EXPECT_NE(c.detail.find("the ServerHello's refusal contradicts itself"), std::string::npos) << c.detail;
      EXPECT_EQ(c.detail.find("(it allows:"), std::string::npos) << c.detail;
    } else {
      EXPECT_NE(c.ec, make_error_code(errc::bad_handshake)) << what << ": " << c.detail;
      EXPECT_NE(c.detail.find("it allows"), std::string::npos) << what << ": " << c.detail;
    }
  }
  // A sixty-first re-attack (S61-4): a list of "none" alone read as "it allows nothing"; an empty
  // one, "none at all", as the opposite. Each says what it is.
  for (const auto& [status, mask, want] : std::vector<std::tuple<uint8_t, uint32_t, std::string>>{
           {1, 1u << cipher("none").wire_id, "(it allows: none (no encryption))"},
           {4, 1u << uint8_t(crypto::ChecksumAlg::none), "(it allows: none (no checksum))"},
           {4, 0, "(it allows: not one of them)"}}) {
    Pair p(cipher("aes128-gcm"), mac("none"));
    p.c->start();
    std::vector<uint8_t> f = busy_server_hello();
    f[14] = status;
    crypto::store_be32(f.data() + 5 + 106, mask);
    Step c = p.c->feed(f.data(), f.size());
    EXPECT_NE(c.detail.find(want), std::string::npos) << c.detail;
  }
}

TEST(Handshake, GarbageAndOversizedFramesAreRejected) {
  Identity host = Identity::generate();
  auto server = [&] {
    return std::make_unique<ServerHandshake>(host, [](const PublicKey&) { return true; });
  };
  {
    std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    auto s = server();
    Step st = feed_bytewise(*s, Bytes(http.begin(), http.end()));
    EXPECT_EQ(st.ec, make_error_code(errc::bad_handshake));
  }
  for (uint32_t len : {uint32_t(0), uint32_t(kMaxFrame + 1), uint32_t(0xffffffff)}) {
    Bytes f(4);
    crypto::store_be32(f.data(), len);
    auto s = server();
    size_t used = 0;
    Step st = feed_bytewise(*s, f, &used);
    EXPECT_EQ(st.ec, make_error_code(errc::bad_handshake)) << len;
    EXPECT_EQ(used, 4u);
  }
  {  // A maximum-size frame of the right type but the wrong length.
    Bytes f(4 + kMaxFrame, 0);
    crypto::store_be32(f.data(), kMaxFrame);
    f[4] = 1;
    std::memcpy(f.data() + 5, "AESXFER1", 8);
    f[13] = kVersion;
    auto s = server();
    Step st = s->feed(f.data(), f.size());
    EXPECT_EQ(st.ec, make_error_code(errc::bad_handshake));
  }
  {  // A ServerHello where a ClientHello belongs.
    Bytes f(4 + 1 + 174, 0);
    crypto::store_be32(f.data(), 175);
    f[4] = 2;
    auto s = server();
    EXPECT_EQ(s->feed(f.data(), f.size()).ec, make_error_code(errc::unexpected_message));
  }
  {  // Short / truncated ServerHello on the client.
    Identity me = Identity::generate();
    ClientHandshake c(me, cipher("aes128-gcm"), mac("none"));
    c.start();
    Bytes f = {0, 0, 0, 12, 2, 'A', 'E', 'S', 'X', 'F', 'E', 'R', '1', kVersion, 0, 0};
    EXPECT_EQ(c.feed(f.data(), f.size()).ec, make_error_code(errc::bad_handshake));
  }
}

TEST(Handshake, RecordsRightBehindClientAuthAreLeftForTheRecordLayer) {
  Pair p(cipher("aes128-gcm"), mac("none"));
  Step a = p.c->start();
  Step b = p.s->feed(a.send.data(), a.send.size());
  ASSERT_FALSE(p.c->feed(b.send.data(), b.send.size()).ec);
  Step d = p.c->confirm_host();
  const SessionKeys& ck = p.c->keys();
  RecordSealer seal(*ck.cipher, *ck.mac, ck.c2s);
  Bytes rec(10 + seal.max_overhead(), 7);
  rec.resize(seal.seal(RecordType::control, 0, rec.data(), 10));
  Bytes wire = d.send;
  wire.insert(wire.end(), rec.begin(), rec.end());
  Step e = p.s->feed(wire.data(), wire.size());
  ASSERT_FALSE(e.ec);
  EXPECT_TRUE(e.done);
  EXPECT_EQ(e.consumed, d.send.size());
  const SessionKeys& sk = p.s->keys();
  RecordOpener open(*sk.cipher, *sk.mac, sk.c2s);
  RecordHeader h{};
  std::span<uint8_t> pl;
  Bytes rest(wire.begin() + ptrdiff_t(e.consumed), wire.end());
  EXPECT_FALSE(open.open(rest.data(), rest.size(), h, pl));
  // Feeding the handshake after it finished is a caller bug.
  EXPECT_EQ(p.s->feed(rest.data(), rest.size()).ec, make_error_code(errc::unexpected_message));
}

TEST(Handshake, ClientRejectsUnsolicitedBytes) {
  Identity me = Identity::generate();
  ClientHandshake c(me, cipher("aes128-gcm"), mac("none"));
  uint8_t x = 0;
  EXPECT_EQ(c.feed(&x, 1).ec, make_error_code(errc::unexpected_message));
  EXPECT_TRUE(c.confirm_host().ec);
}

// Random mutations of every handshake frame: no crash, and either an error or (if the mutation
// hit nothing that matters, which cannot happen for signed bytes) a clean continuation.
TEST(Handshake, MutatedFramesFuzz) {
  std::mt19937_64 rng(99);
  for (int iter = 0; iter < 300; ++iter) {
    Pair p(cipher(iter % 3 ? "aes128-gcm" : "aes128-cbc"), mac("hmac-sha256"));
    Step a = p.c->start();
    int target = iter % 3;
    auto mutate = [&](Bytes& f) {
      size_t pos = rng() % f.size();
      f[pos] ^= uint8_t(1 + rng() % 255);
      if (rng() % 4 == 0) f.resize(rng() % (f.size() + 1));
    };
    if (target == 0) mutate(a.send);
    Step b = p.s->feed(a.send.data(), a.send.size());
    if (b.ec || b.send.empty()) continue;
    if (target == 1) mutate(b.send);
    Step c = p.c->feed(b.send.data(), b.send.size());
    if (target == 0 && !c.ec && c.consumed == b.send.size()) {
      // The server saw a mutated ClientHello yet signed: the client must refuse it.
      ADD_FAILURE() << "mutated ClientHello accepted";
    }
    if (c.ec || !p.c->host_key()) continue;
    Step d = p.c->confirm_host();
    if (target == 2) mutate(d.send);
    Step e = p.s->feed(d.send.data(), d.send.size());
    if (target == 2) {
      EXPECT_FALSE(e.done && !e.ec) << "mutated ClientAuth accepted";
    }
  }
}

TEST(Handshake, FingerprintMatchesOpenSsl) {
  Identity id = Identity::generate();
  uint8_t d[32];
  SHA256(id.pk.data(), 32, d);
  unsigned char b64[64];
  int n = EVP_EncodeBlock(b64, d, 32);
  std::string expect(reinterpret_cast<char*>(b64), size_t(n));
  while (!expect.empty() && expect.back() == '=') expect.pop_back();
  EXPECT_EQ(fingerprint(id.pk), "SHA256:" + expect);
  PublicKey zero{};
  // ssh-keygen style: SHA256 of 32 zero bytes.
  EXPECT_EQ(fingerprint(zero), "SHA256:Zmh6rfhivXdsj8GLjp+OIAiXFIVu4jOzkCpZHQ1fKSU");
}

}  // namespace
}  // namespace aesxfer::proto

namespace aesxfer::proto {
namespace {

// Checksum and record size (docs/PROTOCOL.md 1.2, 1.3): the client's choice, the server's policy.
TEST(HandshakeParams, ChecksumAndRecordSizeAgreedAndSigned) {
  Identity host = Identity::generate(), me = Identity::generate();
  for (auto alg : {crypto::ChecksumAlg::none, crypto::ChecksumAlg::sha256, crypto::ChecksumAlg::xxh128})
    for (uint32_t want : {kMinRecordSize, uint32_t(65536), kMaxRecordSize}) {
      ServerPolicy pol;
      pol.max_record_size = 65536;
      ClientHandshake c(me, *crypto::find_cipher("aes128-gcm"), *crypto::find_mac("none"), {alg, want});
      ServerHandshake s(
          host, [](const PublicKey&) { return true; }, pol);
      Step a = c.start();
      EXPECT_EQ(a.send[16], uint8_t(alg));
      Step b = s.feed(a.send.data(), a.send.size());
      ASSERT_FALSE(b.ec) << b.ec.message();
      ASSERT_FALSE(c.feed(b.send.data(), b.send.size()).ec);
      Step d = c.confirm_host();
      ASSERT_TRUE(s.feed(d.send.data(), d.send.size()).done);
      const uint32_t agreed = std::min(want, uint32_t(65536));
      EXPECT_EQ(c.keys().checksum, alg);
      EXPECT_EQ(s.keys().checksum, alg);
      EXPECT_EQ(c.keys().record_size, agreed);
      EXPECT_EQ(s.keys().record_size, agreed);
    }
}

TEST(HandshakeParams, ServerRefusesAChecksumItDoesNotAllowAndSaysWhich) {
  Identity host = Identity::generate(), me = Identity::generate();
  ServerPolicy pol;
  pol.checksums = 1u << uint8_t(crypto::ChecksumAlg::sha256);  // serve --checksums sha256
  ClientHandshake c(me, *crypto::find_cipher("aes128-gcm"), *crypto::find_mac("none"),
                    {crypto::ChecksumAlg::none, uint32_t(kDefaultPayload)});
  ServerHandshake s(
      host, [](const PublicKey&) { return true; }, pol);
  Step a = c.start();
  Step b = s.feed(a.send.data(), a.send.size());
  EXPECT_EQ(b.ec, make_error_code(errc::unsupported_checksum));
  ASSERT_EQ(b.send.size(), 4u + 1 + 174);
  EXPECT_EQ(b.send[14], 4);
  Step r = c.feed(b.send.data(), b.send.size());
  EXPECT_EQ(r.ec, make_error_code(errc::unsupported_checksum));
  EXPECT_NE(r.detail.find("checksum none"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("allows: sha256"), std::string::npos) << r.detail;
}

TEST(HandshakeParams, MalformedParametersAreRejected) {
  Identity host = Identity::generate(), me = Identity::generate();
  auto hello = [&] {
    ClientHandshake c(me, *crypto::find_cipher("aes128-gcm"), *crypto::find_mac("none"));
    return c.start().send;
  };
  for (uint32_t bad : {uint32_t(0), kMinRecordSize - 1, kMaxRecordSize + 1, uint32_t(0xffffffff)}) {
    Bytes f = hello();
    crypto::store_be32(f.data() + 81, bad);
    ServerHandshake s(host, [](const PublicKey&) { return true; });
    EXPECT_EQ(s.feed(f.data(), f.size()).ec, make_error_code(errc::bad_handshake)) << bad;
  }
  {  // An unknown checksum id.
    Bytes f = hello();
    f[16] = 3;
    ServerHandshake s(host, [](const PublicKey&) { return true; });
    EXPECT_EQ(s.feed(f.data(), f.size()).ec, make_error_code(errc::bad_handshake));
  }
  // The client refuses out-of-range sizes before sending anything.
  EXPECT_THROW(ClientHandshake(me, *crypto::find_cipher("aes128-gcm"), *crypto::find_mac("none"),
                               {crypto::ChecksumAlg::xxh128, kMaxRecordSize + 1}),
               std::invalid_argument);
  {  // A server that "agrees" to more than the client asked for is refused (it is signed, so
     // only a broken or hostile server can do it; re-signing is not possible for a relay).
    ClientHandshake c(me, *crypto::find_cipher("aes128-gcm"), *crypto::find_mac("none"),
                      {crypto::ChecksumAlg::xxh128, 8192});
    Step a = c.start();
    crypto::store_be32(a.send.data() + 81, 65536);  // the server sees a bigger request
    ServerHandshake s(host, [](const PublicKey&) { return true; });
    Step b = s.feed(a.send.data(), a.send.size());
    ASSERT_FALSE(b.ec);
    EXPECT_TRUE(c.feed(b.send.data(), b.send.size()).ec);  // transcript or size: refused either way
  }
}

}  // namespace
}  // namespace aesxfer::proto
