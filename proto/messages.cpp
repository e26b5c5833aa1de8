// Control message encoding. Layout (all integers big-endian), see docs/PROTOCOL.md "Control messages":
//   welcome  : 01 | u8 status | u16 text_len | text
//   request  : 02 | u8 op | u16 path_len | path | u64 size | u32 mode | i64 mtime | u64 offset
//              | u16 name_len | name (source base name, in Message::text) | u8 flags
//              [ flags & kFlagRange: xfer_id[16] | u32 part | u32 nparts | u64 length ]
//              [ flags & kFlagAhead: u32 tag ]
//              (flags & kFlagUnsized: op put, size 0, no other flag but kFlagPreserve)
//              [ op get with flags & kFlagResume: u8 digest_len (0 or 32) | digest ]
//   response : 03 | u8 status | u64 size | u32 mode | i64 mtime | u16 text_len | text
//              | u8 digest_len (0 or 32) | digest [ | u32 tag ]
//   result   : 04 | u8 status | u16 text_len | text [ | u32 tag ]
//   bye      : 05
#include "proto/messages.h"

#include "proto/failure.h"
#include "proto/ops.h"
#include "proto/wire.h"

namespace aesxfer::proto {

bool valid_op(uint8_t op) noexcept { return find_op(op) != nullptr; }

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::refused:
      return "refused";
    case Status::not_found:
      return "not found";
    case Status::permission:
      return "permission denied";
    case Status::no_space:
      return "no space left";
    case Status::bad_path:
      return "bad path";
    case Status::io_error:
      return "I/O error";
    case Status::integrity:
      return "integrity check failed";
    case Status::busy:
      return "busy";
    case Status::internal:
      return "internal error";
    case Status::is_directory:
      return "is a directory";
    case Status::not_directory:
      return "not a directory";
    case Status::changed:
      return "changed while it was read";
  }
  return "unknown status";
}

namespace {

constexpr uint32_t kModeMask = 07777;

bool valid_status(uint8_t s) { return s <= uint8_t(Status::changed); }

// The u32 tag that may end a Response or Result (the answer to a pipelined request): exactly
// four more bytes, or none.
void optional_tag(WireReader& r, Message& m) {
  if (r.remaining() == 0) return;
  m.tag = r.u32();
  m.tagged = true;
}

// A path goes whole or not at all (docs/PROTOCOL.md 3.2): cut, it would name another file.
void must_fit(const std::string& p, size_t max) {
  if (p.size() > max)
    throw Failure("path too long (" + std::to_string(p.size()) + " bytes; the protocol carries " +
                      std::to_string(max) + " at most)",
                  Status::bad_path);
}

// The paths of a message: a Request's path and name, a Response ok's text (mkdir, list).
void check_paths_whole(const Message& m) {
  if (m.type == MsgType::request) {
    must_fit(m.path, kMaxPath);
    must_fit(m.text, kMaxPath);
  } else if (m.type == MsgType::response && m.status == Status::ok) {
    must_fit(m.text, kMaxMessage);
  }
}

void encode_request(const Message& m, WireWriter& w) {
  w.u8(uint8_t(m.op));
  w.str16(m.path, kMaxPath);
  w.u64(m.size);
  w.u32(m.mode & kModeMask);
  w.u64(uint64_t(m.mtime));
  w.u64(m.offset);
  w.str16(m.text, kMaxPath);  // the source file's name, for a destination directory
  w.u8(m.flags & kRequestFlags);
  if (m.flags & kFlagRange) {
    w.bytes(m.xfer_id.data(), m.xfer_id.size());
    w.u32(m.part);
    w.u32(m.nparts);
    w.u64(m.length);
  }
  if (m.flags & kFlagAhead) w.u32(m.tag);
  if (m.op == Op::get && (m.flags & kFlagResume)) w.opt_bytes8(m.digest, kPrefixMacLen);
}

// The range fields of a request with kFlagRange, and their consistency with offset and size.
void decode_range(WireReader& r, Message& m) {
  r.copy(m.xfer_id.data(), kXferIdLen);
  m.part = r.u32();
  m.nparts = r.u32();
  m.length = r.u64();
  if (m.nparts == 0 || m.nparts > kMaxParts || m.part >= m.nparts) r.fail();
  if (m.offset > m.size || m.length > m.size - m.offset) r.fail();
}

void decode_request(WireReader& r, Message& m) {
  const uint8_t op = r.u8();
  if (!valid_op(op)) r.fail();
  m.op = Op(op);
  m.path = r.str16(kMaxPath);
  if (r.ok() && (m.path.empty() || m.path.find('\0') != std::string::npos)) r.fail();
  m.size = r.u64();
  m.mode = r.u32();
  if (m.mode & ~kModeMask) r.fail();
  m.mtime = int64_t(r.u64());
  m.offset = r.u64();
  m.text = r.str16(kMaxPath);
  if (m.text.find('\0') != std::string::npos) r.fail();
  m.flags = r.u8();
  // The op's row (proto/ops.h): only the flags it accepts, every flag it needs. Then the rules
  // between flags, the same for every op.
  if (!flags_suit(m.op, m.flags)) r.fail();
  if ((m.flags & kFlagRange) && (m.flags & (kFlagResume | kFlagAhead))) r.fail();
  if ((m.flags & kFlagAhead) &&
      (((m.flags & kFlagResume) && m.op != Op::get) || (m.op == Op::put && m.size > kMaxAheadSize)))
    r.fail();
  // Unsized (protocol 4): size 0, one stream bounded by nothing but its end record.
  if ((m.flags & kFlagUnsized) && (m.size != 0 || (m.flags & (kFlagResume | kFlagRange | kFlagAhead))))
    r.fail();
  if (r.ok() && (m.flags & kFlagRange)) decode_range(r, m);
  if (r.ok() && (m.flags & kFlagAhead)) {
    m.tag = r.u32();
    m.tagged = true;
  }
  if (r.ok() && m.op == Op::get && (m.flags & kFlagResume)) m.digest = r.opt_bytes8(kPrefixMacLen);
}

void decode_response(WireReader& r, Message& m) {
  const uint8_t s = r.u8();
  if (!valid_status(s)) r.fail();
  m.status = Status(s);
  m.size = r.u64();
  m.mode = r.u32();
  if (m.mode & ~kModeMask) r.fail();
  m.mtime = int64_t(r.u64());
  m.text = r.str16(kMaxMessage);
  m.digest = r.opt_bytes8(kPrefixMacLen);
  if (r.ok()) optional_tag(r, m);
}

}  // namespace

