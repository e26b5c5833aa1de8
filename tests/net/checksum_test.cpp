// The negotiated whole-file checksum (docs/PROTOCOL.md 1.2, 3.1, 4.3) and the negotiated record
// size: the XXH3-128 implementations against each other and against the reference `xxh128sum`
// (Debian's xxhash package), the end record's encoding, and the data plane with every checksum and
// record size. End to end through the binary: tests/e2e/checksum_cli_test.cpp.
#include "crypto/checksum.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <thread>

#include "net/conn.h"
#include "net/transfer.h"
#include "proto/end_record.h"
#include "proto/handshake.h"
#include "tests/harness.h"
#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

using crypto::ChecksumAlg;
using crypto::FileChecksum;
using crypto::XxhImpl;

std::string sum_hex(ChecksumAlg a, const uint8_t* p, size_t n, XxhImpl impl = XxhImpl::best) {
  FileChecksum f(a, impl);
  f.update(p, n);
  return f.final().hex();
}

std::vector<XxhImpl> xxh_impls() {
  std::vector<XxhImpl> v;
  for (XxhImpl i : {XxhImpl::sse2, XxhImpl::avx2, XxhImpl::avx512})
    if (crypto::xxh_impl_available(i)) v.push_back(i);
  return v;
}

TEST(Checksum, NamesIdsAndLengths) {
  ChecksumAlg a{};
  ASSERT_TRUE(crypto::find_checksum("XXH128", a));
  EXPECT_EQ(a, ChecksumAlg::xxh128);
  ASSERT_TRUE(crypto::find_checksum("sha256", a));
  EXPECT_EQ(a, ChecksumAlg::sha256);
  ASSERT_TRUE(crypto::find_checksum("none", a));
  EXPECT_EQ(a, ChecksumAlg::none);
  EXPECT_FALSE(crypto::find_checksum("md5", a));
  EXPECT_EQ(uint8_t(ChecksumAlg::none), 0);
  EXPECT_EQ(uint8_t(ChecksumAlg::sha256), 1);
  EXPECT_EQ(uint8_t(ChecksumAlg::xxh128), 2);
  EXPECT_EQ(crypto::checksum_len(ChecksumAlg::xxh128), 16u);
  EXPECT_EQ(crypto::checksum_len(ChecksumAlg::sha256), 32u);
  EXPECT_EQ(crypto::checksum_len(ChecksumAlg::none), 0u);
  EXPECT_TRUE(crypto::checksum_known(2));
  EXPECT_FALSE(crypto::checksum_known(3));
  EXPECT_EQ(crypto::kDefaultChecksum, ChecksumAlg::xxh128);
}

