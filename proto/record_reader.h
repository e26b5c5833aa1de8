// Framing records out of a byte stream: the one framer behind the connection (net/conn.cpp reads
// each record straight into a pipeline slot) and behind RecordReader, which the tests and the
// fuzzers drive one byte at a time. Pure: the caller moves the bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include "proto/record.h"

namespace aesxfer::proto {

// Frames one record at a time in a buffer the caller owns (room for kMaxRecord bytes):
//
//   RecordFramer f(opener);
//   do n = read(fd, rec + f.have(), f.want()); while ((st = f.added(rec, n, ec)) == need_more);
//
// want() is the rest of the header until the header is in, then the rest of the record, so a
// caller that reads at most want() bytes never reads into the next record. The header is
// checked by RecordOpener::parse_header() as soon as its 8 bytes are in, before anything more is
// asked for. The framer does not open the record (the caller opens one, or a batch, in place).
// Errors are sticky.
class RecordFramer {
 public:
  enum class Status { need_more, record, error };
  explicit RecordFramer(const RecordOpener& opener) noexcept : opener_(opener) {}

  // Bytes of the current record in the buffer so far.
  size_t have() const noexcept { return have_; }
  // Bytes to add before the framer can say more (0 after an error).
  size_t want() const noexcept { return ec_ ? 0 : need_ - have_; }
  // The caller wrote n <= want() more bytes at rec + have(). On `record`, header() and length()
  // describe the complete record rec[0, length()) and the framer starts on the next one.
  Status added(const uint8_t* rec, size_t n, std::error_code& ec) noexcept;
  const RecordHeader& header() const noexcept { return hdr_; }
  size_t length() const noexcept { return length_; }
  // Part of a record is in (a close now is truncation).
  bool mid_record() const noexcept { return have_ != 0; }

 private:
  const RecordOpener& opener_;
  size_t have_ = 0;
  size_t need_ = kHeaderLen;
  RecordHeader hdr_{};
  size_t length_ = 0;
  std::error_code ec_;
};

// Incremental framing and opening for byte-stream input, in a buffer of its own: feed bytes,
// then call next() until it answers need_more.
//
//   size_t off = 0;
//   while (off < n) {
//     off += reader.feed(buf + off, n - off);
//     while ((st = reader.next(hdr, payload, ec)) == RecordReader::Status::record) use(payload);
//     if (st == RecordReader::Status::error) fail(ec);
//   }
//
// feed() consumes at most up to the end of one record: once a record is complete it consumes
// nothing more until next() has handed it out. The header is checked as soon as its 8 bytes are
// in (RecordFramer), and the reader allocates only what that check allowed. A payload span
// stays valid until the next call to feed() or next(). Errors are sticky.
class RecordReader {
 public:
  using Status = RecordFramer::Status;
  explicit RecordReader(RecordOpener& opener) : opener_(opener), framer_(opener) {}
  // Appends input; returns bytes consumed (all, unless a record is complete and waiting or an
  // error is pending).
  size_t feed(const uint8_t* data, size_t len);
  Status next(RecordHeader& hdr, std::span<uint8_t>& payload, std::error_code& ec);
  // True while part of a record has been fed but not yet returned (a close now is truncation).
  bool mid_record() const noexcept { return ready_ || framer_.mid_record(); }

 private:
  void hold(size_t len);  // room for a record of len bytes, the header copied in
  RecordOpener& opener_;
  RecordFramer framer_;
  uint8_t hdr_buf_[kHeaderLen];
  bool ready_ = false;
  size_t ready_len_ = 0;
  std::unique_ptr<uint8_t[]> rec_;
  size_t rec_cap_ = 0;
  std::error_code ec_;
};

}  // namespace aesxfer::proto
