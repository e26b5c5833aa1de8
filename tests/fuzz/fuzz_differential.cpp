// libFuzzer target: every implementation of each cipher, MAC and checksum agrees byte for byte on
// the same fuzzed key, IV and lengths, with each other and with an outside oracle (OpenSSL's
// libcrypto for AES, GCM, Blowfish, RC4, SHA-256 and HMAC; libxxhash's scalar XXH3 for XXH3-128).
// The implementations are those the CPU runs (crypto/dispatch.h): AES in VAES, AES-NI, the
// vector-permute ones and the portable table-free code; GHASH in VPCLMULQDQ, PCLMULQDQ and
// portable; SHA-256 in SHA-NI and portable, and multi-buffer in 16 AVX-512 lanes, 8 AVX2 lanes,
// SHA-NI and portable; XXH3 in AVX-512, AVX2 and SSE2. Records sealed by the best table and the
// portable one, one at a time and in batches, are the same bytes on the wire.
//
// Input: byte 0 = family, byte 1 = a selector the family reads (splits, lane counts, tamper bit),
// bytes 2..17 = key, 18..33 = IV or nonce, then the data (at most 64 KiB is used).
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/provider.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_SCALAR
#include <xxhash.h>

#include "crypto/aes.h"
#include "crypto/blowfish.h"
#include "crypto/checksum.h"
#include "crypto/gcm.h"
#include "crypto/rc4.h"
#include "crypto/sha256.h"
#include "crypto/sha256_mb.h"
#include "crypto/suite.h"
#include "proto/record.h"
#include "tests/fuzz/fixed_keys.h"

using namespace aesxfer;
using Bytes = std::vector<uint8_t>;

namespace {

[[noreturn]] void disagree() { __builtin_trap(); }
void same(const Bytes& a, const Bytes& b) {
  if (a != b) disagree();
}

struct Input {
  uint8_t sel;
  const uint8_t* key;  // 16 bytes
  const uint8_t* iv;   // 16 bytes
  const uint8_t* data;
  size_t len;
};

// ---- OpenSSL, the oracle ----------------------------------------------------------------------

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

// Runs an OpenSSL cipher without padding over in; for GCM, aad and the tag (out) too.
Bytes openssl_cipher(const EVP_CIPHER* cipher, bool enc, const uint8_t* key, int key_len, const uint8_t* iv,
                     const Bytes& in) {
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> c(EVP_CIPHER_CTX_new());
  if (!c || EVP_CipherInit_ex(c.get(), cipher, nullptr, nullptr, nullptr, enc) != 1) disagree();
  if (EVP_CIPHER_CTX_set_key_length(c.get(), key_len) != 1) disagree();
  if (EVP_CipherInit_ex(c.get(), nullptr, nullptr, key, iv, enc) != 1) disagree();
  EVP_CIPHER_CTX_set_padding(c.get(), 0);
  Bytes out(in.size() + 32);
  int n = 0, m = 0;
  if (EVP_CipherUpdate(c.get(), out.data(), &n, in.data(), int(in.size())) != 1) disagree();
  if (EVP_CipherFinal_ex(c.get(), out.data() + n, &m) != 1) disagree();
  out.resize(size_t(n + m));
  return out;
}

void openssl_gcm_seal(const Input& x, const Bytes& aad, const Bytes& pt, Bytes& ct, Bytes& tag) {
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> c(EVP_CIPHER_CTX_new());
  int n = 0;
  if (EVP_EncryptInit_ex(c.get(), EVP_aes_128_gcm(), nullptr, x.key, x.iv) != 1) disagree();
  if (!aad.empty() && EVP_EncryptUpdate(c.get(), nullptr, &n, aad.data(), int(aad.size())) != 1) disagree();
  ct.assign(pt.size(), 0);
  if (!pt.empty() && EVP_EncryptUpdate(c.get(), ct.data(), &n, pt.data(), int(pt.size())) != 1) disagree();
  if (EVP_EncryptFinal_ex(c.get(), ct.data() + pt.size(), &n) != 1) disagree();
  tag.assign(16, 0);
  if (EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_GET_TAG, 16, tag.data()) != 1) disagree();
}

// Blowfish and RC4 live in OpenSSL 3's legacy provider.
// The handles are kept (reachable) for the life of the process.
bool legacy_loaded() {
  static OSSL_PROVIDER* legacy = OSSL_PROVIDER_load(nullptr, "legacy");
  static OSSL_PROVIDER* deflt = OSSL_PROVIDER_load(nullptr, "default");
  return legacy != nullptr && deflt != nullptr;
}

