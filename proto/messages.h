// Control messages carried in records after the handshake. See docs/PROTOCOL.md, "Transfer".
//
//   S -> C  Welcome    (control) first record from the server: authorization verdict
//   C -> S  Request    (control) op put|get|mkdir|probe|list, path, size, mode, mtime
//   S -> C  Response   (control) status, size of the file for get, message
//   X -> Y  data records carry the file; then one `end` record with the final flag holding the
//           SHA-256 of the whole file
//   Y -> X  Result     (control) status and message once the receiver verified and renamed
//   C -> S  Bye        (control) no more requests on this connection
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace aesxfer::proto {

enum class MsgType : uint8_t { welcome = 1, request = 2, response = 3, result = 4, bye = 5 };
// mkdir (3): create a directory (-r); probe (4): ask for a kept partial file (--resume).
// commit (5): rename a file sent in parts (--streams) into place; stat (6): size, mode and mtime
// of a file, before it is fetched in parts. list (7): the entries under a directory, answered by
// listing pages (proto/listing.h; recv -r).
enum class Op : uint8_t { put = 1, get = 2, mkdir = 3, probe = 4, commit = 5, stat = 6, list = 7 };
bool valid_op(uint8_t op) noexcept;
// Request flags (u8, after the name): other bits are refused.
constexpr uint8_t kFlagPreserve = 1;  // apply mode exactly and mtime (-p); else mode & ~umask, mtime now
constexpr uint8_t kFlagResume = 2;    // put: keep a partial file on failure; resume from `offset`
                                      // get: the client holds `offset` bytes hashing to `digest`
// put/get/commit: the request carries a byte range of the file, one of `nparts` sent over parallel
// connections (--streams); see docs/PROTOCOL.md, "Parallel streams". Not with kFlagResume.
constexpr uint8_t kFlagRange = 4;
// put/get/mkdir/stat (version 3): a pipelined request, sent without waiting for the answers to the
// ones before it; it carries a u32 `tag` that its Response (and Result) echo. put: the data and
// end record follow the request at once, whatever the answer (a refused put's data is read and
// discarded by the server); get: the server goes on with the next request without waiting for
// this file's Result. Not with kFlagRange, nor with kFlagResume but on a get (protocol 4); a put's
// size is at most kMaxAheadSize.
// See docs/PROTOCOL.md, "Pipelining". Protocol 4 also pipelines probe (send -r --resume).
constexpr uint8_t kFlagAhead = 8;
// put (new in protocol 4): a stream whose size is not known in advance (send -, standard input).
// `size` is 0; the data records run until the end record, whose `length` is the file's size. Not
// with kFlagResume, kFlagRange or kFlagAhead. See docs/PROTOCOL.md 3.2 and 3.3.
constexpr uint8_t kFlagUnsized = 16;
// The text of a probe's Response (protocol 4) when there is no partial file and size and digest
// describe the whole destination file, which has exactly the probed size (docs/PROTOCOL.md 3.6);
// empty when they describe the kept partial file (or nothing is kept).
inline constexpr const char* kProbeComplete = "complete";
constexpr uint8_t kRequestFlags = kFlagPreserve | kFlagResume | kFlagRange | kFlagAhead | kFlagUnsized;
constexpr uint64_t kMaxAheadSize = uint64_t(1) << 20;
constexpr uint32_t kMaxParts = 16;
constexpr size_t kXferIdLen = 16;
constexpr size_t kPrefixMacLen = 32;
enum class Status : uint8_t {
  ok = 0,
  refused = 1,
  not_found = 2,
  permission = 3,
  no_space = 4,
  bad_path = 5,
  io_error = 6,
  integrity = 7,
  busy = 8,
  internal = 9,
  is_directory = 10,   // protocol 3: the path names a directory where a file was meant
  not_directory = 11,  // protocol 3: a path component, or a listed path, is not a directory
  changed = 12,        // protocol 6: the sender withdrew the file, it changed as it was read (3.1)
};
const char* status_name(Status s) noexcept;

constexpr size_t kMaxPath = 4096;
// The text of a Welcome, Response or Result (protocol 4; 1024 before). A path a server answers
// with (a Response ok to mkdir or list: at most a kMaxPath request path, "/", a 255-byte name)
// fits whole; encode() refuses to cut one (see there).
constexpr size_t kMaxMessage = 8192;
// The largest control message (PROTOCOL.md 3.1): a pipelined resumed get with a kMaxPath path and
// name, its tag and a prefix digest, 8264 bytes; the longest Response (an 8192-byte text, a digest and a tag)
// is 8253. decode() refuses a longer payload before reading it.
constexpr size_t kMaxControl = 8264;

struct Message {
  MsgType type = MsgType::bye;
  Op op = Op::put;
  Status status = Status::ok;
  std::string path;      // request
  uint64_t size = 0;     // request (put: bytes to come), response (get: bytes to come)
  uint32_t mode = 0644;  // request/response: permission bits
  int64_t mtime = 0;     // request/response: seconds since the epoch
  uint64_t offset = 0;   // request: resume from here (0 = whole file)
  std::string text;      // response/result/welcome: human-readable detail; request: source base name
  uint8_t flags = 0;     // request: kFlag* (kRequestFlags)
  std::string digest;    // response: empty, or the kPrefixMacLen-byte keyed hash of a partial file (probe),
                         // or the server's own prefix hash when it resumes a get there; request (get with
                         // kFlagResume): empty, or the hash of the client's first `offset` bytes
  // Request with kFlagRange: bytes [offset, offset + length) of the file, part `part` of `nparts`
  // of the transfer named `xfer_id` (random, chosen by the client).
  std::array<uint8_t, kXferIdLen> xfer_id{};
  uint32_t part = 0;
  uint32_t nparts = 0;
  uint64_t length = 0;
  // Request with kFlagAhead: the client's number for it; Response and Result: the tag of the
  // pipelined request they answer (`tagged`), absent (not tagged) for any other answer.
  bool tagged = false;
  uint32_t tag = 0;
};

// Encodes into out (cleared first). Texts for people (Welcome, Result, a refusal's Response) are
// cut to kMaxMessage; a path is never cut: a Request whose path or name is over kMaxPath, or a
// Response ok (its text names a path: mkdir, list) over kMaxMessage, throws Failure (bad_path,
// "path too long") and leaves nothing to send, so nobody acts on a path that is not whole.
void encode(const Message& m, std::vector<uint8_t>& out);
// Decodes a control record payload; nullopt when malformed (lengths are checked before use).
std::optional<Message> decode(std::span<const uint8_t> payload);

}  // namespace aesxfer::proto
