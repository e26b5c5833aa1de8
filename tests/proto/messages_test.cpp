// Control messages: byte-exact layout, round trips, and every malformed input refused.
#include "proto/messages.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/failure.h"
#include "tests/hand_session.h"
#include "tests/test_util.h"

namespace aesxfer::proto {
namespace {

using test::Bytes;

Bytes enc(const Message& m) {
  Bytes b;
  encode(m, b);
  return b;
}

std::vector<Message> samples() {
  std::vector<Message> v;
  Message w;
  w.type = MsgType::welcome;
  w.status = Status::ok;
  w.text = "welcome to aesxfer";
  v.push_back(w);
  Message q;
  q.type = MsgType::request;
  q.op = Op::get;
  q.path = "dir/sub/file name.bin";
  q.size = 0x0102030405060708;
  q.mode = 0640;
  q.mtime = -12345;
  q.offset = 4096;
  q.text = "file name.bin";
  q.flags = kFlagPreserve;
  v.push_back(q);
  Message r;
  r.type = MsgType::response;
  r.status = Status::not_found;
  r.size = 1ull << 40;
  r.mode = 0755;
  r.mtime = 1700000000;
  r.text = "no such file";
  v.push_back(r);
  Message probe;
  probe.type = MsgType::response;
  probe.size = 1234;
  probe.digest = std::string(kPrefixMacLen, '\x5a');
  v.push_back(probe);
  Message res;
  res.type = MsgType::result;
  res.status = Status::integrity;
  res.text = "";
  v.push_back(res);
  Message bye;
  bye.type = MsgType::bye;
  v.push_back(bye);
  return v;
}

bool equal(const Message& a, const Message& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case MsgType::welcome:
    case MsgType::result:
      return a.status == b.status && a.text == b.text;
    case MsgType::request:
      return a.op == b.op && a.path == b.path && a.size == b.size && a.mode == b.mode && a.mtime == b.mtime &&
             a.offset == b.offset && a.text == b.text && a.flags == b.flags;
    case MsgType::response:
      return a.status == b.status && a.size == b.size && a.mode == b.mode && a.mtime == b.mtime &&
             a.text == b.text && a.digest == b.digest;
    case MsgType::bye:
      return true;
  }
  return false;
}

TEST(Messages, RoundTrip) {
  for (const auto& m : samples()) {
    Bytes b = enc(m);
    auto d = decode(b);
    ASSERT_TRUE(d) << int(m.type);
    EXPECT_TRUE(equal(m, *d)) << int(m.type);
  }
}

TEST(Messages, ExactLayout) {
  auto s = samples();
  EXPECT_EQ(test::to_hex(enc(s[0])),
            "01"
            "00"
            "0012" +
                test::to_hex(enc(s[0]).data() + 4, 18));
  EXPECT_EQ(test::to_hex(enc(s[1])),
            "02"
            "02"
            "0015" +
                test::to_hex(reinterpret_cast<const uint8_t*>(s[1].path.data()), 21) +
                "0102030405060708"
                "000001a0"
                "ffffffffffffcfc7"
                "0000000000001000"
                "000d" +
                test::to_hex(reinterpret_cast<const uint8_t*>(s[1].text.data()), 13) + "01");
  EXPECT_EQ(test::to_hex(enc(s[2])),
            "03"
            "02"
            "0000010000000000"
            "000001ed"
            "000000006553f100"
            "000c" +
                test::to_hex(reinterpret_cast<const uint8_t*>(s[2].text.data()), 12) + "00");
  EXPECT_EQ(test::to_hex(enc(s[3])),
            "03"
            "00"
            "00000000000004d2"
            "000001a4"
            "0000000000000000"
            "0000"
            "20" +
                test::to_hex(reinterpret_cast<const uint8_t*>(s[3].digest.data()), 32));
  EXPECT_EQ(test::to_hex(enc(s[4])),
            "0407"
            "0000");
  EXPECT_EQ(test::to_hex(enc(s[5])), "05");
}

TEST(Messages, EveryTruncationAndTrailingByteIsRejected) {
  for (const auto& m : samples()) {
    Bytes b = enc(m);
    for (size_t n = 0; n < b.size(); ++n)
      EXPECT_FALSE(decode(std::span<const uint8_t>(b.data(), n))) << int(m.type) << " len " << n;
    Bytes t = b;
    t.push_back(0);
    EXPECT_FALSE(decode(t)) << int(m.type);
  }
}

TEST(Messages, BadFieldsAreRejected) {
  auto s = samples();
  {
    Bytes b = enc(s[0]);
    b[0] = 0;
    EXPECT_FALSE(decode(b));
    b[0] = 6;
    EXPECT_FALSE(decode(b));
  }
  {
    Bytes b = enc(s[0]);
    b[1] = 13;  // unknown status
    EXPECT_FALSE(decode(b));
  }
  {
    Bytes b = enc(s[1]);
    b[1] = 200;  // unknown op
    EXPECT_FALSE(decode(b));
    b[1] = 0;
    EXPECT_FALSE(decode(b));
  }
  {
    Bytes b = enc(s[1]);
    b.back() = 0x80;  // unknown request flag
    EXPECT_FALSE(decode(b));
  }
  {
    Bytes b = enc(s[3]);
    b[b.size() - 33] = 31;  // digest length other than 0 or 32
    EXPECT_FALSE(decode(b));
  }
  {
    Message q = s[1];
    q.path = std::string("a\0b", 3);
    EXPECT_FALSE(decode(enc(q)));
    q.path = "";
    EXPECT_FALSE(decode(enc(q)));
    q.path = "ok";
    q.text = std::string("x\0y", 3);  // source name: no NUL either
    EXPECT_FALSE(decode(enc(q)));
    q.text = "";
    EXPECT_TRUE(decode(enc(q)));
  }
  {
    Bytes b = enc(s[1]);
    size_t mode_at = 4 + s[1].path.size() + 8;
    b[mode_at + 2] = 0x10;  // mode bit above 07777
    EXPECT_FALSE(decode(b));
  }
  {
    // Length field larger than the payload, and larger than the bound.
    Bytes b = enc(s[0]);
    b[2] = 0xff;
    b[3] = 0xff;
    EXPECT_FALSE(decode(b));
    Bytes big = {1, 0, uint8_t((kMaxMessage + 1) >> 8), uint8_t((kMaxMessage + 1) & 0xff)};
    big.resize(big.size() + kMaxMessage + 1, 'x');
    EXPECT_FALSE(decode(big));
    Bytes ok = {1, 0, uint8_t(kMaxMessage >> 8), uint8_t(kMaxMessage & 0xff)};
    ok.resize(ok.size() + kMaxMessage, 'x');
    EXPECT_TRUE(decode(ok));
  }
  {
    Bytes p = {2, 1, uint8_t((kMaxPath + 1) >> 8), uint8_t((kMaxPath + 1) & 0xff)};
    p.resize(p.size() + kMaxPath + 1 + 30, 'a');
    EXPECT_FALSE(decode(p));
  }
  EXPECT_FALSE(decode(std::span<const uint8_t>()));
}

TEST(Messages, EncodeCutsTextsForPeopleButNeverAPath) {
  // Texts for people are cut to the bound: Welcome, Result, a refusal's Response.
  for (MsgType t : {MsgType::welcome, MsgType::result, MsgType::response}) {
    Message m;
    m.type = t;
    m.status = Status::refused;
    m.text = std::string(kMaxMessage + 100, 'z');
    auto d = decode(enc(m));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->text.size(), kMaxMessage);
  }
  // A path never is (protocol 4, issue 14 item 7): the encoder throws and writes nothing.
  Message q;
  q.type = MsgType::request;
  q.path = std::string(kMaxPath, 'p');
  q.text = std::string(255, 'n');
  q.mode = 0100644;  // file type bits are dropped
  auto d = decode(enc(q));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->path, q.path);
  EXPECT_EQ(d->mode, 0644u);
  Bytes out;
  q.path += 'p';
  EXPECT_THROW(encode(q, out), Failure);
  q.path.pop_back();
  q.text = std::string(kMaxPath + 1, 'n');
  EXPECT_THROW(encode(q, out), Failure);
  try {
    encode(q, out);
  } catch (const Failure& f) {
    EXPECT_EQ(f.status, Status::bad_path);
    EXPECT_NE(std::string(f.what()).find("path too long"), std::string::npos) << f.what();
  }
  EXPECT_TRUE(out.empty());
  // A Response ok names a path (mkdir, list): the longest a server can answer with, a kMaxPath
  // request path, '/' and a 255-byte name, goes whole; over the bound it is refused, not cut.
  Message r;
  r.type = MsgType::response;
  r.status = Status::ok;
  r.text = std::string(kMaxPath, 'd') + "/" + std::string(255, 'n');
  d = decode(enc(r));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, r.text);
  r.text = std::string(kMaxMessage, 'd');
  d = decode(enc(r));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, r.text);
  r.text += 'd';
  EXPECT_THROW(encode(r, out), Failure);
  EXPECT_TRUE(out.empty());
}

