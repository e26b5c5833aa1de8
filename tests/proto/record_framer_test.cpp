// proto/record_reader.h: RecordFramer, the framer the connection reads every record with, fed
// the way net/conn.cpp feeds it (reads of at most want() bytes into one buffer).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "crypto/suite.h"
#include "crypto/util.h"
#include "proto/error.h"
#include "proto/record.h"
#include "proto/record_reader.h"

namespace aesxfer::proto {
namespace {

using Bytes = std::vector<uint8_t>;

DirectionKeys keys() {
  DirectionKeys k{};
  for (size_t i = 0; i < 32; ++i) k.enc[i] = uint8_t(i), k.mac[i] = uint8_t(0x20 + i);
  for (size_t i = 0; i < 16; ++i) k.iv[i] = uint8_t(0x40 + i);
  return k;
}

struct Pair {
  RecordSealer s;
  RecordOpener o;
  Pair(const char* cipher, const char* mac)
      : s(*crypto::find_cipher(cipher), *crypto::find_mac(mac), keys()),
        o(*crypto::find_cipher(cipher), *crypto::find_mac(mac), keys()) {}
  Bytes seal(RecordType t, size_t len) {
    Bytes b(len + s.max_overhead(), 0x5a);
    b.resize(s.seal(t, t == RecordType::end ? kFlagFinal : 0, b.data(), len));
    return b;
  }
};

struct Framed {
  std::vector<size_t> lengths;
  std::error_code ec;
  size_t max_asked = 0;  // the most bytes want() ever asked for
};

// Frames `stream` as Conn::read_record does, each read returning at most `chunk` bytes; checks
// that no read goes past a record's end and opens each record in place.
Framed frame(Pair& p, const Bytes& stream, size_t chunk) {
  Framed out;
  RecordFramer f(p.o);
  Bytes rec(kMaxRecord);
  size_t off = 0;
  while (off < stream.size()) {
    const size_t want = f.want();
    out.max_asked = std::max(out.max_asked, want);
    const size_t n = std::min({want, chunk, stream.size() - off});
    std::memcpy(rec.data() + f.have(), stream.data() + off, n);
    off += n;
    const auto st = f.added(rec.data(), n, out.ec);
    if (st == RecordFramer::Status::error) return out;
    if (st == RecordFramer::Status::record) {
      RecordHeader h{};
      std::span<uint8_t> payload;
      EXPECT_FALSE(p.o.open(rec.data(), f.length(), h, payload));
      EXPECT_EQ(h.type, f.header().type);
      out.lengths.push_back(f.length());
    }
  }
  EXPECT_FALSE(f.mid_record());
  return out;
}

TEST(RecordFramer, FramesEveryRecordAtEveryReadSize) {
  for (auto [cipher, mac] : {std::pair{"aes128-gcm", "none"}, std::pair{"aes128-cbc", "hmac-sha256"},
                             std::pair{"none", "none"}, std::pair{"arcfour", "hmac-sha256"}}) {
    for (size_t chunk : {size_t(1), size_t(3), size_t(8), size_t(4096), kMaxRecord}) {
      Pair p(cipher, mac);
      Bytes stream;
      std::vector<size_t> expect;
      for (size_t len : {size_t(0), size_t(1), size_t(100), size_t(70000), size_t(0), size_t(40)}) {
        Bytes r = p.seal(len == 40 ? RecordType::end : RecordType::data, len);
        expect.push_back(r.size());
        stream.insert(stream.end(), r.begin(), r.end());
      }
      Framed got = frame(p, stream, chunk);
      EXPECT_FALSE(got.ec) << cipher << " chunk " << chunk << ": " << got.ec.message();
      EXPECT_EQ(got.lengths, expect) << cipher << " chunk " << chunk;
      EXPECT_LE(got.max_asked, 70000 + p.s.max_overhead());
    }
  }
}

// A header that fails its checks is refused before one byte of the body is asked for.
TEST(RecordFramer, BadHeaderRefusedBeforeTheBody) {
  Pair p("aes128-cbc", "hmac-sha256");
  struct Case {
    uint32_t len;
    uint8_t type, flags;
    errc e;
  };
  for (const Case& c :
       {Case{uint32_t(kMaxBody + 16), 1, 0, errc::record_too_large}, Case{32, 4, 0, errc::bad_record_type},
        Case{32, 3, 0, errc::bad_record_type}, Case{17, 1, 0, errc::bad_record_length}}) {
    Bytes h(kHeaderLen, 0);
    crypto::store_be32(h.data(), c.len);
    h[4] = c.type;
    h[5] = c.flags;
    RecordFramer f(p.o);
    std::error_code ec;
    EXPECT_EQ(f.want(), kHeaderLen);
    EXPECT_EQ(f.added(h.data(), 7, ec), RecordFramer::Status::need_more);
    EXPECT_EQ(f.added(h.data(), 1, ec), RecordFramer::Status::error);
    EXPECT_EQ(ec, make_error_code(c.e));
    EXPECT_EQ(f.want(), 0u) << "nothing more is read after a bad header";
    // Sticky.
    EXPECT_EQ(f.added(h.data(), 0, ec), RecordFramer::Status::error);
    EXPECT_EQ(ec, make_error_code(c.e));
  }
}

TEST(RecordFramer, WantsTheHeaderThenExactlyTheRest) {
  Pair p("aes128-gcm", "none");
  Bytes r = p.seal(RecordType::data, 1000);
  RecordFramer f(p.o);
  std::error_code ec;
  EXPECT_EQ(f.want(), kHeaderLen);
  EXPECT_FALSE(f.mid_record());
  EXPECT_EQ(f.added(r.data(), kHeaderLen, ec), RecordFramer::Status::need_more);
  EXPECT_TRUE(f.mid_record());
  EXPECT_EQ(f.have(), kHeaderLen);
  EXPECT_EQ(f.want(), 1000u + 16);
  EXPECT_EQ(f.added(r.data(), 1015, ec), RecordFramer::Status::need_more);
  EXPECT_EQ(f.want(), 1u);
  EXPECT_EQ(f.added(r.data(), 1, ec), RecordFramer::Status::record);
  EXPECT_EQ(f.length(), r.size());
  EXPECT_EQ(f.header().body_len, 1000u);
  EXPECT_FALSE(f.mid_record());
  EXPECT_EQ(f.want(), kHeaderLen) << "starts on the next record";
}

}  // namespace
}  // namespace aesxfer::proto
