// recv -r and recv --resume on the wire (docs/PROTOCOL.md, "Listing" and "Resumed get"): listing
// pages byte by byte, their strict decoder, the list op and the digest a get with the resume
// flag carries.
#include "proto/listing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/messages.h"
#include "tests/test_util.h"

namespace aesxfer::proto {
namespace {

using test::Bytes;

Bytes enc_page(const ListPage& p) {
  Bytes b;
  encode_list_page(p, b);
  return b;
}

Bytes enc(const Message& m) {
  Bytes b;
  encode(m, b);
  return b;
}

ListPage sample_page() {
  ListPage p;
  p.last = true;
  p.entries.push_back({EntryType::dir, "sub", 0, 0750, 1500000000});
  p.entries.push_back({EntryType::file, "sub/a b.bin", 0x0102030405060708, 0644, -2});
  p.entries.push_back({EntryType::symlink, "sub/link", 0, 0777, 1});
  p.entries.push_back({EntryType::other, "fifo", 0, 0600, 2});
  return p;
}

std::string hex_of(const std::string& s) {
  return test::to_hex(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(Listing, ExactLayout) {
  ListPage p;
  p.last = false;
  p.entries.push_back({EntryType::file, "d/f", 300001, 0640, 1700000000});
  EXPECT_EQ(test::to_hex(enc_page(p)),
            "06"
            "00"
            "0001"
            "01"
            "0003" +
                hex_of("d/f") +
                "00000000000493e1"
                "000001a0"
                "000000006553f100");
  ListPage empty;
  empty.last = true;
  EXPECT_EQ(test::to_hex(enc_page(empty)), "06010000");
  EXPECT_EQ(list_entry_size(p.entries[0]), kListEntryFixed + 3);
  EXPECT_EQ(enc_page(p).size(), kListPageHeader + list_entry_size(p.entries[0]));
}

TEST(Listing, RoundTrip) {
  ListPage p = sample_page();
  auto d = decode_list_page(enc_page(p));
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->last);
  ASSERT_EQ(d->entries.size(), p.entries.size());
  for (size_t i = 0; i < p.entries.size(); ++i) {
    EXPECT_EQ(d->entries[i].type, p.entries[i].type);
    EXPECT_EQ(d->entries[i].path, p.entries[i].path);
    EXPECT_EQ(d->entries[i].size, p.entries[i].size);
    EXPECT_EQ(d->entries[i].mode, p.entries[i].mode);
    EXPECT_EQ(d->entries[i].mtime, p.entries[i].mtime);
  }
}

TEST(Listing, EveryTruncationAndTrailingByteIsRejected) {
  Bytes b = enc_page(sample_page());
  for (size_t n = 0; n < b.size(); ++n)
    EXPECT_FALSE(decode_list_page(std::span<const uint8_t>(b.data(), n))) << n;
  b.push_back(0);
  EXPECT_FALSE(decode_list_page(b));
}

TEST(Listing, BadFieldsAreRejected) {
  Bytes good = enc_page(sample_page());
  auto bad = [&](size_t at, uint8_t v) {
    Bytes b = good;
    b[at] = v;
    return !decode_list_page(b);
  };
  EXPECT_TRUE(bad(0, 5));  // not a page
  EXPECT_TRUE(bad(1, 2));  // unknown flag
  EXPECT_TRUE(bad(1, 0x81));
  EXPECT_TRUE(bad(3, 5));  // count beyond the entries present
  EXPECT_TRUE(bad(4, 0));  // entry type 0
  EXPECT_TRUE(bad(4, 7));  // entry type 7 (5 and 6 are protocol 5's)
  // A count the payload cannot possibly hold is refused before anything is reserved.
  EXPECT_FALSE(decode_list_page(Bytes{6, 1, 0xff, 0xff}));
  // A page over kMaxListPage.
  Bytes big = {6, 1, 0, 0};
  big.resize(kMaxListPage + 1);
  EXPECT_FALSE(decode_list_page(big));
  // Paths a receiver must never create.
  for (const std::string& path :
       std::vector<std::string>{"", "/etc/passwd", "..", "a/../b", "a/./b", ".", "a//b", "a/", "./a",
                                std::string("a\0b", 3), std::string("a\nb"), std::string("a\rb")}) {
    ListPage p;
    p.entries.push_back({EntryType::file, path, 1, 0644, 0});
    EXPECT_FALSE(decode_list_page(enc_page(p)))
        << test::to_hex(reinterpret_cast<const uint8_t*>(path.data()), path.size());
  }
  for (const std::string& path :
       std::vector<std::string>{"a", "a/b", ".hidden", "..a", "a..", "a/.b/c", std::string(kMaxPath, 'x')}) {
    ListPage p;
    p.entries.push_back({EntryType::file, path, 1, 0644, 0});
    EXPECT_TRUE(decode_list_page(enc_page(p))) << path;
  }
  {
    // A directory (or symlink) with a size, and mode bits above 07777.
    for (auto t : {EntryType::dir, EntryType::symlink, EntryType::other, EntryType::unreadable_dir}) {
      Bytes b = enc_page(ListPage{false, {{EntryType::file, "x", 7, 0644, 0}}});
      b[4] = uint8_t(t);
      EXPECT_FALSE(decode_list_page(b)) << int(t);
    }
    Bytes b = enc_page(ListPage{false, {{EntryType::file, "x", 7, 0644, 0}}});
    b[4 + 3 + 1 + 8 + 2] = 0x10;
    EXPECT_FALSE(decode_list_page(b));
  }
  {
    // Path length over kMaxPath even if the bytes are there.
    Bytes b = {6, 1, 0, 1, 1, uint8_t((kMaxPath + 1) >> 8), uint8_t((kMaxPath + 1) & 0xff)};
    b.resize(b.size() + kMaxPath + 1 + 20, 'a');
    EXPECT_FALSE(decode_list_page(b));
  }
}

// Protocol 5: a directory the server cannot read (type 5, like a directory: no size) and the
// count of names left out of a directory (type 6: its path, or "." for the listed one, and a
// count of at least one in the size field), byte by byte and with their own rules.
TEST(Listing, WhatTheServerCouldNotListHasItsOwnKinds) {
  ListPage p;
  p.last = true;
  p.entries.push_back({EntryType::left_out, ".", 2, 0, 0});
  p.entries.push_back({EntryType::unreadable_dir, "locked", 0, 0700, 1});
  EXPECT_EQ(test::to_hex(enc_page(p)),
            "06010002"
            "060001"
            "2e"
            "0000000000000002"
            "00000000"
            "0000000000000000"
            "050006"
            "6c6f636b6564"
            "0000000000000000"
            "000001c0"
            "0000000000000001");
  auto d = decode_list_page(enc_page(p));
  ASSERT_TRUE(d);
  EXPECT_EQ(enc_page(*d), enc_page(p));  // every field came back (the layout above names them)
  EXPECT_TRUE(decode_list_page(enc_page(ListPage{true, {{EntryType::left_out, "a/b", 1, 0, 0}}})));
  // A count of none; "." for any other kind; the paths no kind may carry.
  EXPECT_FALSE(decode_list_page(enc_page(ListPage{true, {{EntryType::left_out, "a", 0, 0, 0}}})));
  for (auto t : {EntryType::file, EntryType::dir, EntryType::unreadable_dir, EntryType::symlink})
    EXPECT_FALSE(decode_list_page(enc_page(ListPage{true, {{t, ".", 0, 0, 0}}}))) << int(t);
  for (const char* path : {"..", "a/.", "/a", "a/"})
    EXPECT_FALSE(decode_list_page(enc_page(ListPage{true, {{EntryType::left_out, path, 1, 0, 0}}}))) << path;
}

TEST(Listing, PagesOfLongPathsFitTheBound) {
  // The server fills a page while list_entry_size() keeps it within kMaxListPage: at least three
  // entries of the longest path fit one page.
  ListPage p;
  for (int i = 0; i < 3; ++i)
    p.entries.push_back({EntryType::file, std::string(kMaxPath, char('a' + i)), 1, 0644, 0});
  Bytes b = enc_page(p);
  EXPECT_LE(b.size(), kMaxListPage);
  EXPECT_TRUE(decode_list_page(b));
}

TEST(Listing, ListOpAndReservedValues) {
  Message q;
  q.type = MsgType::request;
  q.op = Op::list;
  q.path = "photos";
  Bytes b = enc(q);
  EXPECT_EQ(b[1], 7);
  auto d = decode(b);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->op, Op::list);
  EXPECT_TRUE(valid_op(7));
  EXPECT_FALSE(valid_op(0));
  EXPECT_FALSE(valid_op(8));
  // A listing page is not a Message.
  EXPECT_FALSE(decode(enc_page(sample_page())));
}

TEST(ResumedGet, RequestCarriesTheDigest) {
  Message q;
  q.type = MsgType::request;
  q.op = Op::get;
  q.path = "f";
  q.offset = 1000;
  q.flags = kFlagResume;
  q.digest = std::string(kPrefixMacLen, '\x11');
  Bytes b = enc(q);
  EXPECT_EQ(test::to_hex(b),
            "02"
            "02"
            "0001"
            "66"
            "0000000000000000"
            "000001a4"
            "0000000000000000"
            "00000000000003e8"
            "0000"
            "02"
            "20" +
                std::string(64, '1'));
  auto d = decode(b);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->digest, q.digest);
  EXPECT_EQ(d->offset, 1000u);
  for (size_t n = 0; n < b.size(); ++n) EXPECT_FALSE(decode(std::span<const uint8_t>(b.data(), n))) << n;
  Bytes t = b;
  t.push_back(0);
  EXPECT_FALSE(decode(t));
  t = b;
  t[t.size() - 33] = 31;  // digest length other than 0 or 32
  EXPECT_FALSE(decode(t));
  // No digest yet (nothing kept): a zero length byte.
  q.digest.clear();
  q.offset = 0;
  b = enc(q);
  EXPECT_EQ(b.back(), 0);
  d = decode(b);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->digest.empty());
  // Without the flag (or for a put with the flag) nothing follows the flags byte.
  q.flags = 0;
  q.digest = std::string(kPrefixMacLen, '\x11');
  b = enc(q);
  EXPECT_EQ(b.back(), 0);  // flags
  EXPECT_EQ(b.size(), 4 + 1 + 8 + 4 + 8 + 8 + 2 + 1u);
  q.op = Op::put;
  q.flags = kFlagResume;
  b = enc(q);
  EXPECT_EQ(b.back(), kFlagResume);
  d = decode(b);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->digest.empty());
}

}  // namespace
}  // namespace aesxfer::proto