// The bounds of protocol 4 (PROTOCOL.md 3.1, 3.2): every control message, at its largest, fits
// the 8264-byte control record (kMaxControl); the text bound is 8192 bytes (1024 in protocol 3).
TEST(Messages, TextBoundOfProtocol4FitsTheControlRecord) {
  EXPECT_EQ(kMaxMessage, 8192u);
  EXPECT_GE(kMaxMessage, kMaxPath + 1 + 255);
  Message resp;
  resp.type = MsgType::response;
  resp.status = Status::ok;
  resp.text = std::string(kMaxMessage, 'x');
  resp.digest = std::string(kPrefixMacLen, 'd');
  resp.tagged = true;
  EXPECT_LE(enc(resp).size(), kMaxControl);
  Message get;
  get.type = MsgType::request;
  get.op = Op::get;
  get.path = std::string(kMaxPath, 'p');
  get.text = std::string(kMaxPath, 'n');
  get.flags = kFlagResume;
  get.digest = std::string(kPrefixMacLen, 'd');
  EXPECT_EQ(enc(get).size(), 8260u);  // without the tag of a pipelined get: see below
  // The decoder takes a text of exactly 8192 bytes and refuses 8193 (with an honest length).
  for (size_t n : {kMaxMessage - 1, kMaxMessage, kMaxMessage + 1}) {
    Bytes b = {3,
               0,
               0,
               0,
               0,
               0,
               0,
               0,
               0,
               0,
               0,
               0,
               1,
               0xa4,
               0,
               0,
               0,
               0,
               0,
               0,
               0,
               0,
               uint8_t(n >> 8),
               uint8_t(n & 0xff)};
    b.resize(b.size() + n, 'x');
    b.push_back(0);  // digest_len
    EXPECT_EQ(bool(decode(b)), n <= kMaxMessage) << n;
  }
}

