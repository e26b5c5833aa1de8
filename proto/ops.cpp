#include "proto/ops.h"

#include <iterator>

#include "proto/failure.h"

namespace aesxfer::proto {

namespace {

constexpr bool rows_in_wire_order() {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (size_t(kOps[i].op) != i + 1 || (kOps[i].needs & ~kOps[i].flags)) return false;
  return true;
}
static_assert(rows_in_wire_order(), "kOps: row i has wire id i + 1, and needs only flags it accepts");

}  // namespace

const OpInfo* find_op(uint8_t op) noexcept {
  return op >= 1 && size_t(op) <= std::size(kOps) ? &kOps[op - 1] : nullptr;
}

const OpInfo& op_info(Op op) noexcept { return kOps[uint8_t(op) - 1]; }

bool flags_suit(Op op, uint8_t flags) noexcept {
  const OpInfo* row = find_op(uint8_t(op));
  return row && !(flags & ~row->flags) && (flags & row->needs) == row->needs;
}

Message request(Op op, const std::string& path, uint8_t flags) {
  if (!flags_suit(op, flags))
    throw Failure(std::string("internal error: flags ") + std::to_string(flags) + " on a " +
                      (find_op(uint8_t(op)) ? op_info(op).name : "?") + " request",
                  Status::internal);
  Message m;
  m.type = MsgType::request;
  m.op = op;
  m.path = path;
  m.flags = flags;
  return m;
}

}  // namespace aesxfer::proto