// ---- AES: block, CBC, CTR, CBC lanes --------------------------------------------------------

// The block-cipher entry points over data, cut where sel says, for one implementation.
struct BlockRun {
  Bytes ecb_enc, ecb_dec, cbc_enc, cbc_dec, ctr, lanes;
};

BlockRun run_block(const crypto::BlockCipher& bc, const Input& x, size_t bs) {
  const size_t blocks = x.len / bs;
  const Bytes in(x.data, x.data + blocks * bs);
  BlockRun r;
  r.ecb_enc = r.ecb_dec = r.cbc_enc = r.cbc_dec = r.lanes = in;
  bc.encrypt_blocks(in.data(), r.ecb_enc.data(), blocks);
  bc.decrypt_blocks(in.data(), r.ecb_dec.data(), blocks);
  // CBC in two calls, the IV carried between them; decryption in place.
  const size_t cut = blocks == 0 ? 0 : x.sel % (blocks + 1);
  Bytes iv(x.iv, x.iv + bs);
  bc.cbc_encrypt(iv.data(), in.data(), r.cbc_enc.data(), cut);
  bc.cbc_encrypt(iv.data(), in.data() + cut * bs, r.cbc_enc.data() + cut * bs, blocks - cut);
  iv.assign(x.iv, x.iv + bs);
  bc.cbc_decrypt(iv.data(), r.cbc_dec.data(), r.cbc_dec.data(), cut);
  bc.cbc_decrypt(iv.data(), r.cbc_dec.data() + cut * bs, r.cbc_dec.data() + cut * bs, blocks - cut);
  // CTR over every byte (a partial last block allowed), in place.
  if (bs == 16) {
    r.ctr.assign(x.data, x.data + x.len);
    Bytes ctr(x.iv, x.iv + 16);
    bc.ctr_xor(ctr.data(), r.ctr.data(), r.ctr.data(), r.ctr.size());
  }
  // Independent chains of uneven lengths as lanes, each with its own IV.
  const size_t n = size_t(x.sel % 17) + 1;
  std::vector<Bytes> ivs(n, Bytes(x.iv, x.iv + bs));
  std::vector<crypto::CbcLane> lanes;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    ivs[i][0] ^= uint8_t(i);
    const size_t b = i + 1 == n ? blocks - at : (blocks - at) * (i % 3) / 4;
    lanes.push_back({ivs[i].data(), in.data() + at * bs, r.lanes.data() + at * bs, b});
    at += b;
  }
  bc.cbc_encrypt_lanes(lanes.data(), lanes.size());
  for (const Bytes& v : ivs) r.lanes.insert(r.lanes.end(), v.begin(), v.end());
  return r;
}

void same(const BlockRun& a, const BlockRun& b) {
  same(a.ecb_enc, b.ecb_enc);
  same(a.ecb_dec, b.ecb_dec);
  same(a.cbc_enc, b.cbc_enc);
  same(a.cbc_dec, b.cbc_dec);
  same(a.ctr, b.ctr);
  same(a.lanes, b.lanes);
}

void aes(const Input& x) {
  const std::vector<crypto::AesImpl> impls = crypto::aes_available_impls();
  BlockRun first;
  for (size_t i = 0; i < impls.size(); ++i) {
    auto bc = crypto::make_aes128(x.key, impls[i]);
    if (!bc) disagree();  // listed as available
    BlockRun r = run_block(*bc, x, 16);
    if (i == 0)
      first = std::move(r);
    else
      same(first, r);
  }
  const Bytes in(x.data, x.data + x.len / 16 * 16);
  same(first.ecb_enc, openssl_cipher(EVP_aes_128_ecb(), true, x.key, 16, nullptr, in));
  same(first.ecb_dec, openssl_cipher(EVP_aes_128_ecb(), false, x.key, 16, nullptr, in));
  same(first.cbc_enc, openssl_cipher(EVP_aes_128_cbc(), true, x.key, 16, x.iv, in));
  same(first.cbc_dec, openssl_cipher(EVP_aes_128_cbc(), false, x.key, 16, x.iv, in));
  same(first.ctr, openssl_cipher(EVP_aes_128_ctr(), true, x.key, 16, x.iv, Bytes(x.data, x.data + x.len)));
}

// ---- AES-128-GCM ------------------------------------------------------------------------------

