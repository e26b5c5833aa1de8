// The record layer. Every byte of the format is specified in docs/PROTOCOL.md, "Records".
#include "proto/record.h"

#include <sodium.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "crypto/aes.h"
#include "crypto/blowfish.h"
#include "crypto/ct.h"
#include "crypto/gcm.h"
#include "crypto/rc4.h"
#include "crypto/sha256.h"
#include "crypto/sha256_mb.h"
#include "crypto/util.h"
#include "proto/error.h"
#include "proto/kdf.h"

namespace aesxfer::proto {

void DirectionKeys::wipe() noexcept {
  crypto::secure_zero(enc, sizeof enc);
  crypto::secure_zero(mac, sizeof mac);
  crypto::secure_zero(iv, sizeof iv);
}

namespace {

using crypto::CipherMode;

void write_header(uint8_t* h, uint32_t body_len, RecordType type, uint8_t flags) {
  crypto::store_be32(h, body_len);
  h[4] = uint8_t(type);
  h[5] = flags;
  h[6] = 0;
  h[7] = 0;
}

}  // namespace

bool check_cbc_padding(const uint8_t* body, size_t body_len, size_t block, size_t& pad_len) noexcept {
  const uint32_t b = uint32_t(block);
  const uint32_t n = body[body_len - 1];
  uint32_t bad = ((n - 1) >> 31) | ((b - n) >> 31);  // n == 0 or n > b
  for (uint32_t i = 0; i < b; ++i) {
    const uint32_t in_pad = (i - n) >> 31;                       // i < n
    const uint32_t diff = uint32_t(body[body_len - 1 - i]) ^ n;  // 0..255
    bad |= in_pad & ((diff + 0xFFu) >> 8);                       // 1 when diff != 0, without a branch
  }
  // Public from here: the verdict ends or continues the connection and n fixes the payload length
  // (both only after the MAC verified, or with MAC none; see docs/PROTOCOL.md).
  uint32_t verdict[2] = {bad, n};
  crypto::ct_public(verdict, sizeof verdict);
  pad_len = verdict[1];
  return verdict[0] == 0;
}

// The cipher and MAC state of one direction, shared by the sealer and the opener.
class RecordCrypto {
 public:
  RecordCrypto(const crypto::CipherDesc& c, const crypto::MacDesc& m, const DirectionKeys& k) : c_(c) {
    std::memcpy(&k_, &k, sizeof k_);
    if (sodium_init() < 0) throw std::runtime_error("libsodium initialisation failed");
    if (!c.aead) {
      if (std::string_view(m.name) == "hmac-sha256")
        hmac_ = std::make_unique<crypto::HmacSha256>(k_.mac, 32);
      else if (m.tag_len != 0)
        throw std::invalid_argument(std::string("record layer: unsupported MAC ") + m.name);
      tag_len_ = m.tag_len;
    } else {
      tag_len_ = c.tag_len;
    }
    switch (c.mode) {
      case CipherMode::gcm:
        gcm_ = crypto::Aes128Gcm::make(k_.enc);
        if (!gcm_) throw std::runtime_error("AES-128-GCM unavailable");
        break;
      case CipherMode::cbc:
      case CipherMode::ctr:
        if (c.rekey_bytes) {
          records_per_epoch_ = c.rekey_bytes / kMaxPayload;
          if (records_per_epoch_ == 0) records_per_epoch_ = 1;
        }
        bc_ = make_block(0);
        if (!bc_) throw std::runtime_error(std::string("cannot construct cipher ") + c.name);
        break;
      case CipherMode::stream:
      case CipherMode::none:
        break;
    }
  }
  ~RecordCrypto() { k_.wipe(); }

  size_t tag_len() const noexcept { return tag_len_; }
  // Records worth sealing or opening together (see RecordSealer::batch_records).
  size_t batch_records() const noexcept { return (hmac_ || c_.mode == CipherMode::cbc) ? 16 : 4; }
  size_t block() const noexcept { return c_.mode == CipherMode::cbc ? c_.block_len : 1; }
  size_t max_overhead() const noexcept {
    return kHeaderLen + (c_.mode == CipherMode::cbc ? c_.block_len : 0) + tag_len_;
  }

