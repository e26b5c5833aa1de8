// Encrypt-then-MAC over any block cipher of the table, in CBC or CTR (docs/PROTOCOL.md, "Records").
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "crypto/util.h"
#include "proto/error.h"
#include "proto/kdf.h"
#include "proto/record_modes.h"

namespace aesxfer::proto::detail {

EpochCipher::EpochCipher(const crypto::CipherDesc& c, const uint8_t enc[32], const crypto::Dispatch& d)
    : c_(c), d_(d) {
  std::memcpy(enc_, enc, sizeof enc_);
  if (c.rekey_bytes) records_per_epoch_ = std::max<uint64_t>(1, c.rekey_bytes / kMaxPayload);
  if (c.make_block && c.key_len <= sizeof enc_) bc_ = make(0);
  if (!bc_ || bc_->block_size() != c.block_len || c.block_len < 8 || c.block_len > 16)
    throw std::invalid_argument(std::string("record layer: cannot construct cipher ") + c.name);
}

EpochCipher::~EpochCipher() { crypto::secure_zero(enc_, sizeof enc_); }

std::unique_ptr<crypto::BlockCipher> EpochCipher::make(uint64_t epoch) const {
  uint8_t key[32];
  const uint8_t* kp = enc_;
  if (epoch != 0) {
    kdf(key, c_.key_len, enc_, "aesxfer-v1 rekey", epoch);
    kp = key;
  }
  auto bc = c_.make_block(kp, c_.key_len, d_);
  crypto::secure_zero(key, sizeof key);
  return bc;
}

const crypto::BlockCipher& EpochCipher::at(uint64_t seq) noexcept {
  if (records_per_epoch_) {
    const uint64_t e = seq / records_per_epoch_;
    if (e != epoch_) {
      auto bc = make(e);
      if (!bc) std::abort();  // cannot happen: the epoch-0 key of the same length worked
      bc_ = std::move(bc);
      epoch_ = e;
    }
  }
  return *bc_;
}

namespace {

// CBC: body = payload || n bytes of value n (1..block); IV = E_K(iv_salt[0..b) XOR
// (0^(b-8) || u64 BE seq)), SP 800-38A Appendix C. Batches run the CBC chains as lanes.
class CbcRecords final : public EtmRecords {
 public:
  CbcRecords(const crypto::CipherDesc& c, const crypto::MacDesc& m, const DirectionKeys& k,
             const crypto::Dispatch& d)
      : EtmRecords(m, k, d), bc_(c, k.enc, d), b_(c.block_len) {}

  size_t max_pad() const noexcept override { return b_; }
  size_t body_len(size_t n) const noexcept override { return n + (b_ - n % b_); }
  bool body_len_ok(size_t n) const noexcept override { return n != 0 && n % b_ == 0; }

 protected:
  size_t cipher_batch() const noexcept override { return 16; }

  void encrypt(uint64_t seq, uint8_t* body, size_t len) noexcept override {
    const size_t body_len = pad(body, len);
    const crypto::BlockCipher& bc = bc_.at(seq);
    uint8_t iv[16];
    make_iv(bc, seq, iv);
    bc.cbc_encrypt(iv, body, body, body_len / b_);
    crypto::secure_zero(iv, sizeof iv);
  }

  void encrypt_batch(uint64_t seq, SealJob* jobs, size_t n) noexcept override {
    if (n < 2 || !bc_.same_epoch(seq, seq + n - 1)) return EtmRecords::encrypt_batch(seq, jobs, n);
    for (size_t base = 0; base < n; base += kLanes)
      lanes(seq + base, jobs + base, std::min(kLanes, n - base));
  }

  std::error_code decrypt(uint64_t seq, uint8_t* body, size_t body_len,
                          size_t& payload_len) noexcept override {
    const crypto::BlockCipher& bc = bc_.at(seq);
    uint8_t iv[16];
    make_iv(bc, seq, iv);
    bc.cbc_decrypt(iv, body, body, body_len / b_);
    crypto::secure_zero(iv, sizeof iv);
    size_t n = 0;
    if (!check_cbc_padding(body, body_len, b_, n)) return errc::bad_padding;
    payload_len = body_len - n;
    return {};
  }

 private:
  static constexpr size_t kLanes = 16;
  EpochCipher bc_;
  size_t b_;

  size_t pad(uint8_t* body, size_t len) const noexcept {
    const size_t n = b_ - len % b_;
    std::memset(body + len, int(n), n);
    return len + n;
  }

  void make_iv(const crypto::BlockCipher& bc, uint64_t seq, uint8_t* iv) const noexcept {
    std::memcpy(iv, k_.iv, b_);
    uint8_t s[8];
    crypto::store_be64(s, seq);
    crypto::xor_bytes(iv + b_ - 8, iv + b_ - 8, s, 8);
    bc.encrypt_blocks(iv, iv, 1);
  }

  // Pads and encrypts m <= kLanes records of one epoch as independent chains run together.
  void lanes(uint64_t seq, SealJob* jobs, size_t m) noexcept {
    const crypto::BlockCipher& bc = bc_.at(seq);
    crypto::CbcLane lane[kLanes];
    uint8_t ivs[kLanes][16];
    for (size_t i = 0; i < m; ++i) {
      uint8_t* body = jobs[i].rec + kHeaderLen;
      const size_t body_len = pad(body, jobs[i].payload_len);
      make_iv(bc, seq + i, ivs[i]);
      lane[i] = crypto::CbcLane{ivs[i], body, body, body_len / b_};
    }
    bc.cbc_encrypt_lanes(lane, m);
    crypto::secure_zero(ivs, sizeof ivs);
  }
};

// CTR: counter block = iv_salt with bytes 4..11 XOR u64 BE seq and bytes 12..15 = 0.
class CtrRecords final : public XorRecords {
 public:
  CtrRecords(const crypto::CipherDesc& c, const crypto::MacDesc& m, const DirectionKeys& k,
             const crypto::Dispatch& d)
      : XorRecords(m, k, d), bc_(c, k.enc, d) {
    if (c.block_len != 16)
      throw std::invalid_argument(std::string("record layer: CTR needs 16-byte blocks: ") + c.name);
  }

 private:
  EpochCipher bc_;

  void xor_record(uint64_t seq, uint8_t* data, size_t len) noexcept override {
    uint8_t ctr[16];
    std::memcpy(ctr, k_.iv, 16);
    uint8_t s[8];
    crypto::store_be64(s, seq);
    crypto::xor_bytes(ctr + 4, ctr + 4, s, 8);
    std::memset(ctr + 12, 0, 4);
    bc_.at(seq).ctr_xor(ctr, data, data, len);
  }
};

}  // namespace

std::unique_ptr<RecordProtection> make_cbc_records(const crypto::CipherDesc& c, const crypto::MacDesc& m,
                                                   const DirectionKeys& k, const crypto::Dispatch& d) {
  return std::make_unique<CbcRecords>(c, m, k, d);
}

std::unique_ptr<RecordProtection> make_ctr_records(const crypto::CipherDesc& c, const crypto::MacDesc& m,
                                                   const DirectionKeys& k, const crypto::Dispatch& d) {
  return std::make_unique<CtrRecords>(c, m, k, d);
}

}  // namespace aesxfer::proto::detail