void gcm(const Input& x) {
  const size_t aad_len = std::min<size_t>(x.len, size_t(x.sel) * 3);
  const Bytes aad(x.data, x.data + aad_len);
  const Bytes pt(x.data + aad_len, x.data + x.len);
  Bytes want_ct, want_tag;
  openssl_gcm_seal(x, aad, pt, want_ct, want_tag);
  for (crypto::AesImpl impl : crypto::aes_available_impls()) {
    auto g = crypto::Aes128Gcm::make(x.key, impl);
    if (!g) disagree();
    Bytes ct(pt.size()), tag(16);
    g->seal(x.iv, aad.data(), aad.size(), pt.data(), ct.data(), pt.size(), tag.data());
    same(ct, want_ct);
    same(tag, want_tag);
    Bytes back(ct.size());
    if (!g->open(x.iv, aad.data(), aad.size(), ct.data(), back.data(), ct.size(), tag.data())) disagree();
    same(back, pt);
    // One flipped bit anywhere (aad, ciphertext or tag) fails, and nothing is written.
    Bytes a2 = aad, c2 = ct, t2 = tag;
    const size_t total = a2.size() + c2.size() + 16;
    const size_t bit = (size_t(x.sel) * 131 + x.len) % (total * 8);
    uint8_t* victim = bit / 8 < a2.size()               ? &a2[bit / 8]
                      : bit / 8 < a2.size() + c2.size() ? &c2[bit / 8 - a2.size()]
                                                        : &t2[bit / 8 - a2.size() - c2.size()];
    *victim ^= uint8_t(1u << (bit % 8));
    Bytes untouched(c2.size(), 0xa5);
    if (g->open(x.iv, a2.data(), a2.size(), c2.data(), untouched.data(), c2.size(), t2.data())) disagree();
    if (std::any_of(untouched.begin(), untouched.end(), [](uint8_t b) { return b != 0xa5; })) disagree();
  }
}

// ---- Blowfish and RC4 (one implementation each, against OpenSSL's legacy provider) -------------

void blowfish(const Input& x) {
  if (!legacy_loaded()) disagree();
  const size_t key_len = 4 + x.sel % 13;  // 4..16 bytes of the key field
  auto bf = crypto::make_blowfish(x.key, key_len);
  if (!bf) disagree();
  const BlockRun r = run_block(*bf, x, 8);
  const Bytes in(x.data, x.data + x.len / 8 * 8);
  EVP_CIPHER* ecb = EVP_CIPHER_fetch(nullptr, "BF-ECB", nullptr);
  EVP_CIPHER* cbc = EVP_CIPHER_fetch(nullptr, "BF-CBC", nullptr);
  if (!ecb || !cbc) disagree();
  same(r.ecb_enc, openssl_cipher(ecb, true, x.key, int(key_len), nullptr, in));
  same(r.ecb_dec, openssl_cipher(ecb, false, x.key, int(key_len), nullptr, in));
  same(r.cbc_enc, openssl_cipher(cbc, true, x.key, int(key_len), x.iv, in));
  same(r.cbc_dec, openssl_cipher(cbc, false, x.key, int(key_len), x.iv, in));
  EVP_CIPHER_free(ecb);
  EVP_CIPHER_free(cbc);
}

void rc4(const Input& x) {
  if (!legacy_loaded()) disagree();
  const size_t key_len = 1 + x.sel % 16;
  const size_t discard = (x.sel & 0x80) ? crypto::Rc4::kRfc4345Discard : size_t(x.sel % 7) * 5;
  crypto::Rc4 ours(x.key, key_len, discard);
  // Ours in two pieces cut where the data's first byte says, in place.
  Bytes got(x.data, x.data + x.len);
  const size_t cut = got.empty() ? 0 : got[0] % (got.size() + 1);
  ours.xor_stream(got.data(), got.data(), cut);
  ours.xor_stream(got.data() + cut, got.data() + cut, got.size() - cut);
  // OpenSSL's RC4 after throwing away the same number of keystream bytes.
  EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, "RC4", nullptr);
  if (!c) disagree();
  Bytes in(discard, 0);
  in.insert(in.end(), x.data, x.data + x.len);
  Bytes want = openssl_cipher(c, true, x.key, int(key_len), nullptr, in);
  EVP_CIPHER_free(c);
  same(got, Bytes(want.begin() + ptrdiff_t(discard), want.end()));
}

// ---- SHA-256, HMAC-SHA256, one stream and many lanes -------------------------------------------

