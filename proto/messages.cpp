// Control message encoding. Layout (all integers big-endian), see docs/PROTOCOL.md "Control messages":
//   welcome  : 01 | u8 status | u16 text_len | text
//   request  : 02 | u8 op | u16 path_len | path | u64 size | u32 mode | i64 mtime | u64 offset
//              | u16 name_len | name (source base name, in Message::text) | u8 flags
//              [ flags & kFlagRange: xfer_id[16] | u32 part | u32 nparts | u64 length ]
//              [ flags & kFlagAhead: u32 tag ]
//              [ op get with flags & kFlagResume: u8 digest_len (0 or 32) | digest ]
//   response : 03 | u8 status | u64 size | u32 mode | i64 mtime | u16 text_len | text
//              | u8 digest_len (0 or 32) | digest [ | u32 tag ]
//   result   : 04 | u8 status | u16 text_len | text [ | u32 tag ]
//   bye      : 05
#include "proto/messages.h"

#include <algorithm>

#include "crypto/util.h"

namespace aesxfer::proto {

bool valid_op(uint8_t op) noexcept { return op >= uint8_t(Op::put) && op <= uint8_t(Op::list); }

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::ok: return "ok";
    case Status::refused: return "refused";
    case Status::not_found: return "not found";
    case Status::permission: return "permission denied";
    case Status::no_space: return "no space left";
    case Status::bad_path: return "bad path";
    case Status::io_error: return "I/O error";
    case Status::integrity: return "integrity check failed";
    case Status::busy: return "busy";
    case Status::internal: return "internal error";
  }
  return "unknown status";
}

