// proto/wire.h: the one reader and writer of wire fields. Truncation at every byte, the length
// bounds, and the sticky failure that lets a parser check once at the end.
#include "proto/wire.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace aesxfer::proto {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes sample() {
  Bytes out;
  WireWriter w(out);
  w.u8(0xa1);
  w.u16(0xb2c3);
  w.u32(0xd4e5f607);
  w.u64(0x0102030405060708);
  w.str16("path", 100);
  w.opt_bytes8(std::string(4, 'd'), 4);
  w.bytes(std::string_view("xyz").data(), 3);
  return out;
}

TEST(Wire, WriterLaysFieldsOutBigEndian) {
  const Bytes b = sample();
  const Bytes expect = {0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 1,   2,   3,   4,   5,   6,   7,  8,
                        0,    4,    'p',  'a',  't',  'h',  4,    'd', 'd', 'd', 'd', 'x', 'y', 'z'};
  EXPECT_EQ(b, expect);
}

TEST(Wire, ReaderReadsBackWhatTheWriterWrote) {
  const Bytes b = sample();
  WireReader r(b);
  EXPECT_EQ(r.u8(), 0xa1);
  EXPECT_EQ(r.u16(), 0xb2c3);
  EXPECT_EQ(r.u32(), 0xd4e5f607u);
  EXPECT_EQ(r.u64(), 0x0102030405060708u);
  EXPECT_EQ(r.str16(100), "path");
  EXPECT_EQ(r.opt_bytes8(4), "dddd");
  EXPECT_FALSE(r.done());
  EXPECT_EQ(r.remaining(), 3u);
  uint8_t tail[3];
  r.copy(tail, 3);
  EXPECT_EQ(std::string(tail, tail + 3), "xyz");
  EXPECT_TRUE(r.done());
}

// Every prefix of a valid input fails somewhere, and once failed nothing more is read.
TEST(Wire, EveryTruncationFailsAndStaysFailed) {
  const Bytes b = sample();
  for (size_t cut = 0; cut < b.size(); ++cut) {
    WireReader r(std::span<const uint8_t>(b.data(), cut));
    r.u8();
    r.u16();
    r.u32();
    r.u64();
    r.str16(100);
    r.opt_bytes8(4);
    auto rest = r.bytes(3);
    EXPECT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_FALSE(r.done()) << "cut at " << cut;
    EXPECT_TRUE(rest.empty());
    EXPECT_EQ(r.remaining(), 0u);
    // Sticky: reads after the failure return zero even where bytes are left.
    EXPECT_EQ(r.u8(), 0);
    EXPECT_EQ(r.u64(), 0u);
    EXPECT_EQ(r.str16(100), "");
  }
}

TEST(Wire, StickyAfterExplicitFail) {
  const Bytes b = {1, 2, 3, 4};
  WireReader r(b);
  EXPECT_EQ(r.u8(), 1);
  r.fail();
  EXPECT_EQ(r.u8(), 0);
  EXPECT_EQ(r.u16(), 0);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.done());
}

TEST(Wire, TrailingBytesAreNotDone) {
  const Bytes b = {0, 1, 2};
  WireReader r(b);
  EXPECT_EQ(r.u16(), 1);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.done());
}

TEST(Wire, StringLengthIsBoundedBeforeItIsRead) {
  // Length 5 against a bound of 4: refused although the bytes are there.
  Bytes b = {0, 5, 'a', 'b', 'c', 'd', 'e'};
  WireReader over(b);
  EXPECT_EQ(over.str16(4), "");
  EXPECT_FALSE(over.ok());
  WireReader at(b);
  EXPECT_EQ(at.str16(5), "abcde");
  EXPECT_TRUE(at.done());
  // A length larger than what is left (65535 with 5 bytes) fails without allocating.
  Bytes huge = {0xff, 0xff, 'a', 'b', 'c', 'd', 'e'};
  WireReader r(huge);
  EXPECT_EQ(r.str16(100000), "");
  EXPECT_FALSE(r.ok());
}

TEST(Wire, OptionalBytesAreAbsentOrExactlyTheirLength) {
  Bytes none = {0};
  WireReader r0(none);
  EXPECT_EQ(r0.opt_bytes8(32), "");
  EXPECT_TRUE(r0.done());
  Bytes wrong = {3, 'a', 'b', 'c'};
  WireReader r1(wrong);
  r1.opt_bytes8(32);
  EXPECT_FALSE(r1.ok());
  Bytes out;
  WireWriter w(out);
  w.opt_bytes8("short", 32);  // any other length is written as absent
  EXPECT_EQ(out, Bytes{0});
}

TEST(Wire, WriterCutsStringsAtTheirBound) {
  Bytes out;
  WireWriter w(out);
  w.str16("abcdef", 3);
  EXPECT_EQ(out, (Bytes{0, 3, 'a', 'b', 'c'}));
  out.clear();
  w.str16(std::string(70000, 'x'), 100000);  // never more than a u16 can say
  EXPECT_EQ(out.size(), 2u + 0xffff);
  EXPECT_EQ(out[0], 0xff);
  EXPECT_EQ(out[1], 0xff);
  out.clear();
  w.zeros(3);
  EXPECT_EQ(out, (Bytes{0, 0, 0}));
}

TEST(Wire, EmptyInput) {
  WireReader r(std::span<const uint8_t>{});
  EXPECT_TRUE(r.done());
  auto none = r.bytes(0);
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(r.done());
  r.u8();
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace aesxfer::proto