  size_t parse_header(const uint8_t* h, RecordHeader& out, std::error_code& ec) const noexcept {
    ec.clear();
    uint32_t body_len = crypto::load_be32(h);
    size_t max_body = kMaxPayload + (c_.mode == CipherMode::cbc ? c_.block_len : 0);
    if (body_len > kMaxBody || body_len > max_body) {
      ec = errc::record_too_large;
      return 0;
    }
    uint8_t type = h[4], flags = h[5];
    if (type < uint8_t(RecordType::data) || type > uint8_t(RecordType::end) || (flags & ~kFlagFinal) != 0 ||
        h[6] != 0 || h[7] != 0 || ((type == uint8_t(RecordType::end)) != ((flags & kFlagFinal) != 0))) {
      ec = errc::bad_record_type;
      return 0;
    }
    if (c_.mode == CipherMode::cbc && (body_len == 0 || body_len % c_.block_len != 0)) {
      ec = errc::bad_record_length;
      return 0;
    }
    out.body_len = body_len;
    out.type = RecordType(type);
    out.flags = flags;
    return size_t(body_len) + tag_len_;
  }

  // skip_mac: the caller computes the tag (seal_batch).
  size_t seal(uint64_t seq, RecordType type, uint8_t flags, uint8_t* rec, size_t len, bool skip_mac = false) noexcept {
    uint8_t* body = rec + kHeaderLen;
    size_t body_len = len;
    if (c_.mode == CipherMode::cbc) {
      size_t b = c_.block_len;
      size_t n = b - len % b;
      std::memset(body + len, int(n), n);
      body_len = len + n;
    }
    write_header(rec, uint32_t(body_len), type, flags);
    uint8_t* tag = body + body_len;
    switch (c_.mode) {
      case CipherMode::gcm: {
        uint8_t nonce[12];
        gcm_nonce(seq, nonce);
        gcm_->seal(nonce, rec, kHeaderLen, body, body, body_len, tag);
        return kHeaderLen + body_len + tag_len_;
      }
      case CipherMode::cbc: {
        const crypto::BlockCipher& bc = block_for(seq);
        uint8_t iv[16];
        cbc_iv(bc, seq, iv);
        bc.cbc_encrypt(iv, body, body, body_len / c_.block_len);
        crypto::secure_zero(iv, sizeof iv);
        break;
      }
      case CipherMode::ctr: {
        uint8_t ctr[16];
        ctr_block(seq, ctr);
        block_for(seq).ctr_xor(ctr, body, body, body_len);
        break;
      }
      case CipherMode::stream: rc4_xor(seq, body, body_len); break;
      case CipherMode::none: break;
    }
    if (hmac_ && !skip_mac) compute_mac(seq, rec, body_len, tag);
    return kHeaderLen + body_len + tag_len_;
  }

  // n consecutive records from seq: pads and writes headers, then encrypts all CBC chains together
  // (independent chains hide the serial latency of CBC), then MACs.
  void seal_batch(uint64_t seq, RecordSealer::Job* jobs, size_t n) noexcept {
    constexpr size_t kLanes = 16;
    const bool batch_mac = hmac_ && n >= 2;
    if (c_.mode != CipherMode::cbc || n < 2 ||
        (records_per_epoch_ && seq / records_per_epoch_ != (seq + n - 1) / records_per_epoch_)) {
      for (size_t i = 0; i < n; ++i)
        jobs[i].wire_len = seal(seq + i, jobs[i].type, jobs[i].flags, jobs[i].rec, jobs[i].payload_len, batch_mac);
    } else {
      cbc_lanes(seq, jobs, n);
    }
    if (batch_mac) {
      for (size_t base = 0; base < n; base += kLanes) {
        size_t m = std::min(kLanes, n - base);
        uint8_t tags[kLanes][32];
        mac_many(seq + base, jobs + base, m, tags);
        for (size_t i = 0; i < m; ++i)
          std::memcpy(jobs[base + i].rec + jobs[base + i].wire_len - tag_len_, tags[i], tag_len_);
      }
    }
  }

