// Fields on the wire, read and written one way for every parser in proto/ (handshake frames,
// control messages, listing pages): big-endian integers, raw bytes and length-prefixed strings.
// Pure, no I/O; see docs/PROTOCOL.md for the layouts built from them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aesxfer::proto {

// A bounds-checked reader over a byte span. Every read that would pass the end fails, and a
// failure is sticky: the reader stays failed and every later read returns 0 or empty without
// moving. A parser reads all its fields, then checks ok() (or done()) once.
class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> in) noexcept : in_(in) {}

  bool ok() const noexcept { return ok_; }
  // Everything read and nothing failed: a parser's last check (a trailing byte is an error).
  bool done() const noexcept { return ok_ && pos_ == in_.size(); }
  // Bytes not yet read (0 once failed).
  size_t remaining() const noexcept { return ok_ ? in_.size() - pos_ : 0; }
  // Marks the input invalid (a field read fine but its value is not allowed).
  void fail() noexcept { ok_ = false; }

  uint8_t u8() noexcept;
  uint16_t u16() noexcept;
  uint32_t u32() noexcept;
  uint64_t u64() noexcept;
  // The next n bytes (a view into the input), or an empty span after a failure.
  std::span<const uint8_t> bytes(size_t n) noexcept;
  // Copies the next n bytes into out; on failure out is left alone.
  void copy(uint8_t* out, size_t n) noexcept;
  // u16 length | bytes. Fails when the length is over max or over what remains, before
  // anything is allocated.
  std::string str16(size_t max);
  // u8 length | bytes, the length 0 or exactly `len` (a digest that may be absent).
  std::string opt_bytes8(size_t len);

 private:
  bool take(size_t n) noexcept;  // n more bytes are there (else fail)
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Appends fields to a byte vector. Never fails; strings longer than their bound are cut to it
// (callers keep within the bounds, the decoder of the other end refuses more).
class WireWriter {
 public:
  explicit WireWriter(std::vector<uint8_t>& out) noexcept : out_(out) {}

  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void bytes(const void* p, size_t n);
  void bytes(std::span<const uint8_t> b) { bytes(b.data(), b.size()); }
  void zeros(size_t n) { out_.resize(out_.size() + n, 0); }
  // u16 length | bytes, at most max bytes of s.
  void str16(std::string_view s, size_t max);
  // u8 length | bytes: s when it is exactly `len` bytes, else the length 0 and nothing.
  void opt_bytes8(std::string_view s, size_t len);

 private:
  std::vector<uint8_t>& out_;
};

}  // namespace aesxfer::proto
