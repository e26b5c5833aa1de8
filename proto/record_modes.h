// Internal to the record layer: the encrypt-then-MAC base shared by the CBC, CTR, stream and null
// modes, the block-cipher key epochs, and each mode's constructor for make_record_protection.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "proto/record_protection.h"

namespace aesxfer::proto::detail {

// Encrypt-then-MAC: the tag is MAC(mac key, u64 BE seq || header || body) over the ciphertext,
// checked in constant time before anything is decrypted. A mode supplies the cipher part.
class EtmRecords : public RecordProtection {
 public:
  EtmRecords(const crypto::MacDesc& m, const DirectionKeys& k, const crypto::Dispatch& d);
  ~EtmRecords() override;

  size_t tag_len() const noexcept final { return tag_len_; }
  size_t max_pad() const noexcept override { return 0; }
  size_t body_len(size_t payload_len) const noexcept override { return payload_len; }
  bool body_len_ok(size_t) const noexcept override { return true; }
  size_t batch_records() const noexcept final;

  void seal(uint64_t seq, uint8_t* rec, size_t payload_len) noexcept final;
  void seal_batch(uint64_t seq, SealJob* jobs, size_t n) noexcept final;
  std::error_code open(uint64_t seq, uint8_t* rec, size_t& payload_len) noexcept final;
  std::error_code open_batch(uint64_t seq, OpenJob* jobs, size_t n) noexcept final;

 protected:
  // Pads the payload at body to body_len(payload_len) and encrypts it in place.
  virtual void encrypt(uint64_t seq, uint8_t* body, size_t payload_len) noexcept = 0;
  // The bodies of records seq.. (headers written); the default encrypts them one by one.
  virtual void encrypt_batch(uint64_t seq, SealJob* jobs, size_t n) noexcept;
  // Decrypts body_len bytes in place and removes the padding.
  virtual std::error_code decrypt(uint64_t seq, uint8_t* body, size_t body_len,
                                  size_t& payload_len) noexcept = 0;
  // Records the cipher part gains from doing together (CBC lanes: 16).
  virtual size_t cipher_batch() const noexcept { return 4; }

  DirectionKeys k_;

 private:
  static constexpr size_t kLanes = 16;
  std::unique_ptr<crypto::Mac> mac_;
  size_t tag_len_ = 0;

  bool verify_one(uint64_t seq, const uint8_t* rec) noexcept;
  bool verify_many(uint64_t seq, OpenJob* jobs, size_t n) noexcept;
  template <class J>
  void mac_many(uint64_t seq, J* jobs, size_t m, uint8_t (*tags)[kMaxTag]) noexcept;
};

// The modes whose decryption is their encryption, a keystream XORed in (CTR, stream, null).
class XorRecords : public EtmRecords {
 public:
  using EtmRecords::EtmRecords;

 protected:
  virtual void xor_record(uint64_t seq, uint8_t* data, size_t len) noexcept = 0;
  void encrypt(uint64_t seq, uint8_t* body, size_t len) noexcept final { xor_record(seq, body, len); }
  std::error_code decrypt(uint64_t seq, uint8_t* body, size_t len, size_t& payload_len) noexcept final {
    xor_record(seq, body, len);
    payload_len = len;
    return {};
  }
};

// The block cipher of a CBC or CTR direction: the row's factory on the direction key, rebuilt
// on a derived key every rekey_bytes / kMaxPayload records when the row asks for it (Blowfish).
class EpochCipher {
 public:
  EpochCipher(const crypto::CipherDesc& c, const uint8_t enc[32], const crypto::Dispatch& d);
  ~EpochCipher();
  const crypto::BlockCipher& at(uint64_t seq) noexcept;
  bool same_epoch(uint64_t a, uint64_t b) const noexcept {
    return records_per_epoch_ == 0 || a / records_per_epoch_ == b / records_per_epoch_;
  }

 private:
  const crypto::CipherDesc& c_;
  const crypto::Dispatch& d_;
  uint8_t enc_[32];
  std::unique_ptr<crypto::BlockCipher> bc_;  // the schedule of epoch epoch_
  uint64_t epoch_ = 0;
  uint64_t records_per_epoch_ = 0;  // 0: never rekey
  std::unique_ptr<crypto::BlockCipher> make(uint64_t epoch) const;
};

std::unique_ptr<RecordProtection> make_aead_records(const crypto::CipherDesc& c, const DirectionKeys& k,
                                                    const crypto::Dispatch& d);
std::unique_ptr<RecordProtection> make_cbc_records(const crypto::CipherDesc& c, const crypto::MacDesc& m,
                                                   const DirectionKeys& k, const crypto::Dispatch& d);
std::unique_ptr<RecordProtection> make_ctr_records(const crypto::CipherDesc& c, const crypto::MacDesc& m,
                                                   const DirectionKeys& k, const crypto::Dispatch& d);
std::unique_ptr<RecordProtection> make_stream_records(const crypto::CipherDesc& c, const crypto::MacDesc& m,
                                                      const DirectionKeys& k, const crypto::Dispatch& d);
std::unique_ptr<RecordProtection> make_null_records(const crypto::MacDesc& m, const DirectionKeys& k,
                                                    const crypto::Dispatch& d);

}  // namespace aesxfer::proto::detail
