// net::BufferBudget: the record batches of every stream of a process, bounded in all; a stream
// takes fewer records per batch when the rest is taken, never fewer than one.
#include "net/buffer_budget.h"

#include <gtest/gtest.h>

#include <optional>

namespace aesxfer::net {
namespace {

TEST(BufferBudget, StreamsTakeFewerRecordsPastTheBoundAndNeverNone) {
  BufferBudget b(100);
  std::optional<BufferBudget::Lease> first(std::in_place, &b, 10, 16);
  EXPECT_EQ(first->records(), 10u);  // what fits of the 16 it wants
  EXPECT_EQ(b.used(), 100u);
  {
    BufferBudget::Lease second(&b, 10, 16);
    EXPECT_EQ(second.records(), 1u);  // none left: one record, past the bound
    EXPECT_EQ(b.used(), 110u);
  }
  EXPECT_EQ(b.used(), 100u);
  first.reset();
  EXPECT_EQ(b.used(), 0u);
  BufferBudget::Lease small(&b, 4, 16);
  EXPECT_EQ(small.records(), 16u);                 // all it wants
  BufferBudget::Lease none(nullptr, 1 << 20, 16);  // no budget (the client): what it wants
  EXPECT_EQ(none.records(), 16u);
  EXPECT_EQ(b.used(), 64u);
}

}  // namespace
}  // namespace aesxfer::net
