// The record layer: a pure state machine, no sockets. See docs/PROTOCOL.md, "Records".
//
// Wire format of one record:
//   header  8 bytes, in clear but authenticated:
//           u32 BE body_len | u8 type | u8 flags (bit 0 = final) | u16 BE 0
//   body    body_len bytes of ciphertext (CBC: payload plus padding)
//   tag     tag_len bytes (GCM: 16; HMAC-SHA256: 32; MAC none: 0)
// The sequence number is implicit: 0 for the first record in each direction, +1 per record.
// Every record is encrypted independently of the others (its IV, counter or key derives from the
// sequence number), so a batch of records is sealed or opened together (seal_batch/open_batch).
// The sealer and opener never know the cipher: they frame records around a RecordProtection
// (proto/record_protection.h) built from the cipher table's row.
// The `end` record type always carries kFlagFinal and no other type does (parse_header checks);
// which record types may follow which is proto::RecordOrder's business (proto/end_record.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include "crypto/dispatch.h"
#include "crypto/suite.h"

namespace aesxfer::proto {

constexpr size_t kHeaderLen = 8;
// Largest payload a sender may put in one record, and the bound a receiver checks body_len
// against before it allocates or reads anything.
constexpr size_t kMaxPayload = size_t(1) << 20;
constexpr size_t kMaxBody = kMaxPayload + 16;  // room for CBC padding
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

// One record of RecordSealer::seal_batch, laid out as for RecordSealer::seal.
struct SealJob {
  RecordType type;
  uint8_t flags;
  uint8_t* rec;
  size_t payload_len;
  size_t wire_len;  // out
};

// One record of RecordOpener::open_batch.
struct OpenJob {
  uint8_t* rec;
  size_t rec_len;
  RecordHeader hdr;            // out
  std::span<uint8_t> payload;  // out
};

class RecordProtection;

class RecordSealer {
 public:
  // impl: the dispatch table whose code runs (Impl::portable for the portable code).
  RecordSealer(const crypto::CipherDesc& cipher, const crypto::MacDesc& mac, const DirectionKeys& keys,
               crypto::Impl impl = crypto::Impl::best);
  ~RecordSealer();
  RecordSealer(const RecordSealer&) = delete;
  RecordSealer& operator=(const RecordSealer&) = delete;

  // Bytes a record adds on the wire beyond its payload, at most (header, padding, tag).
  size_t max_overhead() const noexcept;
  size_t tag_len() const noexcept;
  // How many records a pipeline should hand to seal_batch at once: 16 when the work interleaves
  // across records (CBC chains as lanes, 16-lane HMAC-SHA256), 3 for GCM and 4 for the others
  // (no MAC), where smaller batches keep the pipeline stages closer together.
  // The record layer does not know which cipher it runs: the figure comes from the record
  // protection of the mode (RecordProtection::batch_records), and the measurements that chose
  // each figure are in docs/MEASUREMENTS.md, "Batch sizes", with their commands and the load
  // of the machine at the time.
  size_t batch_records() const noexcept;

  // Seals the next record in place. rec points to a buffer whose payload starts at rec + kHeaderLen
  // and which has room for payload_len + max_overhead() bytes in all. Writes the header, pads,
  // encrypts and appends the tag. Returns the record's length on the wire.
  // payload_len must be <= kMaxPayload.
  // The flags must be kFlagFinal for RecordType::end and 0 otherwise (the opener enforces it).
  // A sealer never wraps its sequence number: it aborts the process instead of sealing record
  // 2^64 - 1 (unreachable in practice; see docs/PROTOCOL.md).
  size_t seal(RecordType type, uint8_t flags, uint8_t* rec, size_t payload_len) noexcept;

  // Seals n consecutive records at once (sequence numbers next_seq() .. next_seq() + n - 1), each
  // laid out as for seal(); sets each job's wire_len. Interleaves the work across records where
  // a cipher or MAC is serial within one record: CBC encryption of all n chains runs together
  // (BlockCipher::cbc_encrypt_lanes), and so do the MACs. The result equals n calls of seal().
  using Job = SealJob;
  void seal_batch(Job* jobs, size_t n) noexcept;

  uint64_t next_seq() const noexcept { return seq_; }

 private:
  std::unique_ptr<RecordProtection> prot_;
  uint64_t seq_ = 0;
};

class RecordOpener {
 public:
  RecordOpener(const crypto::CipherDesc& cipher, const crypto::MacDesc& mac, const DirectionKeys& keys,
               crypto::Impl impl = crypto::Impl::best);
  ~RecordOpener();
  RecordOpener(const RecordOpener&) = delete;
  RecordOpener& operator=(const RecordOpener&) = delete;

  size_t tag_len() const noexcept;
  // Records a receiver should verify and decrypt together: the sealer's figure and rule, but 2 for
  // GCM, whose receiver keeps up better reading 2 records at a time against a sender's 3
  // (docs/MEASUREMENTS.md, "Batch sizes").
  size_t batch_records() const noexcept;

  // Parses and bounds-checks a header before anything is allocated or read. On success returns
  // the number of bytes that follow the header (body + tag).
  size_t parse_header(const uint8_t hdr[kHeaderLen], RecordHeader& out, std::error_code& ec) const noexcept;

  // Opens the next record in place: rec holds header, body and tag (as parse_header sized it).
  // Verifies the tag before decrypting anything; on success sets payload to the plaintext inside
  // rec and advances the sequence number. Any failure is final for the connection.
  std::error_code open(uint8_t* rec, size_t rec_len, RecordHeader& hdr, std::span<uint8_t>& payload) noexcept;

  // Opens n consecutive records (sequence numbers next_seq() ..). Every tag is verified before
  // anything is decrypted, the MACs of all n records together (multi-buffer HMAC). On success
  // sets each job's hdr and payload and advances next_seq() by n; on failure returns the first
  // record's error, opens none of them (the caller must drop the connection) and leaves next_seq().
  using Job = OpenJob;
  std::error_code open_batch(Job* jobs, size_t n) noexcept;

  uint64_t next_seq() const noexcept { return seq_; }

 private:
  std::unique_ptr<RecordProtection> prot_;
  uint64_t seq_ = 0;
};

// The CBC padding check of the record layer (docs/PROTOCOL.md): the last byte n of the decrypted
// body must be in 1..block and the last n bytes must all equal n (the PKCS#7 rule; PKCS#5 for
// 8-byte blocks). On success pad_len = n. body_len must be a non-zero multiple of block (parse_header
// checks it). Constant time: it reads the same `block` bytes whatever n is, with no branch or
// address that depends on them; only the verdict and n are public (checked under valgrind, tests/ct/).
bool check_cbc_padding(const uint8_t* body, size_t body_len, size_t block, size_t& pad_len) noexcept;

}  // namespace aesxfer::proto
