// Record protection: how one record's body is padded, encrypted and authenticated, behind one
// interface (BoringSSL's EVP_AEAD in ssl/tls_record.cc, where CBC+HMAC is one more AEAD). There is
// one class per mode, never per cipher; each builds its primitive with the cipher table's factory:
//   AEAD                     (gcm)     the cipher's own tag over header and body
//   encrypt-then-MAC, CBC    (cbc)     any block cipher; padding; per-record IV; rekey epochs
//   encrypt-then-MAC, CTR    (ctr)     any block cipher; per-record counter block
//   encrypt-then-MAC, stream (stream)  any stream cipher keyed per record
//   encrypt-then-MAC, null   (none)    no encryption (the MAC may still be on)
// The MAC of the encrypt-then-MAC modes is the MAC table row's (none: no tag). The formats are
// in docs/PROTOCOL.md, "Records". make_record_protection is the only place that looks at the mode.
//
// The caller (RecordSealer, RecordOpener) writes and checks the 8-byte header and the sequence
// numbers; a protection object sees whole records: header || body || tag, in place.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>

#include "crypto/dispatch.h"
#include "crypto/suite.h"
#include "proto/record.h"

namespace aesxfer::proto {

class RecordProtection {
 public:
  virtual ~RecordProtection() = default;

  virtual size_t tag_len() const noexcept = 0;
  // The most padding a body adds to its payload (CBC: one block; otherwise 0).
  virtual size_t max_pad() const noexcept = 0;
  // The body length of a record of payload_len bytes (payload plus padding).
  virtual size_t body_len(size_t payload_len) const noexcept = 0;
  // Whether a received body length can be a record of this mode (CBC: a non-zero whole number of
  // blocks). Lengths above kMaxPayload + max_pad() are refused by the caller before this.
  virtual bool body_len_ok(size_t body_len) const noexcept = 0;
  // Records worth sealing or opening together (see RecordSealer::batch_records).
  virtual size_t batch_records() const noexcept = 0;
  // Records worth opening together (see RecordOpener::batch_records); by default the same.
  virtual size_t open_batch_records() const noexcept { return batch_records(); }

  // Record seq at rec: the header (with body_len(payload_len)) is written and the payload is at
  // rec + kHeaderLen with room for max_pad() + tag_len() more bytes. Pads, encrypts, appends the tag.
  virtual void seal(uint64_t seq, uint8_t* rec, size_t payload_len) noexcept = 0;
  // Records seq .. seq + n - 1, headers written and wire_len set; equals n calls of seal().
  virtual void seal_batch(uint64_t seq, SealJob* jobs, size_t n) noexcept;

  // Record seq at rec, its header checked (parse_header) and its length matching: verifies the
  // tag before it decrypts anything, then decrypts in place. On success payload_len is the
  // plaintext's length at rec + kHeaderLen.
  virtual std::error_code open(uint64_t seq, uint8_t* rec, size_t& payload_len) noexcept = 0;
  // Records seq .. seq + n - 1, headers checked (jobs[i].hdr set); sets each payload. The
  // encrypt-then-MAC modes verify every tag before they decrypt any record.
  virtual std::error_code open_batch(uint64_t seq, OpenJob* jobs, size_t n) noexcept;
};

// The protection of one direction, built from the table rows with the dispatch's code. Throws
// std::invalid_argument when the row's factory refuses the key (a table error).
std::unique_ptr<RecordProtection> make_record_protection(const crypto::CipherDesc& c,
                                                         const crypto::MacDesc& m, const DirectionKeys& k,
                                                         const crypto::Dispatch& d);

}  // namespace aesxfer::proto
