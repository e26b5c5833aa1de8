// The factory of record protections (the one switch on the mode) and the AEAD mode.
#include "proto/record_protection.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "crypto/util.h"
#include "proto/error.h"
#include "proto/init.h"
#include "proto/record_modes.h"

namespace aesxfer::proto {

void RecordProtection::seal_batch(uint64_t seq, SealJob* jobs, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i) seal(seq + i, jobs[i].rec, jobs[i].payload_len);
}

std::error_code RecordProtection::open_batch(uint64_t seq, OpenJob* jobs, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i) {
    size_t len = 0;
    if (std::error_code ec = open(seq + i, jobs[i].rec, len)) return ec;
    jobs[i].payload = std::span<uint8_t>(jobs[i].rec + kHeaderLen, len);
  }
  return {};
}

namespace detail {
namespace {

// AEAD: nonce = iv_salt[0..12) XOR (0^4 || u64 BE seq); the header is the associated data.
class AeadRecords final : public RecordProtection {
 public:
  AeadRecords(const crypto::CipherDesc& c, const DirectionKeys& k, const crypto::Dispatch& d)
      : aead_(c.make_aead ? c.make_aead(k.enc, d) : nullptr) {
    if (!aead_ || aead_->tag_len() != c.tag_len || c.tag_len > kMaxTag)
      throw std::invalid_argument(std::string("record layer: cannot construct cipher ") + c.name);
    std::memcpy(salt_, k.iv, sizeof salt_);
  }
  ~AeadRecords() override { crypto::secure_zero(salt_, sizeof salt_); }

  size_t tag_len() const noexcept override { return aead_->tag_len(); }
  size_t max_pad() const noexcept override { return 0; }
  size_t body_len(size_t payload_len) const noexcept override { return payload_len; }
  bool body_len_ok(size_t) const noexcept override { return true; }
  // Small batches keep the pipeline stages closer together and a batch's buffers in the core's
  // L2, likely (see RecordSealer::batch_records): 3, not 4.
  size_t batch_records() const noexcept override { return 3; }
  size_t open_batch_records() const noexcept override { return 2; }

  void seal(uint64_t seq, uint8_t* rec, size_t payload_len) noexcept override {
    uint8_t nonce[crypto::Aead::kNonceLen];
    make_nonce(seq, nonce);
    uint8_t* body = rec + kHeaderLen;
    aead_->seal(nonce, rec, kHeaderLen, body, body, payload_len, body + payload_len);
  }

  std::error_code open(uint64_t seq, uint8_t* rec, size_t& payload_len) noexcept override {
    uint8_t nonce[crypto::Aead::kNonceLen];
    make_nonce(seq, nonce);
    uint8_t* body = rec + kHeaderLen;
    const size_t len = crypto::load_be32(rec);
    if (!aead_->open(nonce, rec, kHeaderLen, body, body, len, body + len)) return errc::bad_mac;
    payload_len = len;
    return {};
  }

 private:
  std::unique_ptr<crypto::Aead> aead_;
  uint8_t salt_[crypto::Aead::kNonceLen];

  void make_nonce(uint64_t seq, uint8_t* nonce) const noexcept {
    std::memcpy(nonce, salt_, sizeof salt_);
    uint8_t s[8];
    crypto::store_be64(s, seq);
    crypto::xor_bytes(nonce + 4, nonce + 4, s, 8);
  }
};

}  // namespace

std::unique_ptr<RecordProtection> make_aead_records(const crypto::CipherDesc& c, const DirectionKeys& k,
                                                    const crypto::Dispatch& d) {
  return std::make_unique<AeadRecords>(c, k, d);
}

}  // namespace detail

std::unique_ptr<RecordProtection> make_record_protection(const crypto::CipherDesc& c,
                                                         const crypto::MacDesc& m, const DirectionKeys& k,
                                                         const crypto::Dispatch& d) {
  init();  // libsodium: BLAKE2b derives per-record and per-epoch keys
  switch (c.mode) {
    case crypto::CipherMode::gcm:
      return detail::make_aead_records(c, k, d);  // the MAC is ignored
    case crypto::CipherMode::cbc:
      return detail::make_cbc_records(c, m, k, d);
    case crypto::CipherMode::ctr:
      return detail::make_ctr_records(c, m, k, d);
    case crypto::CipherMode::stream:
      return detail::make_stream_records(c, m, k, d);
    case crypto::CipherMode::none:
      return detail::make_null_records(m, k, d);
  }
  throw std::invalid_argument(std::string("record layer: unknown mode of cipher ") + c.name);
}

}  // namespace aesxfer::proto
