#include "proto/record_reader.h"

#include <algorithm>
#include <cstring>

namespace aesxfer::proto {

RecordFramer::Status RecordFramer::added(const uint8_t* rec, size_t n, std::error_code& ec) noexcept {
  if (ec_) {
    ec = ec_;
    return Status::error;
  }
  have_ += std::min(n, need_ - have_);
  if (have_ == kHeaderLen && need_ == kHeaderLen) {
    const size_t rest = opener_.parse_header(rec, hdr_, ec_);
    if (ec_) {
      ec = ec_;
      return Status::error;
    }
    need_ = kHeaderLen + rest;
  }
  // A header with nothing after it (cipher none, MAC none, empty payload) completes on its own.
  if (have_ < need_) return Status::need_more;
  length_ = need_;
  have_ = 0;
  need_ = kHeaderLen;
  ec.clear();
  return Status::record;
}

void RecordReader::hold(size_t len) {
  if (rec_cap_ < len) {
    rec_.reset();
    rec_ = std::make_unique<uint8_t[]>(len);
    rec_cap_ = len;
  }
  std::memcpy(rec_.get(), hdr_buf_, kHeaderLen);
}

size_t RecordReader::feed(const uint8_t* data, size_t len) {
  size_t used = 0;
  while (used < len && !ready_ && !ec_) {
    // Header bytes collect in hdr_buf_; the record buffer is sized once the header is checked.
    const bool in_header = framer_.have() < kHeaderLen;
    uint8_t* buf = in_header ? hdr_buf_ : rec_.get();
    const size_t n = std::min(framer_.want(), len - used);
    std::memcpy(buf + framer_.have(), data + used, n);
    used += n;
    const Status st = framer_.added(buf, n, ec_);
    if (st == Status::error) break;
    if (st == Status::record) {
      if (in_header) hold(framer_.length());
      ready_ = true;
      ready_len_ = framer_.length();
    } else if (in_header && framer_.have() == kHeaderLen) {
      hold(kHeaderLen + framer_.want());
    }
  }
  return used;
}

RecordReader::Status RecordReader::next(RecordHeader& hdr, std::span<uint8_t>& payload, std::error_code& ec) {
  if (ec_) {
    ec = ec_;
    return Status::error;
  }
  if (!ready_) return Status::need_more;
  ready_ = false;
  ec_ = opener_.open(rec_.get(), ready_len_, hdr, payload);
  if (ec_) {
    ec = ec_;
    return Status::error;
  }
  ec.clear();
  return Status::record;
}

}  // namespace aesxfer::proto
