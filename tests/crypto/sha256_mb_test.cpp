// Multi-buffer SHA-256 / HMAC-SHA256: every implementation this CPU has, forced one at a time,
// against crypto::Sha256 / HmacSha256 and OpenSSL, over random job counts and lengths,
// misaligned buffers, ~1 MiB messages, and RFC 4231 split at every point into the two parts.
#include "crypto/sha256_mb.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <string>
#include <vector>

#include "crypto/cpu.h"
#include "crypto/sha256.h"
#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

using crypto::HmacJob;
using crypto::HmacSha256;
using crypto::Sha256;
using crypto::Sha256Job;
using crypto::ShaMbImpl;

std::vector<ShaMbImpl> mb_impls() {
  std::vector<ShaMbImpl> v{ShaMbImpl::software};
  for (ShaMbImpl i : {ShaMbImpl::shani, ShaMbImpl::avx2x8, ShaMbImpl::avx512x16})
    if (crypto::sha256_mb_impl_available(i)) v.push_back(i);
  return v;
}

std::string name(ShaMbImpl i) { return crypto::sha256_mb_impl_name(i); }

// Each check runs every implementation twice: with the default hand-over of the last lanes to
// the one-stream code, and with the SIMD lanes kept running to the end (idle lanes shadowing).
struct TailMode {
  explicit TailMode(int lanes) { crypto::detail::sha256_mb_set_tail_lanes_for_testing(lanes); }
  ~TailMode() { crypto::detail::sha256_mb_set_tail_lanes_for_testing(0); }
  TailMode(const TailMode&) = delete;
  TailMode& operator=(const TailMode&) = delete;
};
const int kTailModes[] = {0, 1};

Bytes openssl_sha256(const uint8_t* p, size_t n) {
  Bytes out(32);
  SHA256(p, n, out.data());
  return out;
}

Bytes openssl_hmac(const Bytes& key, const Bytes& msg) {
  Bytes out(32);
  size_t len = 0;
  static const uint8_t kEmpty = 0;
  EXPECT_NE(
      EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key.empty() ? &kEmpty : key.data(), key.size(),
                msg.empty() ? &kEmpty : msg.data(), msg.size(), out.data(), out.size(), &len),
      nullptr);
  return out;
}

// A random length that often lands near the padding and block boundaries.
size_t random_len(std::mt19937_64& rng, size_t max) {
  if (rng() % 3 == 0) {
    static const size_t kEdges[] = {0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 129, 191, 192};
    return kEdges[rng() % std::size(kEdges)];
  }
  return rng() % (max + 1);
}

// Messages with the given lengths at odd offsets of one buffer; digests at odd offsets too.
struct Messages {
  Bytes buf, outs;
  std::vector<size_t> off, len;
  Messages(std::mt19937_64& rng, const std::vector<size_t>& lens) : len(lens) {
    size_t total = 0;
    for (size_t l : lens) {
      total += 1 + rng() % 7;
      off.push_back(total);
      total += l;
    }
    buf = random_bytes(rng, total + 1);
    outs.assign(lens.size() * 33 + 1, 0);
  }
  const uint8_t* data(size_t i) const { return buf.data() + off[i]; }
  uint8_t* out(size_t i) { return outs.data() + 1 + 33 * i; }
  std::vector<Sha256Job> jobs() {
    std::vector<Sha256Job> j;
    for (size_t i = 0; i < len.size(); ++i) j.push_back({data(i), len[i], out(i)});
    return j;
  }
};