  // Pads, writes the headers and encrypts n CBC records of one epoch, 16 chains at a time.
  void cbc_lanes(uint64_t seq, RecordSealer::Job* jobs, size_t n) noexcept {
    constexpr size_t kLanes = 16;
    const crypto::BlockCipher& bc = block_for(seq);
    const size_t b = c_.block_len;
    for (size_t base = 0; base < n; base += kLanes) {
      size_t m = std::min(kLanes, n - base);
      crypto::CbcLane lanes[kLanes];
      uint8_t ivs[kLanes][16];
      size_t body_lens[kLanes];
      for (size_t i = 0; i < m; ++i) {
        RecordSealer::Job& j = jobs[base + i];
        uint8_t* body = j.rec + kHeaderLen;
        size_t pad = b - j.payload_len % b;
        std::memset(body + j.payload_len, int(pad), pad);
        body_lens[i] = j.payload_len + pad;
        write_header(j.rec, uint32_t(body_lens[i]), j.type, j.flags);
        cbc_iv(bc, seq + base + i, ivs[i]);
        lanes[i] = crypto::CbcLane{ivs[i], body, body, body_lens[i] / b};
      }
      bc.cbc_encrypt_lanes(lanes, m);
      crypto::secure_zero(ivs, sizeof ivs);
      for (size_t i = 0; i < m; ++i) jobs[base + i].wire_len = kHeaderLen + body_lens[i] + tag_len_;
    }
  }

  // The MACs of m <= 16 consecutive records, computed together: tags[i] for jobs[i] at seq + i.
  // Each record's bytes on the wire are header || body || tag; the body length is in the header.
  template <class J>
  void mac_many(uint64_t seq, J* jobs, size_t m, uint8_t (*tags)[32]) noexcept {
    uint8_t prefix[16][16];
    crypto::HmacJob hj[16];
    for (size_t i = 0; i < m; ++i) {
      crypto::store_be64(prefix[i], seq + i);
      std::memcpy(prefix[i] + 8, jobs[i].rec, kHeaderLen);
      size_t body_len = crypto::load_be32(jobs[i].rec);
      hj[i] = crypto::HmacJob{prefix[i], 16, jobs[i].rec + kHeaderLen, body_len, tags[i]};
    }
    crypto::hmac_sha256_many(*hmac_, hj, m);
  }

  // n consecutive records from seq: all tags first (multi-buffer HMAC), then decryption.
  std::error_code open_batch(uint64_t seq, RecordOpener::Job* jobs, size_t n) noexcept {
    for (size_t i = 0; i < n; ++i) {
      std::error_code ec;
      size_t rest = parse_header(jobs[i].rec, jobs[i].hdr, ec);
      if (ec) return ec;
      if (jobs[i].rec_len != kHeaderLen + rest) return errc::bad_record_length;
    }
    if (hmac_ && n >= 2) {
      constexpr size_t kLanes = 16;
      for (size_t base = 0; base < n; base += kLanes) {
        size_t m = std::min(kLanes, n - base);
        uint8_t tags[kLanes][32];
        mac_many(seq + base, jobs + base, m, tags);
        bool ok = true;
        for (size_t i = 0; i < m; ++i)
          ok &= crypto::ct_equal(tags[i], jobs[base + i].rec + kHeaderLen + jobs[base + i].hdr.body_len, tag_len_);
        crypto::secure_zero(tags, sizeof tags);
        if (!ok) return errc::bad_mac;
      }
      for (size_t i = 0; i < n; ++i) {
        std::error_code ec = open(seq + i, jobs[i].rec, jobs[i].rec_len, jobs[i].hdr, jobs[i].payload, true);
        if (ec) return ec;
      }
      return {};
    }
    for (size_t i = 0; i < n; ++i) {
      std::error_code ec = open(seq + i, jobs[i].rec, jobs[i].rec_len, jobs[i].hdr, jobs[i].payload);
      if (ec) return ec;
    }
    return {};
  }

