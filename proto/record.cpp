// The record layer. Every byte of the format is specified in docs/PROTOCOL.md, "Records".
#include "proto/record.h"

#include <cstdlib>
#include <cstring>

#include "crypto/ct.h"
#include "crypto/util.h"
#include "proto/error.h"
#include "proto/record_protection.h"

namespace aesxfer::proto {

void DirectionKeys::wipe() noexcept {
  crypto::secure_zero(enc, sizeof enc);
  crypto::secure_zero(mac, sizeof mac);
  crypto::secure_zero(iv, sizeof iv);
}

namespace {

void write_header(uint8_t* h, uint32_t body_len, RecordType type, uint8_t flags) {
  crypto::store_be32(h, body_len);
  h[4] = uint8_t(type);
  h[5] = flags;
  h[6] = 0;
  h[7] = 0;
}

size_t check_header(const RecordProtection& prot, const uint8_t* h, RecordHeader& out,
                    std::error_code& ec) noexcept {
  ec.clear();
  const uint32_t body_len = crypto::load_be32(h);
  if (body_len > kMaxBody || body_len > kMaxPayload + prot.max_pad()) {
    ec = errc::record_too_large;
    return 0;
  }
  const uint8_t type = h[4], flags = h[5];
  if (type < uint8_t(RecordType::data) || type > uint8_t(RecordType::end) || (flags & ~kFlagFinal) != 0 ||
      h[6] != 0 || h[7] != 0 || ((type == uint8_t(RecordType::end)) != ((flags & kFlagFinal) != 0))) {
    ec = errc::bad_record_type;
    return 0;
  }
  if (!prot.body_len_ok(body_len)) {
    ec = errc::bad_record_length;
    return 0;
  }
  out.body_len = body_len;
  out.type = RecordType(type);
  out.flags = flags;
  return size_t(body_len) + prot.tag_len();
}

// Checks a whole record's header and length before the protection sees it.
std::error_code check_record(const RecordProtection& prot, const uint8_t* rec, size_t rec_len,
                             RecordHeader& h) noexcept {
  if (rec_len < kHeaderLen) return errc::bad_record_length;
  std::error_code ec;
  const size_t rest = check_header(prot, rec, h, ec);
  if (ec) return ec;
  if (rec_len != kHeaderLen + rest) return errc::bad_record_length;
  return {};
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

// ---------------------------------------------------------------------------------------------

RecordSealer::RecordSealer(const crypto::CipherDesc& cipher, const crypto::MacDesc& mac,
                           const DirectionKeys& keys, crypto::Impl impl)
    : prot_(make_record_protection(cipher, mac, keys, crypto::dispatch(impl))) {}
RecordSealer::~RecordSealer() = default;
size_t RecordSealer::max_overhead() const noexcept {
  return kHeaderLen + prot_->max_pad() + prot_->tag_len();
}
size_t RecordSealer::tag_len() const noexcept { return prot_->tag_len(); }
size_t RecordSealer::batch_records() const noexcept { return prot_->batch_records(); }

size_t RecordSealer::seal(RecordType type, uint8_t flags, uint8_t* rec, size_t payload_len) noexcept {
  if (seq_ == UINT64_MAX) std::abort();         // would wrap: never reached (2^64 records)
  if (payload_len > kMaxPayload) std::abort();  // caller bug: would produce an unopenable record
  const size_t body_len = prot_->body_len(payload_len);
  write_header(rec, uint32_t(body_len), type, flags);
  prot_->seal(seq_, rec, payload_len);
  ++seq_;
  return kHeaderLen + body_len + prot_->tag_len();
}

void RecordSealer::seal_batch(Job* jobs, size_t n) noexcept {
  if (n == 0) return;
  if (seq_ > UINT64_MAX - n) std::abort();  // would wrap: never reached (2^64 records)
  for (size_t i = 0; i < n; ++i) {
    if (jobs[i].payload_len > kMaxPayload) std::abort();  // caller bug, as in seal
    const size_t body_len = prot_->body_len(jobs[i].payload_len);
    write_header(jobs[i].rec, uint32_t(body_len), jobs[i].type, jobs[i].flags);
    jobs[i].wire_len = kHeaderLen + body_len + prot_->tag_len();
  }
  prot_->seal_batch(seq_, jobs, n);
  seq_ += n;
}

RecordOpener::RecordOpener(const crypto::CipherDesc& cipher, const crypto::MacDesc& mac,
                           const DirectionKeys& keys, crypto::Impl impl)
    : prot_(make_record_protection(cipher, mac, keys, crypto::dispatch(impl))) {}
RecordOpener::~RecordOpener() = default;
size_t RecordOpener::tag_len() const noexcept { return prot_->tag_len(); }
size_t RecordOpener::batch_records() const noexcept { return prot_->open_batch_records(); }

size_t RecordOpener::parse_header(const uint8_t hdr[kHeaderLen], RecordHeader& out,
                                  std::error_code& ec) const noexcept {
  return check_header(*prot_, hdr, out, ec);
}

std::error_code RecordOpener::open(uint8_t* rec, size_t rec_len, RecordHeader& hdr,
                                   std::span<uint8_t>& payload) noexcept {
  if (seq_ == UINT64_MAX) return errc::sequence_exhausted;
  RecordHeader h{};
  if (std::error_code ec = check_record(*prot_, rec, rec_len, h)) return ec;
  size_t len = 0;
  if (std::error_code ec = prot_->open(seq_, rec, len)) return ec;
  hdr = h;
  payload = std::span<uint8_t>(rec + kHeaderLen, len);
  ++seq_;
  return {};
}

std::error_code RecordOpener::open_batch(Job* jobs, size_t n) noexcept {
  if (n == 0) return {};
  if (seq_ > UINT64_MAX - n) return errc::sequence_exhausted;
  for (size_t i = 0; i < n; ++i)
    if (std::error_code ec = check_record(*prot_, jobs[i].rec, jobs[i].rec_len, jobs[i].hdr)) return ec;
  if (std::error_code ec = prot_->open_batch(seq_, jobs, n)) return ec;
  seq_ += n;
  return {};
}

}  // namespace aesxfer::proto