void check_hashes(std::mt19937_64& rng, const std::vector<size_t>& lens, bool with_openssl) {
  Messages m(rng, lens);
  std::vector<Bytes> want;
  for (size_t i = 0; i < lens.size(); ++i) {
    Bytes w(32);
    Sha256::digest(m.data(i), lens[i], w.data(), crypto::ShaImpl::software);
    if (with_openssl) {
      ASSERT_EQ(to_hex(w), to_hex(openssl_sha256(m.data(i), lens[i]))) << "len " << lens[i];
    }
    want.push_back(w);
  }
  for (int tail : kTailModes) {
    for (ShaMbImpl impl : mb_impls()) {
      const TailMode mode(tail);
      std::fill(m.outs.begin(), m.outs.end(), 0);
      auto jobs = m.jobs();
      crypto::sha256_many_with(impl, jobs.data(), jobs.size());
      for (size_t i = 0; i < lens.size(); ++i)
        ASSERT_EQ(to_hex(m.out(i), 32), to_hex(want[i]))
            << name(impl) << " tail " << tail << " job " << i << " of " << lens.size() << " len " << lens[i];
    }
  }
}

TEST(Sha256Mb, ImplNames) {
  const std::string best = crypto::sha256_mb_impl_name();
  EXPECT_TRUE(best == "avx512x16" || best == "avx2x8" || best == "shani" || best == "software") << best;
  EXPECT_EQ(best, name(ShaMbImpl::best));
  EXPECT_EQ(name(ShaMbImpl::software), "software");
  for (ShaMbImpl i : mb_impls()) EXPECT_NE(name(i), "") << int(i);
  EXPECT_EQ(std::string(crypto::sha256_mb_impl_name(crypto::dispatch(crypto::Impl::portable).sha256_mb)),
            "software");
}

