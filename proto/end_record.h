// The `end` record that closes every file stream, and the order records may come in
// (docs/PROTOCOL.md 3.1, 3.3). The end record's payload:
//
//   u64 BE length | u8 checksum id (4.3) | digest (0, 16 or 32 bytes, by the id)
//
// or, when the sender withdraws the file (protocol 6: it changed, shrank or failed to read while
// it was sent, so no version of it arrived whole):
//
//   u64 BE length (the bytes sent) | u8 0xff | u8 reason (Withdrawal)
//
// Pure: the connection (net/conn.cpp) and the data plane (net/transfer.cpp) read and open the
// records, hash the data and ask RecordOrder whether each record may come where it came.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "crypto/checksum.h"
#include "proto/record.h"

namespace aesxfer::proto {

constexpr size_t kMaxEndPayload = 8 + 1 + crypto::kMaxChecksumLen;
// The checksum id of a withdrawn stream's end record (no checksum algorithm has it).
constexpr uint8_t kWithdrawnId = 0xff;

// Why a sender withdrew a stream (docs/PROTOCOL.md 3.1); none: a whole stream.
enum class Withdrawal : uint8_t { none = 0, changed = 1, shrank = 2, unreadable = 3 };
// Its words: "the file changed while it was read", ...
const char* withdrawal_text(Withdrawal w) noexcept;

struct EndRecord {
  uint64_t length = 0;
  crypto::Checksum checksum;
  Withdrawal withdrawn = Withdrawal::none;  // not none: checksum is unset, length the bytes sent
};

// Writes the payload into out (room for kMaxEndPayload bytes); returns its length.
size_t encode_end(uint8_t* out, const EndRecord& e) noexcept;
// nullopt for an unknown checksum id or a payload whose length does not match it.
std::optional<EndRecord> decode_end(std::span<const uint8_t> payload) noexcept;

// Which record may come next on one direction of a connection. Between file streams only
// control records. Once a Request/Response announced a stream of `size` bytes: data records, each
// at most the agreed record size and no more than the announced bytes in all, then one end record
// carrying the session's checksum algorithm; close() then checks the end record's length and
// digest, and control records follow again. A control record inside a stream, or a data or end
// record outside one (after the end record of a file, say), is refused. An unsized stream (an
// unsized put, new in protocol 4) announces no size: its data records (each still at most the
// record size) run until the end record, whose length must be the bytes counted. A withdrawn
// stream's end record (protocol 6) may come after any number of data records, up to the announced
// size; its length must be the bytes counted, and close() says `withdrawn`.
class RecordOrder {
 public:
  enum class Verdict : uint8_t {
    ok,
    not_control,        // a data or end record outside a file stream
    control_in_stream,  // a control record before the stream's end record
    over_announced,     // more data than the announced size
    over_record_size,   // a data record longer than the agreed record size
    empty_in_sized,     // an empty data record in a stream of known size (only unsized ones keep alive)
    malformed_end,      // the end payload does not decode
    wrong_checksum,     // the end record's checksum algorithm is not the session's
    short_stream,       // close(): the end record's length or the data counted is not the size
    length_mismatch,  // close(): the end record's length is not the data counted (all of a sized stream came)
    digest_mismatch,  // close(): the end record's digest is not the receiver's
    withdrawn,        // close(): the sender withdrew the stream (its length is the data counted)
  };

  RecordOrder(crypto::ChecksumAlg checksum, size_t record_size) noexcept
      : checksum_(checksum), record_size_(record_size) {}

  // A file stream of `size` bytes comes next; its first `offset` bytes are at the receiver
  // already (resume), the data records carry the rest.
  void begin_stream(uint64_t size, uint64_t offset = 0) noexcept;
  // A file stream of unknown size comes next (an unsized put): it ends at its end record.
  void begin_unsized() noexcept;
  // Back to between streams without closing (the stream failed; the connection is dropped).
  void abandon() noexcept { state_ = State::between; }
  bool in_stream() const noexcept { return state_ != State::between; }
  // The end record is in; close() comes next.
  bool ended() const noexcept { return state_ == State::ended; }
  // Bytes of the stream so far, the resumed offset included.
  uint64_t received() const noexcept { return received_; }

  // Checks the next record's type and payload before the payload is used. A data record is
  // counted; an end record is decoded (end()) and ends the stream's records. Anything but ok
  // is final for the connection.
  Verdict on_record(RecordType type, std::span<const uint8_t> payload) noexcept;
  // After the end record: its length against the announced size and the data counted, then its
  // digest against `mine`, the receiver's checksum of the same bytes (constant time).
  Verdict close(const crypto::Checksum& mine) noexcept;
  const EndRecord& end() const noexcept { return end_; }

  // One line for a verdict ("peer sent more data than announced"), with the figures it needs.
  std::string describe(Verdict v) const;

 private:
  enum class State : uint8_t { between, streaming, ended };
  crypto::ChecksumAlg checksum_;
  size_t record_size_;
  State state_ = State::between;
  uint64_t size_ = 0, received_ = 0, offset_ = 0;  // offset_: the stream's resumed start
  bool unsized_ = false;
  EndRecord end_;
};

}  // namespace aesxfer::proto