// Known answers. SHA-256 "abc" is FIPS 180-4's example; the XXH3-128 values are what the
// reference xxh128sum 0.8.1 prints (the same values appear in docs/PROTOCOL.md 4.3).
TEST(Checksum, KnownAnswers) {
  const std::string abc = "abc";
  const auto* p = reinterpret_cast<const uint8_t*>(abc.data());
  EXPECT_EQ(sum_hex(ChecksumAlg::sha256, p, 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  for (XxhImpl i : xxh_impls()) {
    SCOPED_TRACE(crypto::xxh_impl_name(i));
    EXPECT_EQ(sum_hex(ChecksumAlg::xxh128, p, 0, i), "99aa06d3014798d86001c324468d497f");
    EXPECT_EQ(sum_hex(ChecksumAlg::xxh128, p, 3, i), "06b05ab6733a618578af5f94892f3950");
  }
  EXPECT_EQ(sum_hex(ChecksumAlg::none, p, 3), "");
}

// The examples of docs/PROTOCOL.md 3.1, 3.6 and 3.9, byte for byte.
TEST(Checksum, ProtocolDocumentExamples) {
  auto end_hex = [](ChecksumAlg a, const std::string& whole, uint64_t len) {
    proto::EndRecord e;
    e.length = len;
    e.checksum.alg = a;
    FileChecksum f(a);
    f.update(whole.data(), whole.size());
    e.checksum = f.final();
    uint8_t buf[proto::kMaxEndPayload];
    return to_hex(buf, proto::encode_end(buf, e));
  };
  EXPECT_EQ(end_hex(ChecksumAlg::xxh128, "", 0),
            "000000000000000002"
            "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(end_hex(ChecksumAlg::sha256, "abc", 3),
            "000000000000000301"
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // A stream resumed at 3 still ends with the checksum of the whole file.
  EXPECT_EQ(end_hex(ChecksumAlg::xxh128, "abcdef", 6),
            "000000000000000602"
            "389197a55db2b2e4da35a6714d34f8a2");
  EXPECT_EQ(end_hex(ChecksumAlg::sha256, "abcdef", 6),
            "000000000000000601"
            "bef57ec7f53a6d40beb640a780a639c83bc29ac8a9816f1fc6c5c6dcd93c4721");
  // Ranges: each its own.
  EXPECT_EQ(end_hex(ChecksumAlg::xxh128, "abc", 3),
            "000000000000000302"
            "06b05ab6733a618578af5f94892f3950");
  EXPECT_EQ(end_hex(ChecksumAlg::xxh128, "def", 3),
            "000000000000000302"
            "09ae900c0bc0d4059be4e73e699ef188");
}

// Every implementation, fed in random pieces, equals the one-shot digest of the portable build,
// over lengths that cross XXH3's internal block (1 KiB stripes, 256-byte buffer) boundaries.
TEST(Checksum, ImplementationsAndSplitsAgree) {
  std::mt19937_64 rng(7);
  Bytes data = random_bytes(rng, 3 << 20);
  for (size_t len :
       {size_t(0), size_t(1), size_t(16), size_t(17), size_t(128), size_t(129), size_t(240), size_t(241),
        size_t(1024), size_t(1025), size_t(65536 + 7), size_t(1 << 20), data.size()}) {
    const std::string ref = sum_hex(ChecksumAlg::xxh128, data.data(), len, XxhImpl::sse2);
    for (XxhImpl i : xxh_impls()) {
      FileChecksum f(ChecksumAlg::xxh128, i);
      size_t at = 0;
      while (at < len) {
        size_t n = std::min<size_t>(len - at, 1 + rng() % 70000);
        f.update(data.data() + at, n);
        at += n;
      }
      EXPECT_EQ(f.final().hex(), ref) << crypto::xxh_impl_name(i) << " len " << len;
    }
  }
}

// A copied state continues where the original was (resume hands the prefix state over).
TEST(Checksum, CopiedStateContinues) {
  std::mt19937_64 rng(9);
  Bytes data = random_bytes(rng, 1 << 20);
  for (ChecksumAlg a : {ChecksumAlg::xxh128, ChecksumAlg::sha256}) {
    FileChecksum prefix(a);
    prefix.update(data.data(), 300001);
    FileChecksum cont = prefix;
    cont.update(data.data() + 300001, data.size() - 300001);
    EXPECT_EQ(cont.final().hex(), sum_hex(a, data.data(), data.size())) << crypto::checksum_name(a);
  }
}

// Against the reference tools on random files (the hex --json prints must equal theirs).
TEST(Checksum, EqualsXxh128sumAndSha256sum) {
  TempDir t;
  std::mt19937_64 rng(11);
  for (size_t len : {size_t(0), size_t(5), size_t(4096), size_t(1000003)}) {
    Bytes d = random_bytes(rng, len);
    fs::path f = t / ("f" + std::to_string(len));
    write_text_file(f, std::string(d.begin(), d.end()));
    EXPECT_EQ(sum_hex(ChecksumAlg::xxh128, d.data(), d.size()), tool_hex("xxh128sum", f)) << len;
    EXPECT_EQ(sum_hex(ChecksumAlg::sha256, d.data(), d.size()), tool_hex("sha256sum", f)) << len;
  }
}

TEST(EndRecord, EncodingAndRefusals) {
  uint8_t buf[proto::kMaxEndPayload];
  for (ChecksumAlg a : {ChecksumAlg::none, ChecksumAlg::sha256, ChecksumAlg::xxh128}) {
    proto::EndRecord e;
    e.length = 0x0102030405060708ull;
    FileChecksum f(a);
    f.update("x", 1);
    e.checksum = f.final();
    size_t n = proto::encode_end(buf, e);
    ASSERT_EQ(n, 9 + crypto::checksum_len(a));
    EXPECT_EQ(to_hex(buf, 9), "0102030405060708" + to_hex(reinterpret_cast<const uint8_t*>(&a), 1));
    auto d = proto::decode_end({buf, n});
    ASSERT_TRUE(d);
    EXPECT_EQ(d->length, e.length);
    EXPECT_EQ(d->checksum.alg, a);
    EXPECT_EQ(d->checksum.hex(), e.checksum.hex());
    // One byte short or long, or an unknown id: refused.
    EXPECT_FALSE(proto::decode_end({buf, n - 1}));
    uint8_t longer[proto::kMaxEndPayload + 1] = {};
    std::memcpy(longer, buf, n);
    EXPECT_FALSE(proto::decode_end({longer, n + 1}));
    buf[8] = 3;
    EXPECT_FALSE(proto::decode_end({buf, n}));
  }
  EXPECT_FALSE(proto::decode_end({buf, 8}));
}

// Two Conns over a 127.0.0.1 socket pair with fixed keys; each side's session parameters can
// differ, as a broken or hostile peer's would.
struct Pair {
  proto::SessionKeys ck, sk;
  std::unique_ptr<net::Conn> client, server;
  Pair(ChecksumAlg csum, uint32_t crec, ChecksumAlg ssum, uint32_t srec) {
    for (auto* k : {&ck, &sk}) {
      k->cipher = crypto::find_cipher("aes128-gcm");
      k->mac = crypto::find_mac("none");
      for (auto* d : {&k->c2s, &k->s2c}) {
        for (size_t i = 0; i < sizeof d->enc; ++i) d->enc[i] = uint8_t(i * 7 + 1);
        for (size_t i = 0; i < sizeof d->mac; ++i) d->mac[i] = uint8_t(i * 5 + 3);
        for (size_t i = 0; i < sizeof d->iv; ++i) d->iv[i] = uint8_t(i + 11);
      }
    }
    ck.checksum = csum;
    ck.record_size = crec;
    sk.checksum = ssum;
    sk.record_size = srec;
    int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(l, 1), 0);
    EXPECT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(l);
    client = std::make_unique<net::Conn>(c, std::chrono::milliseconds(10000), "c");
    server = std::make_unique<net::Conn>(s, std::chrono::milliseconds(10000), "s");
    client->start_records(ck, true);
    server->start_records(sk, false);
  }
};

// Zeros (the /dev/zero source): the expected checksum is that of `size` zero bytes.
std::string zeros_hex(ChecksumAlg a, uint64_t size) {
  Bytes z(size_t(size), 0);
  return sum_hex(a, z.data(), z.size());
}

TEST(DataPlane, EveryChecksumAndRecordSizeVerifies) {
  using Pl = net::StreamOptions::Pipeline;
  for (Pl pl : {Pl::threads, Pl::inline_stage})
    for (ChecksumAlg a : {ChecksumAlg::none, ChecksumAlg::sha256, ChecksumAlg::xxh128})
      for (uint32_t rec : {proto::kMinRecordSize, uint32_t(65536), uint32_t(proto::kDefaultPayload),
                           proto::kMaxRecordSize}) {
        SCOPED_TRACE(std::string(crypto::checksum_name(a)) + " record " + std::to_string(rec) +
                     (pl == Pl::threads ? " threads" : " inline"));
        Pair p(a, rec, a, rec);
        const uint64_t size = 3 * uint64_t(rec) + 5;
        net::StreamOptions so;
        so.pipeline = pl;
        crypto::Checksum sent;
        std::thread tx([&] { sent = net::send_stream(*p.client, -1, size, nullptr, so); });
        crypto::Checksum got = net::recv_stream(*p.server, -1, size, nullptr, so);
        tx.join();
        EXPECT_EQ(got.alg, a);
        EXPECT_EQ(got.hex(), sent.hex());
        EXPECT_EQ(got.hex(), zeros_hex(a, size));
      }
}

TEST(DataPlane, EndRecordWithAnotherChecksumIsRefused) {
  Pair p(ChecksumAlg::none, uint32_t(proto::kDefaultPayload), ChecksumAlg::xxh128,
         uint32_t(proto::kDefaultPayload));
  const uint64_t size = 2 * proto::kDefaultPayload + 1;
  std::thread tx([&] { net::send_stream(*p.client, -1, size, nullptr); });
  try {
    net::recv_stream(*p.server, -1, size, nullptr);
    ADD_FAILURE() << "a stream whose end record names another checksum was accepted";
  } catch (const proto::Failure& e) {
    EXPECT_NE(std::string(e.what()).find("the session agreed on xxh128"), std::string::npos) << e.what();
    EXPECT_EQ(e.status, proto::Status::integrity);
    EXPECT_EQ(e.origin, proto::Origin::local);  // this end refused it: the peer can still be told
  }
  tx.join();
}

TEST(DataPlane, RecordLargerThanAgreedIsRefused) {
  Pair p(ChecksumAlg::xxh128, 65536, ChecksumAlg::xxh128, 16384);
  const uint64_t size = 200000;
  std::thread tx([&] {
    try {
      net::send_stream(*p.client, -1, size, nullptr);
    } catch (const proto::Failure&) {  // the receiver may close first
    }
  });
  try {
    net::recv_stream(*p.server, -1, size, nullptr);
    ADD_FAILURE() << "a record over the agreed size was accepted";
  } catch (const proto::Failure& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the agreed record size"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.origin, proto::Origin::local);
  }
  p.server.reset();
  tx.join();
}

}  // namespace
}  // namespace aesxfer::test