  // mac_verified: the caller already checked the tag (open_batch).
  std::error_code open(uint64_t seq, uint8_t* rec, size_t rec_len, RecordHeader& hdr,
                       std::span<uint8_t>& payload, bool mac_verified = false) noexcept {
    if (rec_len < kHeaderLen) return errc::bad_record_length;
    std::error_code ec;
    RecordHeader h{};
    size_t rest = parse_header(rec, h, ec);
    if (ec) return ec;
    if (rec_len != kHeaderLen + rest) return errc::bad_record_length;
    uint8_t* body = rec + kHeaderLen;
    size_t body_len = h.body_len;
    uint8_t* tag = body + body_len;
    if (hmac_ && !mac_verified) {
      uint8_t expect[crypto::HmacSha256::kTagLen];
      compute_mac(seq, rec, body_len, expect);
      bool ok = crypto::ct_equal(expect, tag, tag_len_);
      crypto::secure_zero(expect, sizeof expect);
      if (!ok) return errc::bad_mac;
    }
    size_t len = body_len;
    switch (c_.mode) {
      case CipherMode::gcm: {
        uint8_t nonce[12];
        gcm_nonce(seq, nonce);
        if (!gcm_->open(nonce, rec, kHeaderLen, body, body, body_len, tag)) return errc::bad_mac;
        break;
      }
      case CipherMode::cbc: {
        const crypto::BlockCipher& bc = block_for(seq);
        uint8_t iv[16];
        cbc_iv(bc, seq, iv);
        bc.cbc_decrypt(iv, body, body, body_len / c_.block_len);
        crypto::secure_zero(iv, sizeof iv);
        size_t n = 0;
        if (!check_cbc_padding(body, body_len, c_.block_len, n)) return errc::bad_padding;
        len = body_len - n;
        break;
      }
      case CipherMode::ctr: {
        uint8_t ctr[16];
        ctr_block(seq, ctr);
        block_for(seq).ctr_xor(ctr, body, body, body_len);
        break;
      }
      case CipherMode::stream: rc4_xor(seq, body, body_len); break;
      case CipherMode::none: break;
    }
    hdr = h;
    payload = std::span<uint8_t>(body, len);
    return {};
  }

 private:
  const crypto::CipherDesc& c_;
  DirectionKeys k_;
  size_t tag_len_ = 0;
  std::unique_ptr<crypto::HmacSha256> hmac_;
  std::unique_ptr<crypto::Aes128Gcm> gcm_;
  std::unique_ptr<crypto::BlockCipher> bc_;  // the schedule of epoch bc_epoch_
  uint64_t bc_epoch_ = 0;
  uint64_t records_per_epoch_ = 0;  // 0: never rekey

  std::unique_ptr<crypto::BlockCipher> make_block(uint64_t epoch) const {
    uint8_t key[32];
    const uint8_t* kp = k_.enc;
    if (epoch != 0) {
      kdf(key, c_.key_len, k_.enc, "aesxfer-v1 rekey", epoch);
      kp = key;
    }
    std::unique_ptr<crypto::BlockCipher> bc;
    if (c_.alg == crypto::CipherAlg::aes128) bc = crypto::make_aes128(kp);
    else if (c_.alg == crypto::CipherAlg::blowfish) bc = crypto::make_blowfish(kp, c_.key_len);
    crypto::secure_zero(key, sizeof key);
    return bc;
  }

  const crypto::BlockCipher& block_for(uint64_t seq) noexcept {
    if (records_per_epoch_) {
      uint64_t e = seq / records_per_epoch_;
      if (e != bc_epoch_) {
        auto bc = make_block(e);
        if (!bc) std::abort();  // cannot happen: the epoch-0 key of the same length worked
        bc_ = std::move(bc);
        bc_epoch_ = e;
      }
    }
    return *bc_;
  }

  // IV = E_K(iv_salt[0..b) XOR (0^(b-8) || u64 BE seq)), SP 800-38A Appendix C.
  void cbc_iv(const crypto::BlockCipher& bc, uint64_t seq, uint8_t* iv) const noexcept {
    size_t b = c_.block_len;
    std::memcpy(iv, k_.iv, b);
    uint8_t s[8];
    crypto::store_be64(s, seq);
    crypto::xor_bytes(iv + b - 8, iv + b - 8, s, 8);
    bc.encrypt_blocks(iv, iv, 1);
  }

  // iv_salt with bytes 4..11 XOR u64 BE seq and bytes 12..15 = 0.
  void ctr_block(uint64_t seq, uint8_t ctr[16]) const noexcept {
    std::memcpy(ctr, k_.iv, 16);
    uint8_t s[8];
    crypto::store_be64(s, seq);
    crypto::xor_bytes(ctr + 4, ctr + 4, s, 8);
    std::memset(ctr + 12, 0, 4);
  }

  // iv_salt[0..12) XOR (0^4 || u64 BE seq).
  void gcm_nonce(uint64_t seq, uint8_t nonce[12]) const noexcept {
    std::memcpy(nonce, k_.iv, 12);
    uint8_t s[8];
    crypto::store_be64(s, seq);
    crypto::xor_bytes(nonce + 4, nonce + 4, s, 8);
  }

  void rc4_xor(uint64_t seq, uint8_t* data, size_t len) const noexcept {
    uint8_t key[16];
    kdf(key, sizeof key, k_.enc, "aesxfer-v1 rc4", seq);
    crypto::Rc4 rc4(key, sizeof key, crypto::Rc4::kRfc4345Discard);
    crypto::secure_zero(key, sizeof key);
    rc4.xor_stream(data, data, len);
  }