// Splits data into n messages of uneven lengths (some empty).
std::vector<std::pair<const uint8_t*, size_t>> messages(const Input& x, size_t n) {
  std::vector<std::pair<const uint8_t*, size_t>> m;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t left = x.len - at;
    const size_t k = i + 1 == n ? left : (i % 4 == 3 ? 0 : left * ((x.sel + i) % 5) / 8);
    m.push_back({x.data + at, k});
    at += k;
  }
  return m;
}

constexpr crypto::ShaMbImpl kMbImpls[] = {crypto::ShaMbImpl::avx512x16, crypto::ShaMbImpl::avx2x8,
                                          crypto::ShaMbImpl::shani, crypto::ShaMbImpl::software};

void sha256(const Input& x) {
  Bytes want(32);
  SHA256(x.data, x.len, want.data());
  for (crypto::ShaImpl impl : {crypto::ShaImpl::shani, crypto::ShaImpl::software}) {
    if (!crypto::sha256_impl_available(impl)) continue;
    crypto::Sha256 h(impl);
    const size_t cut = x.len == 0 ? 0 : x.sel * 37 % (x.len + 1);
    h.update(x.data, cut);
    h.update(x.data + cut, x.len - cut);
    Bytes got(32);
    h.final(got.data());
    same(got, want);
  }
  const auto msgs = messages(x, size_t(x.sel % 40) + 1);
  std::vector<Bytes> digests(msgs.size(), Bytes(32));
  for (size_t i = 0; i < msgs.size(); ++i) SHA256(msgs[i].first, msgs[i].second, digests[i].data());
  for (crypto::ShaMbImpl impl : kMbImpls) {
    if (!crypto::sha256_mb_impl_available(impl)) continue;
    std::vector<Bytes> out(msgs.size(), Bytes(32));
    std::vector<crypto::Sha256Job> jobs;
    for (size_t i = 0; i < msgs.size(); ++i) jobs.push_back({msgs[i].first, msgs[i].second, out[i].data()});
    crypto::sha256_many_with(impl, jobs.data(), jobs.size());
    for (size_t i = 0; i < msgs.size(); ++i) same(out[i], digests[i]);
  }
}

void hmac(const Input& x) {
  // The key: up to 160 bytes from the data (longer than a block is hashed first), the rest the
  // messages, each given in two parts as the record layer gives them.
  const size_t key_len = std::min<size_t>(x.len, x.sel % 2 ? x.sel : x.sel % 33);
  const Input rest{x.sel, x.key, x.iv, x.data + key_len, x.len - key_len};
  const auto msgs = messages(rest, size_t(x.sel % 24) + 1);
  std::vector<Bytes> want(msgs.size(), Bytes(32));
  for (size_t i = 0; i < msgs.size(); ++i) {
    unsigned len = 32;
    if (!HMAC(EVP_sha256(), x.data, int(key_len), msgs[i].first, msgs[i].second, want[i].data(), &len))
      disagree();
  }
  for (crypto::ShaImpl impl : {crypto::ShaImpl::shani, crypto::ShaImpl::software}) {
    if (!crypto::sha256_impl_available(impl)) continue;
    crypto::HmacSha256 key(x.data, key_len, impl);
    for (size_t i = 0; i < msgs.size(); ++i) {
      Bytes got(32);
      key.mac(msgs[i].first, msgs[i].second, got.data());
      same(got, want[i]);
    }
    for (crypto::ShaMbImpl mb : kMbImpls) {
      if (!crypto::sha256_mb_impl_available(mb)) continue;
      std::vector<Bytes> out(msgs.size(), Bytes(32));
      std::vector<crypto::HmacJob> jobs;
      for (size_t i = 0; i < msgs.size(); ++i) {
        const size_t p1 = std::min<size_t>(msgs[i].second, 16);
        jobs.push_back({msgs[i].first, p1, msgs[i].first + p1, msgs[i].second - p1, out[i].data()});
      }
      crypto::hmac_sha256_many_with(mb, key, jobs.data(), jobs.size());
      for (size_t i = 0; i < msgs.size(); ++i) same(out[i], want[i]);
    }
  }
}

// ---- XXH3-128, the file checksum ---------------------------------------------------------------

