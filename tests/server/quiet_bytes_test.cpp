// The ledger of the bytes a client key's transfers moved without a line (server/quiet_bytes.h).
#include "server/quiet_bytes.h"

#include <gtest/gtest.h>

#include <string>

namespace aesxfer::server {
namespace {

// A sixty-first re-attack (R61-2): by std::hash, whose seed is fixed, this 18-byte name shared
// "secret.bin"'s sum (found by inverting MurmurHash's block step), and a line naming it cleared
// the other's bytes. Each path keeps its own.
TEST(QuietBytes, TwoPathsOfOneStdHashKeepTheirOwnSums) {
  const std::string a = "secret.bin", b("c0000000\x0e-z\xea\xe9\xe5"
                                        "ACin",
                                        18);
  ASSERT_EQ(std::hash<std::string>{}(a), std::hash<std::string>{}(b)) << "not a collision on this library";
  QuietBytes q;
  q.add(a, 250, false);
  q.add(b, 1000, false);
  q.settle(b);
  EXPECT_EQ(q.owed(a).moved, 250u);
  EXPECT_EQ(q.owed(b).moved, 0u);
}

// A sixty-first re-attack (R61-1): full, the ledger forgot the file most recently added to an
// empty bucket, so a 1-byte put to a fresh name after each piece kept a file's sum at one piece.
// The file with the fewest bytes is forgotten.
TEST(QuietBytes, AFullLedgerForgetsTheFileWithTheFewestBytes) {
  QuietBytes q;
  for (size_t i = 0; i < QuietBytes::kMaxFiles; ++i) q.add("junk-" + std::to_string(i), 1, true);
  for (int piece = 0; piece < 8; ++piece) {
    q.add("secret.bin", 250, false);
    q.add("fresh-" + std::to_string(piece), 1, true);
  }
  EXPECT_EQ(q.owed("secret.bin").moved, 2000u);
  EXPECT_LE(q.files(), QuietBytes::kMaxFiles);
}

// A sixty-first re-attack (R61-3): the bytes this key's puts wrote are summed apart from those it
// read, so that reading a file first does not make a put over it "this key's own bytes".
TEST(QuietBytes, PutBytesAreSummedApartFromReadOnes) {
  QuietBytes q;
  const QuietBytes::Owed first = q.add("f", 85, false);
  EXPECT_EQ(first.moved, 0u);
  const QuietBytes::Owed before = q.add("f", 86, true);
  EXPECT_EQ(before.moved, 85u);
  EXPECT_EQ(before.put, 0u);
  EXPECT_EQ(q.owed("f").put, 86u);
  EXPECT_EQ(q.owed("f").moved, 171u);
}

}  // namespace
}  // namespace aesxfer::server