// Issue 24, F14: the longest request of every kind, and the longest answers, fit kMaxControl,
// which is exactly the longest of all (a pipelined resumed get: 8264 bytes, 4 more than the 8260
// that PROTOCOL.md 3.1 said); the decoder takes each of them whole and refuses a longer payload.
TEST(Messages, LongestMessageOfEveryKindFitsTheControlRecord) {
  EXPECT_EQ(kMaxControl, 8264u);
  size_t longest = 0;
  for (Op op : {Op::put, Op::get, Op::mkdir, Op::probe, Op::commit, Op::stat, Op::list}) {
    const Message m = test::longest_request(op);
    const Bytes b = enc(m);
    SCOPED_TRACE(std::to_string(int(op)) + ": " + std::to_string(b.size()) + " bytes");
    EXPECT_GT(b.size(), 2 * kMaxPath);
    EXPECT_LE(b.size(), kMaxControl);
    auto d = decode(b);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->path, m.path);
    EXPECT_EQ(d->text, m.text);
    EXPECT_EQ(d->flags, m.flags);
    longest = std::max(longest, b.size());
  }
  EXPECT_EQ(longest, kMaxControl);
  const Message get = test::longest_request(Op::get);
  EXPECT_EQ(get.flags, kFlagResume | kFlagAhead);
  EXPECT_EQ(enc(get).size(), 8264u);
  // The longest answers.
  Message resp;
  resp.type = MsgType::response;
  resp.status = Status::refused;
  resp.text = std::string(kMaxMessage, 'x');
  resp.digest = std::string(kPrefixMacLen, 'd');
  resp.tagged = true;
  EXPECT_EQ(enc(resp).size(), 8253u);
  EXPECT_TRUE(decode(enc(resp)));
  for (MsgType t : {MsgType::result, MsgType::welcome}) {
    Message r;
    r.type = t;
    r.status = Status::refused;
    r.text = std::string(kMaxMessage, 'x');
    r.tagged = t == MsgType::result;
    EXPECT_LE(enc(r).size(), kMaxControl);
    EXPECT_TRUE(decode(enc(r)));
  }
  // One byte more than the bound is refused before anything is read.
  Bytes over = enc(get);
  over.push_back(0);
  EXPECT_FALSE(decode(over));
}

