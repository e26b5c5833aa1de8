// Encrypt-then-MAC records (docs/PROTOCOL.md, "Records"): the MAC side shared by every mode that
// is not an AEAD, and the two modes with no block cipher: stream (a key per record) and null.
#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "crypto/ct.h"
#include "crypto/util.h"
#include "proto/error.h"
#include "proto/kdf.h"
#include "proto/record_modes.h"

namespace aesxfer::proto::detail {

EtmRecords::EtmRecords(const crypto::MacDesc& m, const DirectionKeys& k, const crypto::Dispatch& d) {
  std::memcpy(&k_, &k, sizeof k_);
  if (m.make) {
    mac_ = m.make(k_.mac, m.key_len, d);
    if (!mac_ || mac_->tag_len() > kMaxTag || mac_->tag_len() != m.tag_len)
      throw std::invalid_argument(std::string("record layer: cannot construct MAC ") + m.name);
    tag_len_ = m.tag_len;
  } else if (m.tag_len != 0) {
    throw std::invalid_argument(std::string("record layer: MAC ") + m.name + " has no factory");
  }
}

EtmRecords::~EtmRecords() { k_.wipe(); }

size_t EtmRecords::batch_records() const noexcept {
  return std::max(cipher_batch(), mac_ ? std::min(mac_->batch(), kLanes) : size_t(4));
}

void EtmRecords::encrypt_batch(uint64_t seq, SealJob* jobs, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i) encrypt(seq + i, jobs[i].rec + kHeaderLen, jobs[i].payload_len);
}

// The MACs of m <= kLanes consecutive records, computed together: tags[i] for jobs[i] at seq + i.
// Each record's bytes on the wire are header || body || tag; the body length is in the header.
template <class J>
void EtmRecords::mac_many(uint64_t seq, J* jobs, size_t m, uint8_t (*tags)[kMaxTag]) noexcept {
  uint8_t prefix[kLanes][16];
  crypto::MacJob mj[kLanes];
  for (size_t i = 0; i < m; ++i) {
    crypto::store_be64(prefix[i], seq + i);
    std::memcpy(prefix[i] + 8, jobs[i].rec, kHeaderLen);
    const size_t body_len = crypto::load_be32(jobs[i].rec);
    mj[i] = crypto::MacJob{prefix[i], 16, jobs[i].rec + kHeaderLen, body_len, tags[i]};
  }
  if (m == 1)
    mac_->mac(mj[0]);
  else
    mac_->mac_many(mj, m);
}

void EtmRecords::seal(uint64_t seq, uint8_t* rec, size_t payload_len) noexcept {
  encrypt(seq, rec + kHeaderLen, payload_len);
  if (!mac_) return;
  SealJob j{RecordType::data, 0, rec, payload_len, 0};
  uint8_t tag[1][kMaxTag];
  mac_many(seq, &j, 1, tag);
  std::memcpy(rec + kHeaderLen + crypto::load_be32(rec), tag[0], tag_len_);
}

void EtmRecords::seal_batch(uint64_t seq, SealJob* jobs, size_t n) noexcept {
  encrypt_batch(seq, jobs, n);
  if (!mac_) return;
  const size_t group = std::min(mac_->batch(), kLanes);
  for (size_t base = 0; base < n; base += group) {
    const size_t m = std::min(group, n - base);
    uint8_t tags[kLanes][kMaxTag];
    mac_many(seq + base, jobs + base, m, tags);
    for (size_t i = 0; i < m; ++i)
      std::memcpy(jobs[base + i].rec + jobs[base + i].wire_len - tag_len_, tags[i], tag_len_);
  }
}

bool EtmRecords::verify_one(uint64_t seq, const uint8_t* rec) noexcept {
  SealJob j{RecordType::data, 0, const_cast<uint8_t*>(rec), 0, 0};
  uint8_t expect[1][kMaxTag];
  mac_many(seq, &j, 1, expect);
  const bool ok = crypto::ct_equal(expect[0], rec + kHeaderLen + crypto::load_be32(rec), tag_len_);
  crypto::secure_zero(expect, sizeof expect);
  return ok;
}

bool EtmRecords::verify_many(uint64_t seq, OpenJob* jobs, size_t n) noexcept {
  const size_t group = std::min(mac_->batch(), kLanes);
  for (size_t base = 0; base < n; base += group) {
    const size_t m = std::min(group, n - base);
    uint8_t tags[kLanes][kMaxTag];
    mac_many(seq + base, jobs + base, m, tags);
    bool ok = true;
    for (size_t i = 0; i < m; ++i)
      ok &=
          crypto::ct_equal(tags[i], jobs[base + i].rec + kHeaderLen + jobs[base + i].hdr.body_len, tag_len_);
    crypto::secure_zero(tags, sizeof tags);
    if (!ok) return false;
  }
  return true;
}

std::error_code EtmRecords::open(uint64_t seq, uint8_t* rec, size_t& payload_len) noexcept {
  if (mac_ && !verify_one(seq, rec)) return errc::bad_mac;
  return decrypt(seq, rec + kHeaderLen, crypto::load_be32(rec), payload_len);
}

std::error_code EtmRecords::open_batch(uint64_t seq, OpenJob* jobs, size_t n) noexcept {
  const bool together = mac_ && n >= 2;
  if (together && !verify_many(seq, jobs, n)) return errc::bad_mac;
  for (size_t i = 0; i < n; ++i) {
    if (!together && mac_ && !verify_one(seq + i, jobs[i].rec)) return errc::bad_mac;
    uint8_t* body = jobs[i].rec + kHeaderLen;
    size_t len = 0;
    if (std::error_code ec = decrypt(seq + i, body, jobs[i].hdr.body_len, len)) return ec;
    jobs[i].payload = std::span<uint8_t>(body, len);
  }
  return {};
}

namespace {

// A stream cipher keyed afresh for every record: key = BLAKE2b(enc, row label || u64 BE seq).
class StreamRecords final : public XorRecords {
 public:
  StreamRecords(const crypto::CipherDesc& c, const crypto::MacDesc& m, const DirectionKeys& k,
                const crypto::Dispatch& d)
      : XorRecords(m, k, d), c_(c), stream_(c.make_stream()) {
    if (!stream_ || !c.record_key_label || c.key_len == 0 || c.key_len > 32)
      throw std::invalid_argument(std::string("record layer: cannot construct cipher ") + c.name);
  }

 private:
  const crypto::CipherDesc& c_;
  std::unique_ptr<crypto::StreamCipher> stream_;

  void xor_record(uint64_t seq, uint8_t* data, size_t len) noexcept override {
    uint8_t key[32];
    kdf(key, c_.key_len, k_.enc, c_.record_key_label, seq);
    stream_->set_key(key, c_.key_len);
    crypto::secure_zero(key, sizeof key);
    stream_->xor_stream(data, data, len);
  }
};

// No encryption; the MAC, if any, still authenticates every record.
class NullRecords final : public XorRecords {
 public:
  using XorRecords::XorRecords;

 private:
  void xor_record(uint64_t, uint8_t*, size_t) noexcept override {}
};

}  // namespace

std::unique_ptr<RecordProtection> make_stream_records(const crypto::CipherDesc& c, const crypto::MacDesc& m,
                                                      const DirectionKeys& k, const crypto::Dispatch& d) {
  return std::make_unique<StreamRecords>(c, m, k, d);
}

std::unique_ptr<RecordProtection> make_null_records(const crypto::MacDesc& m, const DirectionKeys& k,
                                                    const crypto::Dispatch& d) {
  return std::make_unique<NullRecords>(m, k, d);
}

}  // namespace aesxfer::proto::detail