void encode(const Message& m, std::vector<uint8_t>& out) {
  out.clear();
  check_paths_whole(m);  // throws before anything is written
  WireWriter w(out);
  w.u8(uint8_t(m.type));
  switch (m.type) {
    case MsgType::welcome:
    case MsgType::result:
      w.u8(uint8_t(m.status));
      w.str16(m.text, kMaxMessage);
      if (m.type == MsgType::result && m.tagged) w.u32(m.tag);
      break;
    case MsgType::request:
      encode_request(m, w);
      break;
    case MsgType::response:
      w.u8(uint8_t(m.status));
      w.u64(m.size);
      w.u32(m.mode & kModeMask);
      w.u64(uint64_t(m.mtime));
      w.str16(m.text, kMaxMessage);  // cut only when it is a refusal's reason (check_paths_whole)
      w.opt_bytes8(m.digest, kPrefixMacLen);
      if (m.tagged) w.u32(m.tag);
      break;
    case MsgType::bye:
      break;
  }
}

std::optional<Message> decode(std::span<const uint8_t> payload) {
  if (payload.size() > kMaxControl) return std::nullopt;
  WireReader r(payload);
  Message m;
  const uint8_t t = r.u8();
  switch (t) {
    case uint8_t(MsgType::welcome):
    case uint8_t(MsgType::result): {
      m.type = MsgType(t);
      const uint8_t s = r.u8();
      if (!valid_status(s)) r.fail();
      m.status = Status(s);
      m.text = r.str16(kMaxMessage);
      if (r.ok() && t == uint8_t(MsgType::result)) optional_tag(r, m);
      break;
    }
    case uint8_t(MsgType::request):
      m.type = MsgType::request;
      decode_request(r, m);
      break;
    case uint8_t(MsgType::response):
      m.type = MsgType::response;
      decode_response(r, m);
      break;
    case uint8_t(MsgType::bye):
      m.type = MsgType::bye;
      break;
    default:
      return std::nullopt;
  }
  if (!r.done()) return std::nullopt;
  return m;
}

}  // namespace aesxfer::proto