// Protocol 4: the unsized flag (bit 4) on a put of size 0, exactly; nothing else may carry it
// (docs/PROTOCOL.md 3.2).
TEST(Messages, UnsizedPutBounds) {
  Message q;
  q.type = MsgType::request;
  q.op = Op::put;
  q.path = "f";
  q.text = "stdin";
  q.mode = 0600;
  q.flags = kFlagUnsized;
  // Byte for byte: flags 0x10 is the last byte, nothing follows it.
  EXPECT_EQ(test::to_hex(enc(q)),
            "0201"
            "000166"
            "0000000000000000"
            "00000180"
            "0000000000000000"
            "0000000000000000"
            "0005737464696e"
            "10");
  auto d = decode(enc(q));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->flags, kFlagUnsized);
  EXPECT_EQ(d->size, 0u);
  q.flags = kFlagUnsized | kFlagPreserve;
  EXPECT_TRUE(decode(enc(q)));
  // A size: refused, whatever it is.
  for (uint64_t size : {uint64_t(1), kMaxAheadSize, ~uint64_t(0)}) {
    Message b = q;
    b.size = size;
    EXPECT_FALSE(decode(enc(b))) << size;
  }
  // Only put.
  for (Op op : {Op::get, Op::mkdir, Op::probe, Op::commit, Op::stat, Op::list}) {
    Message b = q;
    b.op = op;
    EXPECT_FALSE(decode(enc(b))) << int(op);
  }
  // Never with resume, range or ahead (a pipelined put stays bounded by its size).
  for (uint8_t other : {kFlagResume, kFlagRange, kFlagAhead}) {
    Message b = q;
    b.flags = kFlagUnsized | other;
    b.nparts = 1;
    Bytes e = enc(b);
    EXPECT_FALSE(decode(e)) << int(other);
    // The same request without the unsized flag is well formed: the refusal is the flag's.
    e.clear();
    b.flags = other;
    EXPECT_TRUE(decode(enc(b))) << int(other);
  }
  // Every truncation and a trailing byte, as for any message.
  Bytes b = enc(q);
  for (size_t n = 0; n < b.size(); ++n) EXPECT_FALSE(decode(std::span<const uint8_t>(b.data(), n))) << n;
  b.push_back(0);
  EXPECT_FALSE(decode(b));
}

TEST(Messages, StatusNames) {
  for (int s = 0; s <= int(Status::internal); ++s) EXPECT_STRNE(status_name(Status(s)), "unknown status");
  EXPECT_STREQ(status_name(Status::ok), "ok");
}

}  // namespace
}  // namespace aesxfer::proto