namespace {

constexpr uint32_t kModeMask = 07777;

void put8(std::vector<uint8_t>& o, uint8_t v) { o.push_back(v); }
void put16(std::vector<uint8_t>& o, uint16_t v) {
  o.push_back(uint8_t(v >> 8));
  o.push_back(uint8_t(v));
}
void put32(std::vector<uint8_t>& o, uint32_t v) {
  uint8_t b[4];
  crypto::store_be32(b, v);
  o.insert(o.end(), b, b + 4);
}
void put64(std::vector<uint8_t>& o, uint64_t v) {
  uint8_t b[8];
  crypto::store_be64(b, v);
  o.insert(o.end(), b, b + 8);
}
void put_str(std::vector<uint8_t>& o, const std::string& s, size_t max) {
  size_t n = std::min(s.size(), max);
  put16(o, uint16_t(n));
  o.insert(o.end(), s.begin(), s.begin() + ptrdiff_t(n));
}

// u8 length (0 or kPrefixMacLen) | digest; a digest of any other length is sent as none.
void put_digest(std::vector<uint8_t>& o, const std::string& d) {
  if (d.size() == kPrefixMacLen) {
    put8(o, uint8_t(kPrefixMacLen));
    o.insert(o.end(), d.begin(), d.end());
  } else {
    put8(o, 0);
  }
}

// Bounds-checked reader: every get fails (and stays failed) rather than reading past the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> p) : p_(p) {}
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == p_.size(); }
  bool need(size_t n) {
    if (!ok_ || p_.size() - pos_ < n) ok_ = false;
    return ok_;
  }
  uint8_t u8() {
    if (!need(1)) return 0;
    return p_[pos_++];
  }
  uint16_t u16() {
    if (!need(2)) return 0;
    uint16_t v = uint16_t(p_[pos_] << 8 | p_[pos_ + 1]);
    pos_ += 2;
    return v;
  }
  uint32_t u32() {
    if (!need(4)) return 0;
    uint32_t v = crypto::load_be32(p_.data() + pos_);
    pos_ += 4;
    return v;
  }
  uint64_t u64() {
    if (!need(8)) return 0;
    uint64_t v = crypto::load_be64(p_.data() + pos_);
    pos_ += 8;
    return v;
  }
  // u16 length, checked against max and the remaining payload before anything is copied.
  std::string str(size_t max) {
    uint16_t n = u16();
    if (!ok_) return {};
    if (n > max || !need(n)) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(p_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void fail() { ok_ = false; }
  // n raw bytes; call need(n) first.
  std::string bytes(size_t n) {
    std::string s(reinterpret_cast<const char*>(p_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> p_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// u8 length (0 or kPrefixMacLen) | digest.
std::string digest(Reader& r) {
  uint8_t dl = r.u8();
  if (dl != 0 && dl != kPrefixMacLen) r.fail();
  if (r.ok() && dl && r.need(dl)) return r.bytes(dl);
  return {};
}

bool valid_status(uint8_t s) { return s <= uint8_t(Status::internal); }

// The u32 tag that may end a Response or Result (the answer to a pipelined request): exactly
// four more bytes, or none.
void optional_tag(Reader& r, Message& m) {
  if (r.at_end()) return;
  m.tag = r.u32();
  m.tagged = true;
}

}  // namespace

void encode(const Message& m, std::vector<uint8_t>& out) {
  out.clear();
  put8(out, uint8_t(m.type));
  switch (m.type) {
    case MsgType::welcome:
    case MsgType::result:
      put8(out, uint8_t(m.status));
      put_str(out, m.text, kMaxMessage);
      if (m.type == MsgType::result && m.tagged) put32(out, m.tag);
      break;
    case MsgType::request:
      put8(out, uint8_t(m.op));
      put_str(out, m.path, kMaxPath);
      put64(out, m.size);
      put32(out, m.mode & kModeMask);
      put64(out, uint64_t(m.mtime));
      put64(out, m.offset);
      put_str(out, m.text, kMaxPath);  // the source file's name, for a destination directory
      put8(out, m.flags & kRequestFlags);
      if (m.flags & kFlagRange) {
        out.insert(out.end(), m.xfer_id.begin(), m.xfer_id.end());
        put32(out, m.part);
        put32(out, m.nparts);
        put64(out, m.length);
      }
      if (m.flags & kFlagAhead) put32(out, m.tag);
      if (m.op == Op::get && (m.flags & kFlagResume)) put_digest(out, m.digest);
      break;
    case MsgType::response:
      put8(out, uint8_t(m.status));
      put64(out, m.size);
      put32(out, m.mode & kModeMask);
      put64(out, uint64_t(m.mtime));
      put_str(out, m.text, kMaxMessage);
      put_digest(out, m.digest);
      if (m.tagged) put32(out, m.tag);
      break;
    case MsgType::bye:
      break;
  }
}

std::optional<Message> decode(std::span<const uint8_t> payload) {
  Reader r(payload);
  Message m;
  uint8_t t = r.u8();
  if (!r.ok()) return std::nullopt;
  switch (t) {
    case uint8_t(MsgType::welcome):
    case uint8_t(MsgType::result): {
      m.type = MsgType(t);
      uint8_t s = r.u8();
      if (!valid_status(s)) r.fail();
      m.status = Status(s);
      m.text = r.str(kMaxMessage);
      if (r.ok() && t == uint8_t(MsgType::result)) optional_tag(r, m);
      break;
    }
    case uint8_t(MsgType::request): {
      m.type = MsgType::request;
      uint8_t op = r.u8();
      if (!valid_op(op)) r.fail();
      m.op = Op(op);
      m.path = r.str(kMaxPath);
      if (r.ok() && (m.path.empty() || m.path.find('\0') != std::string::npos)) r.fail();
      m.size = r.u64();
      m.mode = r.u32();
      if (m.mode & ~kModeMask) r.fail();
      m.mtime = int64_t(r.u64());
      m.offset = r.u64();
      m.text = r.str(kMaxPath);
      if (r.ok() && m.text.find('\0') != std::string::npos) r.fail();
      m.flags = r.u8();
      if (m.flags & ~kRequestFlags) r.fail();
      if ((m.flags & kFlagRange) && (m.flags & kFlagResume)) r.fail();
      if ((m.flags & kFlagAhead) && ((m.flags & (kFlagRange | kFlagResume)) ||
                                     (m.op != Op::put && m.op != Op::get && m.op != Op::mkdir && m.op != Op::stat) ||
                                     (m.op == Op::put && m.size > kMaxAheadSize)))
        r.fail();
      if (r.ok() && (m.flags & kFlagRange)) {
        if (r.need(kXferIdLen)) {
          std::string id = r.bytes(kXferIdLen);
          std::copy(id.begin(), id.end(), m.xfer_id.begin());
        }
        m.part = r.u32();
        m.nparts = r.u32();
        m.length = r.u64();
        if (m.nparts == 0 || m.nparts > kMaxParts || m.part >= m.nparts) r.fail();
        if (m.offset > m.size || m.length > m.size - m.offset) r.fail();
      }
      if (r.ok() && (m.flags & kFlagAhead)) {
        m.tag = r.u32();
        m.tagged = true;
      }
      if (r.ok() && m.op == Op::get && (m.flags & kFlagResume)) m.digest = digest(r);
      break;
    }
    case uint8_t(MsgType::response): {
      m.type = MsgType::response;
      uint8_t s = r.u8();
      if (!valid_status(s)) r.fail();
      m.status = Status(s);
      m.size = r.u64();
      m.mode = r.u32();
      if (m.mode & ~kModeMask) r.fail();
      m.mtime = int64_t(r.u64());
      m.text = r.str(kMaxMessage);
      m.digest = digest(r);
      if (r.ok()) optional_tag(r, m);
      break;
    }
    case uint8_t(MsgType::bye):
      m.type = MsgType::bye;
      break;
    default:
      return std::nullopt;
  }
  if (!r.ok() || !r.at_end()) return std::nullopt;
  return m;
}

}  // namespace aesxfer::proto