TEST(Sha256Mb, NoJobsAndOneJob) {
  for (ShaMbImpl impl : mb_impls()) {
    crypto::sha256_many_with(impl, nullptr, 0);
    uint8_t out[32];
    Sha256Job j{nullptr, 0, out};
    crypto::sha256_many_with(impl, &j, 1);
    EXPECT_EQ(to_hex(out, 32), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        << name(impl);
  }
}

TEST(Sha256Mb, RandomJobs) {
  std::mt19937_64 rng(0x3b256);
  for (int trial = 0; trial < 40; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::vector<size_t> lens(1 + rng() % 40);
    for (size_t& l : lens) l = random_len(rng, 5000);
    check_hashes(rng, lens, true);
  }
}

TEST(Sha256Mb, EqualLengthsFillEveryLane) {
  std::mt19937_64 rng(0x3b257);
  for (size_t n : {8, 15, 16, 17, 24, 32, 33}) {
    SCOPED_TRACE("n " + std::to_string(n));
    check_hashes(rng, std::vector<size_t>(n, 1000), false);
  }
}

TEST(Sha256Mb, LargeMessages) {
  std::mt19937_64 rng(0x3b258);
  std::vector<size_t> lens{size_t(1) << 20, (size_t(1) << 20) + 13, (size_t(1) << 20) - 1};
  for (int i = 0; i < 14; ++i)
    lens.push_back(i % 2 ? random_len(rng, 5000) : (size_t(1) << 20) - rng() % 70000);
  check_hashes(rng, lens, true);
}

TEST(Sha256Mb, ManyJobsAcrossChunks) {
  std::mt19937_64 rng(0x3b259);
  std::vector<size_t> lens(600);
  for (size_t& l : lens) l = random_len(rng, 700);
  check_hashes(rng, lens, false);
}

// HMAC: jobs split into (p1, p2) at the given points of each message.
struct HmacCase {
  Bytes key;
  std::vector<Bytes> msgs;
};

void check_hmac(std::mt19937_64& rng, const HmacCase& c, const std::vector<size_t>& split,
                const std::vector<Bytes>* expect) {
  HmacSha256 h(c.key.data(), c.key.size());
  std::vector<Bytes> want;
  for (size_t i = 0; i < c.msgs.size(); ++i) {
    Bytes w(32);
    h.mac(c.msgs[i].data(), c.msgs[i].size(), w.data());
    if (expect) {
      const Bytes& e = (*expect)[i];  // RFC 4231 case 5 gives a 128-bit prefix
      ASSERT_EQ(to_hex(w.data(), e.size()), to_hex(e));
    } else {
      ASSERT_EQ(to_hex(w), to_hex(openssl_hmac(c.key, c.msgs[i])));
    }
    want.push_back(w);
  }
  // Both parts copied to odd offsets of separate buffers.
  std::vector<Bytes> store;
  std::vector<size_t> off;
  for (size_t i = 0; i < c.msgs.size(); ++i) {
    const size_t o = 1 + rng() % 7;
    Bytes b(o + c.msgs[i].size() + 8 + o);
    std::copy(c.msgs[i].begin(), c.msgs[i].begin() + long(split[i]), b.begin() + long(o));
    std::copy(c.msgs[i].begin() + long(split[i]), c.msgs[i].end(), b.begin() + long(o + split[i] + o));
    store.push_back(std::move(b));
    off.push_back(o);
  }
  for (int tail : kTailModes) {
    for (ShaMbImpl impl : mb_impls()) {
      const TailMode mode(tail);
      Bytes tags(33 * c.msgs.size() + 1);
      std::vector<HmacJob> jobs;
      for (size_t i = 0; i < c.msgs.size(); ++i) {
        const uint8_t* base = store[i].data() + off[i];
        const size_t l2 = c.msgs[i].size() - split[i];
        jobs.push_back({split[i] ? base : nullptr, split[i], l2 ? base + split[i] + off[i] : nullptr, l2,
                        tags.data() + 1 + 33 * i});
      }
      crypto::hmac_sha256_many_with(impl, h, jobs.data(), jobs.size());
      for (size_t i = 0; i < c.msgs.size(); ++i)
        ASSERT_EQ(to_hex(jobs[i].tag, 32), to_hex(want[i]))
            << name(impl) << " tail " << tail << " job " << i << " len1 " << jobs[i].len1 << " len2 "
            << jobs[i].len2;
    }
  }
}

TEST(Sha256Mb, HmacRfc4231EverySplit) {
  std::mt19937_64 rng(0x4231);
  const auto recs = load_vectors("hmac_sha256.txt");
  ASSERT_EQ(recs.size(), 7u);
  for (const auto& r : recs) {
    SCOPED_TRACE("case " + r.at("case"));
    HmacCase c{hex(r.at("key")), {}};
    const Bytes data = hex(r.at("data")), tag = hex(r.at("tag"));
    std::vector<size_t> split;
    std::vector<Bytes> expect;
    for (size_t s = 0; s <= data.size(); ++s) {
      c.msgs.push_back(data);
      split.push_back(s);
      expect.push_back(tag);
    }
    check_hmac(rng, c, split, &expect);
  }
}

TEST(Sha256Mb, HmacRandomJobs) {
  std::mt19937_64 rng(0x4232);
  for (int trial = 0; trial < 30; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    HmacCase c{random_bytes(rng, rng() % 3 == 0 ? 65 + rng() % 100 : rng() % 65), {}};
    std::vector<size_t> split;
    const size_t n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      const size_t len1 = rng() % 2 ? 16 : random_len(rng, 200);
      const size_t len2 = random_len(rng, 5000);
      c.msgs.push_back(random_bytes(rng, len1 + len2));
      split.push_back(len1);
    }
    check_hmac(rng, c, split, nullptr);
  }
}

TEST(Sha256Mb, HmacLargeRecords) {
  std::mt19937_64 rng(0x4233);
  HmacCase c{random_bytes(rng, 32), {}};
  std::vector<size_t> split;
  for (int i = 0; i < 18; ++i) {
    c.msgs.push_back(random_bytes(rng, 16 + (size_t(1) << 20) - (i % 3 ? rng() % 5000 : 0)));
    split.push_back(16);
  }
  check_hmac(rng, c, split, nullptr);
}

}  // namespace
}  // namespace aesxfer::test