  // HMAC-SHA256(mac key, u64 BE seq || header || body).
  void compute_mac(uint64_t seq, const uint8_t* rec, size_t body_len, uint8_t* tag) noexcept {
    uint8_t s[8];
    crypto::store_be64(s, seq);
    hmac_->begin();
    hmac_->update(s, 8);
    hmac_->update(rec, kHeaderLen + body_len);
    hmac_->finish(tag);
  }

};

// ---------------------------------------------------------------------------------------------

struct RecordSealer::Impl {
  RecordCrypto rc;
  Impl(const crypto::CipherDesc& c, const crypto::MacDesc& m, const DirectionKeys& k) : rc(c, m, k) {}
};

RecordSealer::RecordSealer(const crypto::CipherDesc& cipher, const crypto::MacDesc& mac, const DirectionKeys& keys)
    : impl_(std::make_unique<Impl>(cipher, mac, keys)) {}
RecordSealer::~RecordSealer() = default;
size_t RecordSealer::max_overhead() const noexcept { return impl_->rc.max_overhead(); }
size_t RecordSealer::tag_len() const noexcept { return impl_->rc.tag_len(); }
size_t RecordSealer::batch_records() const noexcept { return impl_->rc.batch_records(); }

size_t RecordSealer::seal(RecordType type, uint8_t flags, uint8_t* rec, size_t payload_len) noexcept {
  if (seq_ == UINT64_MAX) std::abort();  // would wrap: never reached (2^64 records)
  size_t n = seal_at(seq_, type, flags, rec, payload_len);
  ++seq_;
  return n;
}

size_t RecordSealer::seal_at(uint64_t seq, RecordType type, uint8_t flags, uint8_t* rec,
                             size_t payload_len) noexcept {
  if (payload_len > kMaxPayload) std::abort();  // caller bug: would produce an unopenable record
  return impl_->rc.seal(seq, type, flags, rec, payload_len);
}

void RecordSealer::seal_batch(Job* jobs, size_t n) noexcept {
  if (n == 0) return;
  if (seq_ > UINT64_MAX - n) std::abort();  // would wrap: never reached (2^64 records)
  for (size_t i = 0; i < n; ++i)
    if (jobs[i].payload_len > kMaxPayload) std::abort();  // caller bug, as in seal_at
  impl_->rc.seal_batch(seq_, jobs, n);
  seq_ += n;
}

struct RecordOpener::Impl {
  RecordCrypto rc;
  Impl(const crypto::CipherDesc& c, const crypto::MacDesc& m, const DirectionKeys& k) : rc(c, m, k) {}
};

RecordOpener::RecordOpener(const crypto::CipherDesc& cipher, const crypto::MacDesc& mac, const DirectionKeys& keys)
    : impl_(std::make_unique<Impl>(cipher, mac, keys)) {}
RecordOpener::~RecordOpener() = default;
size_t RecordOpener::tag_len() const noexcept { return impl_->rc.tag_len(); }
size_t RecordOpener::batch_records() const noexcept { return impl_->rc.batch_records(); }

size_t RecordOpener::parse_header(const uint8_t hdr[kHeaderLen], RecordHeader& out,
                                  std::error_code& ec) const noexcept {
  return impl_->rc.parse_header(hdr, out, ec);
}

std::error_code RecordOpener::open(uint8_t* rec, size_t rec_len, RecordHeader& hdr,
                                   std::span<uint8_t>& payload) noexcept {
  if (seq_ == UINT64_MAX) return errc::sequence_exhausted;
  std::error_code ec = open_at(seq_, rec, rec_len, hdr, payload);
  if (!ec) ++seq_;
  return ec;
}

std::error_code RecordOpener::open_at(uint64_t seq, uint8_t* rec, size_t rec_len, RecordHeader& hdr,
                                      std::span<uint8_t>& payload) noexcept {
  return impl_->rc.open(seq, rec, rec_len, hdr, payload);
}

std::error_code RecordOpener::open_batch(Job* jobs, size_t n) noexcept {
  if (n == 0) return {};
  if (seq_ > UINT64_MAX - n) return errc::sequence_exhausted;
  std::error_code ec = impl_->rc.open_batch(seq_, jobs, n);
  if (!ec) seq_ += n;
  return ec;
}

}  // namespace aesxfer::proto
