#include "proto/wire.h"

#include <algorithm>
#include <cstring>

#include "crypto/util.h"

namespace aesxfer::proto {

bool WireReader::take(size_t n) noexcept {
  if (ok_ && in_.size() - pos_ < n) ok_ = false;
  return ok_;
}

uint8_t WireReader::u8() noexcept {
  if (!take(1)) return 0;
  return in_[pos_++];
}

uint16_t WireReader::u16() noexcept {
  if (!take(2)) return 0;
  uint16_t v = uint16_t(in_[pos_] << 8 | in_[pos_ + 1]);
  pos_ += 2;
  return v;
}

uint32_t WireReader::u32() noexcept {
  if (!take(4)) return 0;
  uint32_t v = crypto::load_be32(in_.data() + pos_);
  pos_ += 4;
  return v;
}

uint64_t WireReader::u64() noexcept {
  if (!take(8)) return 0;
  uint64_t v = crypto::load_be64(in_.data() + pos_);
  pos_ += 8;
  return v;
}

std::span<const uint8_t> WireReader::bytes(size_t n) noexcept {
  if (!take(n)) return {};
  auto s = in_.subspan(pos_, n);
  pos_ += n;
  return s;
}

void WireReader::copy(uint8_t* out, size_t n) noexcept {
  auto s = bytes(n);
  if (ok_ && n) std::memcpy(out, s.data(), n);
}

std::string WireReader::str16(size_t max) {
  const uint16_t n = u16();
  if (n > max) fail();
  auto s = bytes(n);
  if (!ok_) return {};
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

std::string WireReader::opt_bytes8(size_t len) {
  const uint8_t n = u8();
  if (n != 0 && n != len) fail();
  auto s = bytes(n);
  if (!ok_) return {};
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

void WireWriter::u16(uint16_t v) {
  out_.push_back(uint8_t(v >> 8));
  out_.push_back(uint8_t(v));
}

void WireWriter::u32(uint32_t v) {
  uint8_t b[4];
  crypto::store_be32(b, v);
  bytes(b, 4);
}

void WireWriter::u64(uint64_t v) {
  uint8_t b[8];
  crypto::store_be64(b, v);
  bytes(b, 8);
}

void WireWriter::bytes(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  out_.insert(out_.end(), b, b + n);
}

void WireWriter::str16(std::string_view s, size_t max) {
  const size_t n = std::min({s.size(), max, size_t(0xffff)});
  u16(uint16_t(n));
  bytes(s.data(), n);
}

void WireWriter::opt_bytes8(std::string_view s, size_t len) {
  if (len > 0xff || s.size() != len) {
    u8(0);
    return;
  }
  u8(uint8_t(len));
  bytes(s.data(), len);
}

}  // namespace aesxfer::proto
