// The record layer: a pure state machine, no sockets. See docs/PROTOCOL.md, "Records".
//
// Wire format of one record:
//   header  8 bytes, in clear but authenticated:
//           u32 BE body_len | u8 type | u8 flags (bit 0 = final) | u16 BE 0
//   body    body_len bytes of ciphertext (CBC: payload plus padding)
//   tag     tag_len bytes (GCM: 16; HMAC-SHA256: 32; MAC none: 0)
// The sequence number is implicit: 0 for the first record in each direction, +1 per record.
// Every record is encrypted independently of the others (its IV, counter or key derives from the
// sequence number), so records can be sealed and opened in parallel by seal_at()/open_at().
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include "crypto/suite.h"

namespace aesxfer::proto {

constexpr size_t kHeaderLen = 8;
// Largest payload a sender may put in one record, and the bound a receiver checks body_len
// against before it allocates or reads anything.
constexpr size_t kMaxPayload = size_t(1) << 20;
constexpr size_t kMaxBody = kMaxPayload + 16;   // room for CBC padding
constexpr size_t kMaxTag = 32;
constexpr size_t kMaxRecord = kHeaderLen + kMaxBody + kMaxTag;
// Default payload size of data records.
constexpr size_t kDefaultPayload = size_t(256) << 10;

enum class RecordType : uint8_t { data = 1, control = 2, end = 3 };
constexpr uint8_t kFlagFinal = 1;

// Keys for one direction, as derived in the handshake.
struct DirectionKeys {
  uint8_t enc[32];
  uint8_t mac[32];
  uint8_t iv[16];
  void wipe() noexcept;
};

struct RecordHeader {
  uint32_t body_len;
  RecordType type;
  uint8_t flags;
};

class RecordSealer {
 public:
  RecordSealer(const crypto::CipherDesc& cipher, const crypto::MacDesc& mac, const DirectionKeys& keys);
  ~RecordSealer();
  RecordSealer(const RecordSealer&) = delete;
  RecordSealer& operator=(const RecordSealer&) = delete;

  // Bytes a record adds on the wire beyond its payload, at most (header, padding, tag).
  size_t max_overhead() const noexcept;
  size_t tag_len() const noexcept;

  // Seals the next record in place. rec points to a buffer whose payload starts at rec + kHeaderLen
  // and which has room for payload_len + max_overhead() bytes in all. Writes the header, pads,
  // encrypts and appends the tag. Returns the record's length on the wire.
  // payload_len must be <= kMaxPayload.
  size_t seal(RecordType type, uint8_t flags, uint8_t* rec, size_t payload_len) noexcept;

  uint64_t next_seq() const noexcept { return seq_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t seq_ = 0;
};

class RecordOpener {
 public:
  RecordOpener(const crypto::CipherDesc& cipher, const crypto::MacDesc& mac, const DirectionKeys& keys);
  ~RecordOpener();
  RecordOpener(const RecordOpener&) = delete;
  RecordOpener& operator=(const RecordOpener&) = delete;

  size_t tag_len() const noexcept;

  // Parses and bounds-checks a header before anything is allocated or read. On success returns
  // the number of bytes that follow the header (body + tag).
  size_t parse_header(const uint8_t hdr[kHeaderLen], RecordHeader& out, std::error_code& ec) const noexcept;

  // Opens the next record in place: rec holds header, body and tag (as parse_header sized it).
  // Verifies the tag before decrypting anything; on success sets payload to the plaintext inside
  // rec and advances the sequence number. Any failure is final for the connection.
  std::error_code open(uint8_t* rec, size_t rec_len, RecordHeader& hdr, std::span<uint8_t>& payload) noexcept;

  uint64_t next_seq() const noexcept { return seq_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t seq_ = 0;
};

// Incremental framing over the opener for byte-stream input (tests and fuzzing drive it one byte
// at a time): feed bytes, then call next() until it answers need_more.
class RecordReader {
 public:
  enum class Status { need_more, record, error };
  explicit RecordReader(RecordOpener& opener) : opener_(opener) {}
  // Appends input; returns bytes consumed (all, unless a record is complete and waiting).
  size_t feed(const uint8_t* data, size_t len);
  Status next(RecordHeader& hdr, std::span<uint8_t>& payload, std::error_code& ec);

 private:
  RecordOpener& opener_;
  uint8_t hdr_buf_[kHeaderLen];
  size_t have_ = 0;
  size_t need_ = kHeaderLen;
  bool have_header_ = false;
  bool ready_ = false;
  RecordHeader hdr_{};
  std::unique_ptr<uint8_t[]> rec_;
  size_t rec_cap_ = 0;
};

}  // namespace aesxfer::proto