void xxh128(const Input& x) {
  const XXH128_hash_t h = XXH3_128bits(x.data, x.len);
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);
  const Bytes want(canon.digest, canon.digest + 16);
  for (crypto::XxhImpl impl : {crypto::XxhImpl::avx512, crypto::XxhImpl::avx2, crypto::XxhImpl::sse2}) {
    if (!crypto::xxh_impl_available(impl)) continue;
    crypto::FileChecksum c(crypto::ChecksumAlg::xxh128, impl);
    // Fed in pieces whose sizes the selector picks (1 to 4 KiB, crossing stripes and blocks).
    size_t at = 0, step = size_t(x.sel) * 17 + 1;
    while (at < x.len) {
      const size_t k = std::min(step, x.len - at);
      c.update(x.data + at, k);
      at += k;
      step = step * 5 % 4093 + 1;
    }
    const crypto::Checksum got = c.final();
    if (got.len != 16) disagree();
    same(Bytes(got.bytes.begin(), got.bytes.begin() + 16), want);
  }
}

// ---- Records: the best table and the portable one, one by one and in batches -----------------

struct Sealed {
  std::vector<Bytes> wire;
};

Sealed seal_records(const crypto::CipherDesc& c, const crypto::MacDesc& m, crypto::Impl impl, bool batch,
                    const std::vector<std::pair<const uint8_t*, size_t>>& msgs) {
  proto::RecordSealer s(c, m, fuzz::fixed_keys(), impl);
  std::vector<Bytes> recs(msgs.size());
  std::vector<proto::SealJob> jobs(msgs.size());
  for (size_t i = 0; i < msgs.size(); ++i) {
    recs[i].assign(proto::kHeaderLen + msgs[i].second + s.max_overhead(), 0);
    if (msgs[i].second) std::memcpy(recs[i].data() + proto::kHeaderLen, msgs[i].first, msgs[i].second);
    const bool end = i + 1 == msgs.size();
    jobs[i] = {end ? proto::RecordType::end : proto::RecordType::data, uint8_t(end ? proto::kFlagFinal : 0),
               recs[i].data(), msgs[i].second, 0};
  }
  if (batch) {
    s.seal_batch(jobs.data(), jobs.size());
  } else {
    for (auto& j : jobs) j.wire_len = s.seal(j.type, j.flags, j.rec, j.payload_len);
  }
  Sealed out;
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (jobs[i].wire_len > recs[i].size()) disagree();
    recs[i].resize(jobs[i].wire_len);
    out.wire.push_back(std::move(recs[i]));
  }
  return out;
}

void records(const Input& x) {
  const auto ciphers = crypto::ciphers();
  const auto macs = crypto::macs();
  const crypto::CipherDesc& c = ciphers[x.sel % ciphers.size()];
  const crypto::MacDesc& m = macs[(x.sel / ciphers.size()) % macs.size()];
  const Input body{x.sel, x.key, x.iv, x.data, std::min(x.len, proto::kMaxPayload)};
  const auto msgs = messages(body, size_t(x.key[0] % 18) + 1);
  const Sealed want = seal_records(c, m, crypto::Impl::portable, false, msgs);
  for (crypto::Impl impl : {crypto::Impl::portable, crypto::Impl::best})
    for (bool batch : {false, true}) {
      const Sealed got = seal_records(c, m, impl, batch, msgs);
      for (size_t i = 0; i < msgs.size(); ++i) same(got.wire[i], want.wire[i]);
    }
  // Opened by either table, one batch: the payloads come back.
  for (crypto::Impl impl : {crypto::Impl::portable, crypto::Impl::best}) {
    proto::RecordOpener o(c, m, fuzz::fixed_keys(), impl);
    std::vector<Bytes> recs = want.wire;
    std::vector<proto::OpenJob> jobs;
    for (Bytes& r : recs) jobs.push_back({r.data(), r.size(), {}, {}});
    if (o.open_batch(jobs.data(), jobs.size())) disagree();
    for (size_t i = 0; i < msgs.size(); ++i)
      same(Bytes(jobs[i].payload.begin(), jobs[i].payload.end()),
           Bytes(msgs[i].first, msgs[i].first + msgs[i].second));
  }
}

using Family = void (*)(const Input&);
constexpr Family kFamilies[] = {aes, gcm, blowfish, rc4, sha256, hmac, xxh128, records};

}  // namespace

// OpenSSL sets up its providers, method caches and error tables on first use, and keeps them: run
// every family once before the fuzzing starts, so that LeakSanitizer does not count them.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static const uint8_t warm[128] = {};
  for (Family f : kFamilies) f(Input{0, warm, warm + 16, warm + 32, sizeof warm - 32});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 34) return 0;
  const Input x{data[1], data + 2, data + 18, data + 34, std::min<size_t>(size - 34, 65536)};
  kFamilies[data[0] % std::size(kFamilies)](x);
  return 0;
}
