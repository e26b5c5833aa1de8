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
  q.add(a, 250);
  q.add(b, 1000);
  q.settle(b);
  EXPECT_EQ(q.owed(a).moved, 250u);
  EXPECT_EQ(q.owed(b).moved, 0u);
}

// A sixty-first re-attack (R61-1) and a sixty-second (T62-2): full, the ledger forgot the file
// most recently added to an empty bucket, then the one with the fewest bytes, so a put to a fresh
// name after each piece kept a file's sum at one piece. The file touched least recently is
// forgotten: one touched between the others stays.
TEST(QuietBytes, AFullLedgerForgetsTheFileTouchedLeastRecently) {
  QuietBytes q;
  for (size_t i = 0; i < QuietBytes::kMaxFiles; ++i) q.add("junk-" + std::to_string(i), 201);
  for (int piece = 0; piece < 8; ++piece) {
    q.add("secret.bin", 200);
    q.add("fresh-" + std::to_string(piece), 201);
  }
  EXPECT_EQ(q.owed("secret.bin").moved, 1600u);
  EXPECT_EQ(q.owed("junk-0").moved, 0u);  // the least recently touched went
  EXPECT_EQ(q.files(), QuietBytes::kMaxFiles);
}

// A sixty-first re-attack (R61-3) and a sixty-second (T62-1): what the key's puts left in place is
// kept apart from what its transfers moved, and only a put that left something sets it.
TEST(QuietBytes, WhatAPutLeftInPlaceIsKeptApart) {
  QuietBytes q;
  EXPECT_EQ(q.add("f", 85).moved, 0u);    // read
  EXPECT_EQ(q.add("f", 250).placed, 0u);  // a withdrawn put: nothing placed
  const QuietBytes::Owed before = q.add("f", 86, 86);
  EXPECT_EQ(before.moved, 335u);
  EXPECT_EQ(before.placed, 0u);
  EXPECT_EQ(q.owed("f").placed, 86u);
  q.settle("f");
  EXPECT_EQ(q.owed("f").moved, 0u);
  EXPECT_EQ(q.owed("f").placed, 86u);  // still the key's own bytes there
}

}  // namespace
}  // namespace aesxfer::server
