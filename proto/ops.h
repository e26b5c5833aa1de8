// The request operations, one row each (as OpenSSH's sftp-server.c has handlers[]): the wire id,
// the name the server's log and messages use, the request flags the op accepts (and needs), and
// whether it changes the server's files. The decoder (proto/messages.cpp), the server's dispatcher
// (server/requests.cpp) and the client's builders (proto::request below) all read this table; a
// new operation is one row here, one handler there (docs/DESIGN.md, "A new operation touches").
//
// A flag an op does not accept, or a flag it needs and lacks, has one outcome whatever the op: the
// Request does not decode (bad_message, the session ends; docs/PROTOCOL.md 3.2). The flags shape
// the message (range and ahead add fields, resume on a get adds the digest), so a request with a
// wrong one is malformed, not a question the server answers.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "proto/messages.h"

namespace aesxfer::proto {

struct OpInfo {
  Op op;             // the wire id (u8 after the type)
  const char* name;  // for logs and messages
  uint8_t flags;     // the kFlag* bits this op accepts; any other bit: the request does not decode
  uint8_t needs;     // the bits it cannot go without (a subset of flags)
  bool writes;       // creates or changes something under the server's root
};

// What each flag means is at its kFlag* in proto/messages.h; the rules between flags (range not
// with resume or ahead, resume with ahead only on a get, unsized alone and with size 0, a
// pipelined put at most kMaxAheadSize) hold for every op and are the decoder's.
inline constexpr OpInfo kOps[] = {
    {Op::put, "put", kFlagPreserve | kFlagResume | kFlagRange | kFlagAhead | kFlagUnsized, 0, true},
    // preserve is accepted and ignored: the client applies mode and mtime itself.
    {Op::get, "get", kFlagPreserve | kFlagResume | kFlagRange | kFlagAhead, 0, false},
    {Op::mkdir, "mkdir", kFlagPreserve | kFlagAhead, 0, true},
    // preserve is accepted and ignored (a put's request asked as a probe keeps its flags).
    {Op::probe, "probe", kFlagPreserve | kFlagAhead, 0, false},
    // The transfer it commits is named by the range fields; preserve as on the put it commits.
    {Op::commit, "commit", kFlagPreserve | kFlagRange, kFlagRange, true},
    {Op::stat, "stat", kFlagAhead, 0, false},
    {Op::list, "list", 0, 0, false},
};

// The row of wire id `op`, or nullptr when no operation has it.
const OpInfo* find_op(uint8_t op) noexcept;
// The row of a known op (one exists for every Op).
const OpInfo& op_info(Op op) noexcept;
// True when `flags` suits `op`: only bits it accepts, and every bit it needs.
bool flags_suit(Op op, uint8_t flags) noexcept;

// A Request for `op` on `path` with `flags`, every other field 0 or empty (mode 0644). The
// client's builders start here; flags that do not suit op throw Failure (internal): a request the
// server could not decode never leaves this end.
Message request(Op op, const std::string& path, uint8_t flags = 0);

}  // namespace aesxfer::proto
