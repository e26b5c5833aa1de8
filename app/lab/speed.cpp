// `aesxfer speed`, modelled on `openssl speed -evp`.
//
// What one cell measures: the raw primitive over ONE buffer of the column's size, called again and
// again for `seconds` of wall-clock time (std::chrono::steady_clock), after a short warm-up. The
// figure is payload bytes processed per second in MB/s, 1 MB = 10^6 bytes (openssl prints the
// same quantity in "1000s of bytes per second"). Every call starts a new message with a fresh IV /
// nonce / counter, so per-call set-up is part of the cost, as it is per record on the wire:
//
//   aes128-cbc   enc/dec   BlockCipher::cbc_encrypt / cbc_decrypt, in place, fresh IV per call
//   aes128-cbc   enc xN lanes   BlockCipher::cbc_encrypt_lanes over N independent buffers of the
//                          column's size (what the record layer does across records); aggregate MB/s
//   aes128-ctr   enc/dec   BlockCipher::ctr_xor, in place, fresh counter block per call
//   aes128-gcm   enc       Aes128Gcm::seal with a 13-byte AAD (as `openssl speed -aead`), tag included
//                dec       Aes128Gcm::open of a sealed buffer (the tag is checked every call)
//   blowfish-cbc enc/dec   Blowfish CBC through the BlockCipher interface, fresh IV per call
//   arcfour      enc/dec   Rc4::xor_stream, key set once (the key schedule is not timed)
//   none         enc/dec   memcpy between two buffers (the floor any cipher is compared with)
//   hmac-sha256            HmacSha256::mac over the buffer (pads precomputed once per key)
//   sha256                 Sha256::digest over the buffer (a file checksum, and HMAC's hash)
//   xxh128                 XXH3-128 over the buffer (the default file checksum)
//
// Buffers are 64-byte aligned and touched before timing. The clock is read once per batch of
// calls, the batch sized during warm-up so that one batch takes about 100 microseconds: small
// buffers do not pay for clock reads, large ones do not overshoot the cell.
// --multi N: N threads, each with its own cipher objects and buffers, released together by a
// barrier; the bytes of all threads are summed and divided by the common wall time (from the
// release to the last thread's end).
#include "app/lab/speed.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "app/json.h"
#include "app/lab/svg.h"
#include "crypto/aes.h"
#include "crypto/blowfish.h"
#include "crypto/checksum.h"
#include "crypto/cpu.h"
#include "crypto/gcm.h"
#include "crypto/rc4.h"
#include "crypto/sha256.h"
#include "crypto/suite.h"

namespace aesxfer::app {
namespace {

namespace cr = aesxfer::crypto;
using Clock = std::chrono::steady_clock;

// A fixed benchmark key (no secret is involved); 56 bytes covers Blowfish's longest key.
constexpr uint8_t kKey[56] = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88,
                              0x09, 0xcf, 0x4f, 0x3c, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                              0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13,
                              0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
                              0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27};
constexpr size_t kAadLen = 13;  // TLS-like record header, as `openssl speed -aead` uses

// Keeps the optimiser from dropping work whose result nobody reads (memcpy, digests).
inline void clobber(const void* p) noexcept { __asm__ volatile("" : : "r"(p) : "memory"); }

struct FreeDeleter {
  void operator()(uint8_t* p) const noexcept { std::free(p); }
};
using Buf = std::unique_ptr<uint8_t, FreeDeleter>;

// 64-byte aligned, every byte written so that page faults happen before the clock starts.
Buf alloc_buf(size_t n) {
  const size_t sz = (std::max<size_t>(n, 1) + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, sz));
  if (!p) throw std::bad_alloc();
  for (size_t i = 0; i < sz; ++i) p[i] = uint8_t(i * 131 + 7);
  return Buf(p);
}

// A fresh IV or counter block: a per-call counter in the first 8 bytes, the rest fixed.
inline void fresh_iv(uint8_t* iv, size_t n, uint64_t& counter) noexcept {
  std::memset(iv, 0x5a, n);
  const uint64_t c = counter++;
  std::memcpy(iv, &c, std::min<size_t>(n, sizeof c));
}

// One benchmarked operation over one buffer; once() is the timed call.
class Op {
 public:
  virtual ~Op() = default;
  virtual void once() noexcept = 0;
  // Payload bytes one call processes (0: the size does not fit this cipher, the cell is skipped).
  size_t bytes() const noexcept { return bytes_; }
  // False when a built-in self-check failed during the run (GCM open rejecting its own tag).
  virtual bool ok() const noexcept { return true; }

 protected:
  size_t bytes_ = 0;
};

class CbcOp final : public Op {
 public:
  CbcOp(std::unique_ptr<cr::BlockCipher> bc, size_t size, bool dec) : bc_(std::move(bc)), dec_(dec) {
    bs_ = bc_->block_size();
    blocks_ = size / bs_;
    bytes_ = blocks_ * bs_;
    buf_ = alloc_buf(size);
  }
  void once() noexcept override {
    fresh_iv(iv_, bs_, n_);
    if (dec_)
      bc_->cbc_decrypt(iv_, buf_.get(), buf_.get(), blocks_);
    else
      bc_->cbc_encrypt(iv_, buf_.get(), buf_.get(), blocks_);
  }

 private:
  std::unique_ptr<cr::BlockCipher> bc_;
  bool dec_;
  size_t bs_ = 16, blocks_ = 0;
  Buf buf_;
  uint64_t n_ = 0;
  alignas(16) uint8_t iv_[16] = {};
};

class CbcLanesOp final : public Op {
 public:
  CbcLanesOp(std::unique_ptr<cr::BlockCipher> bc, size_t size, size_t lanes)
      : bc_(std::move(bc)), lanes_(lanes), ivs_(lanes * 16), chains_(lanes) {
    bs_ = bc_->block_size();
    blocks_ = size / bs_;
    // Lanes whose buffers share a 4 KiB page offset run several times slower (4K aliasing of the
    // interleaved loads and stores): stagger them by 9 cache lines, as the record layer does.
    stride_ = (size + 63) / 64 * 64 + 576;
    bytes_ = lanes * blocks_ * bs_;
    buf_ = alloc_buf(stride_ * lanes);
  }
  void once() noexcept override {
    for (size_t i = 0; i < lanes_; ++i) {
      uint8_t* p = buf_.get() + i * stride_;
      fresh_iv(&ivs_[i * 16], bs_, n_);
      chains_[i] = cr::CbcLane{&ivs_[i * 16], p, p, blocks_};
    }
    bc_->cbc_encrypt_lanes(chains_.data(), lanes_);
  }

 private:
  std::unique_ptr<cr::BlockCipher> bc_;
  size_t lanes_, blocks_ = 0, stride_ = 0, bs_ = 16;
  std::vector<uint8_t> ivs_;
  std::vector<cr::CbcLane> chains_;
  Buf buf_;
  uint64_t n_ = 0;
};

class CtrOp final : public Op {
 public:
  CtrOp(std::unique_ptr<cr::BlockCipher> bc, size_t size) : bc_(std::move(bc)) {
    bytes_ = size;
    buf_ = alloc_buf(size);
  }
  void once() noexcept override {
    fresh_iv(ctr_, 16, n_);
    std::memset(ctr_ + 12, 0, 4);  // nonce || 32-bit block counter, as GCM and ssh's CTR start
    bc_->ctr_xor(ctr_, buf_.get(), buf_.get(), bytes_);
  }

 private:
  std::unique_ptr<cr::BlockCipher> bc_;
  Buf buf_;
  uint64_t n_ = 0;
  alignas(16) uint8_t ctr_[16] = {};
};

class GcmSealOp final : public Op {
 public:
  GcmSealOp(std::unique_ptr<cr::Aes128Gcm> g, size_t size) : g_(std::move(g)) {
    bytes_ = size;
    buf_ = alloc_buf(size);
    std::memset(aad_, 0x17, sizeof aad_);
  }
  void once() noexcept override {
    fresh_iv(nonce_, sizeof nonce_, n_);
    g_->seal(nonce_, aad_, kAadLen, buf_.get(), buf_.get(), bytes_, tag_);
    clobber(tag_);
  }

 private:
  std::unique_ptr<cr::Aes128Gcm> g_;
  Buf buf_;
  uint64_t n_ = 0;
  uint8_t nonce_[12] = {}, aad_[kAadLen] = {}, tag_[16] = {};
};

// open() must see a valid tag or it would stop after GHASH; so one buffer is sealed up front and
// opened (out of place, the ciphertext stays intact) on every call with its nonce.
class GcmOpenOp final : public Op {
 public:
  GcmOpenOp(std::unique_ptr<cr::Aes128Gcm> g, size_t size) : g_(std::move(g)) {
    bytes_ = size;
    ct_ = alloc_buf(size);
    pt_ = alloc_buf(size);
    std::memset(aad_, 0x17, sizeof aad_);
    std::memset(nonce_, 0x33, sizeof nonce_);
    g_->seal(nonce_, aad_, kAadLen, ct_.get(), ct_.get(), bytes_, tag_);
  }
  void once() noexcept override {
    good_ &= g_->open(nonce_, aad_, kAadLen, ct_.get(), pt_.get(), bytes_, tag_);
  }
  bool ok() const noexcept override { return good_; }

 private:
  std::unique_ptr<cr::Aes128Gcm> g_;
  Buf ct_, pt_;
  bool good_ = true;
  uint8_t nonce_[12] = {}, aad_[kAadLen] = {}, tag_[16] = {};
};

class Rc4Op final : public Op {
 public:
  explicit Rc4Op(size_t size) : rc4_(kKey, 16) {
    bytes_ = size;
    buf_ = alloc_buf(size);
  }
  void once() noexcept override { rc4_.xor_stream(buf_.get(), buf_.get(), bytes_); }

 private:
  cr::Rc4 rc4_;
  Buf buf_;
};

class MemcpyOp final : public Op {
 public:
  explicit MemcpyOp(size_t size) {
    bytes_ = size;
    src_ = alloc_buf(size);
    dst_ = alloc_buf(size);
  }
  void once() noexcept override {
    std::memcpy(dst_.get(), src_.get(), bytes_);
    clobber(dst_.get());
  }

 private:
  Buf src_, dst_;
};

class Sha256Op final : public Op {
 public:
  explicit Sha256Op(size_t size) {
    bytes_ = size;
    buf_ = alloc_buf(size);
  }
  void once() noexcept override {
    cr::Sha256::digest(buf_.get(), bytes_, out_);
    clobber(out_);
  }

 private:
  Buf buf_;
  uint8_t out_[32] = {};
};

class Xxh128Op final : public Op {
 public:
  explicit Xxh128Op(size_t size) {
    bytes_ = size;
    buf_ = alloc_buf(size);
  }
  void once() noexcept override {
    cr::FileChecksum f(cr::ChecksumAlg::xxh128);
    f.update(buf_.get(), bytes_);
    sum_ = f.final();
    clobber(sum_.bytes.data());
  }

 private:
  Buf buf_;
  cr::Checksum sum_;
};

class HmacOp final : public Op {
 public:
  explicit HmacOp(size_t size) : h_(kKey, 32) {
    bytes_ = size;
    buf_ = alloc_buf(size);
  }
  void once() noexcept override {
    h_.mac(buf_.get(), bytes_, tag_);
    clobber(tag_);
  }

 private:
  cr::HmacSha256 h_;
  Buf buf_;
  uint8_t tag_[32] = {};
};

// One table row: what it is called and how each thread builds its own operation for a size.
struct Row {
  std::string cipher;  // "aes128-cbc", "hmac-sha256", "sha256"
  std::string op;      // "enc", "dec", "enc-lanes", "mac", "hash"
  size_t lanes = 0;    // for enc-lanes
  std::string impl;
  bool legacy = false;
  bool no_aesni = false;  // --no-aesni-too: the portable code's run of an AES row
  std::function<std::unique_ptr<Op>(size_t size)> make;

  std::string label() const { return colour_key() + (no_aesni ? " (no AES-NI)" : ""); }
  // The chart's colour: the same for a row and its --no-aesni-too twin.
  std::string colour_key() const {
    std::string s = cipher;
    if (op == "enc" || op == "dec") s += " " + op;
    if (op == "enc-lanes") s += " enc x" + std::to_string(lanes) + " lanes";
    if (legacy) s += " (legacy)";
    return s;
  }
};

std::unique_ptr<cr::BlockCipher> aes() {
  auto bc = cr::make_aes128(kKey);
  if (!bc) throw std::runtime_error("make_aes128 returned no implementation");
  return bc;
}
std::unique_ptr<cr::Aes128Gcm> gcm() {
  auto g = cr::Aes128Gcm::make(kKey);
  if (!g) throw std::runtime_error("Aes128Gcm::make returned no implementation");
  return g;
}
std::unique_ptr<cr::BlockCipher> blowfish() {
  auto bc = cr::make_blowfish(kKey, 16);
  if (!bc) throw std::runtime_error("make_blowfish rejected a 16-byte key");
  return bc;
}

void add_cipher_rows(const cr::CipherDesc& c, std::vector<Row>& rows) {
  auto add = [&](std::string op, std::string impl, std::function<std::unique_ptr<Op>(size_t)> make,
                 size_t lanes = 0) {
    Row r;
    r.cipher = c.name;
    r.op = std::move(op);
    r.lanes = lanes;
    r.impl = std::move(impl);
    r.legacy = c.legacy;
    r.make = std::move(make);
    rows.push_back(std::move(r));
  };
  switch (c.mode) {
    case cr::CipherMode::cbc: {
      if (c.alg == cr::CipherAlg::aes128) {
        const std::string impl = aes()->impl();
        add("enc", impl, [](size_t n) { return std::make_unique<CbcOp>(aes(), n, false); });
        add("dec", impl, [](size_t n) { return std::make_unique<CbcOp>(aes(), n, true); });
        add(
            "enc-lanes", impl, [](size_t n) { return std::make_unique<CbcLanesOp>(aes(), n, 8); }, 8);
        if (impl == "vaes")
          add(
              "enc-lanes", impl, [](size_t n) { return std::make_unique<CbcLanesOp>(aes(), n, 16); }, 16);
      } else if (c.alg == cr::CipherAlg::blowfish) {
        const std::string impl = blowfish()->impl();
        add("enc", impl, [](size_t n) { return std::make_unique<CbcOp>(blowfish(), n, false); });
        add("dec", impl, [](size_t n) { return std::make_unique<CbcOp>(blowfish(), n, true); });
        add(
            "enc-lanes", impl, [](size_t n) { return std::make_unique<CbcLanesOp>(blowfish(), n, 4); }, 4);
      }
      break;
    }
    case cr::CipherMode::ctr: {
      const std::string impl = aes()->impl();
      // CTR decryption is the same operation; it is measured anyway so that every cipher has both rows.
      add("enc", impl, [](size_t n) { return std::make_unique<CtrOp>(aes(), n); });
      add("dec", impl, [](size_t n) { return std::make_unique<CtrOp>(aes(), n); });
      break;
    }
    case cr::CipherMode::gcm: {
      const std::string impl = gcm()->impl();
      add("enc", impl, [](size_t n) { return std::make_unique<GcmSealOp>(gcm(), n); });
      add("dec", impl, [](size_t n) { return std::make_unique<GcmOpenOp>(gcm(), n); });
      break;
    }
    case cr::CipherMode::stream:
      add("enc", "portable", [](size_t n) { return std::make_unique<Rc4Op>(n); });
      add("dec", "portable", [](size_t n) { return std::make_unique<Rc4Op>(n); });
      break;
    case cr::CipherMode::none:
      add("enc", "memcpy", [](size_t n) { return std::make_unique<MemcpyOp>(n); });
      add("dec", "memcpy", [](size_t n) { return std::make_unique<MemcpyOp>(n); });
      break;
  }
}

void add_mac_rows(const cr::MacDesc& m, std::vector<Row>& rows) {
  if (std::string_view(m.name) != "hmac-sha256") return;  // MAC "none" has nothing to measure
  Row h;
  h.cipher = "hmac-sha256";
  h.op = "mac";
  h.impl = cr::sha256_impl_name(cr::ShaImpl::best);
  h.make = [](size_t n) { return std::make_unique<HmacOp>(n); };
  rows.push_back(std::move(h));
}

// The whole-file checksums a transfer can negotiate (--checksum): what each costs per byte.
void add_checksum_rows(cr::ChecksumAlg a, std::vector<Row>& rows) {
  Row s;
  s.cipher = cr::checksum_name(a);
  s.op = "hash";
  if (a == cr::ChecksumAlg::sha256) {
    s.impl = cr::sha256_impl_name(cr::ShaImpl::best);
    s.make = [](size_t n) { return std::make_unique<Sha256Op>(n); };
  } else if (a == cr::ChecksumAlg::xxh128) {
    s.impl = cr::xxh_impl_name(cr::XxhImpl::best);
    s.make = [](size_t n) { return std::make_unique<Xxh128Op>(n); };
  } else {
    return;
  }
  rows.push_back(std::move(s));
}

struct Cell {
  bool skipped = false;  // the size does not fit the cipher's block
  bool ok = true;        // self-check passed
  double mb_per_s = 0;
};

// Runs one cell on `threads` threads (the caller's thread is thread 0).
Cell run_cell(const Row& row, size_t size, double seconds, int threads) {
  std::vector<std::unique_ptr<Op>> ops;
  for (int t = 0; t < threads; ++t) ops.push_back(row.make(size));
  Cell cell;
  if (ops[0]->bytes() == 0) {
    cell.skipped = true;
    return cell;
  }
  using Dur = Clock::duration;
  const auto run_for = std::chrono::duration_cast<Dur>(std::chrono::duration<double>(seconds));
  const auto warm_for =
      std::chrono::duration_cast<Dur>(std::chrono::duration<double>(std::clamp(seconds / 20, 0.001, 0.05)));
  const auto batch_target = std::chrono::duration_cast<Dur>(std::chrono::microseconds(100));

  Clock::time_point t0;
  std::barrier sync(threads, [&t0]() noexcept { t0 = Clock::now(); });
  std::vector<uint64_t> calls(size_t(threads), 0);
  std::vector<Clock::time_point> ends(static_cast<size_t>(threads));

  auto body = [&](int t) {
    Op& op = *ops[size_t(t)];
    // Warm-up: brings caches, branch predictors and clock frequency up, and sizes the batch.
    size_t batch = 1;
    const auto warm_end = Clock::now() + warm_for;
    for (;;) {
      const auto b0 = Clock::now();
      for (size_t i = 0; i < batch; ++i) op.once();
      const auto b1 = Clock::now();
      if (b1 - b0 < batch_target && batch < (size_t(1) << 24)) batch *= 2;
      if (b1 >= warm_end) break;
    }
    sync.arrive_and_wait();  // all threads start together; the completion step stamped t0
    const auto deadline = t0 + run_for;
    uint64_t n = 0;
    Clock::time_point now;
    do {
      for (size_t i = 0; i < batch; ++i) op.once();
      n += batch;
      now = Clock::now();
    } while (now < deadline);
    ends[size_t(t)] = now;
    calls[size_t(t)] = n;
  };

  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  body(0);
  for (auto& th : pool) th.join();

  const auto last = *std::max_element(ends.begin(), ends.end());
  const double wall = std::chrono::duration<double>(last - t0).count();
  double bytes = 0;
  for (int t = 0; t < threads; ++t) {
    bytes += double(calls[size_t(t)]) * double(ops[size_t(t)]->bytes());
    cell.ok = cell.ok && ops[size_t(t)]->ok();
  }
  cell.mb_per_s = wall > 0 ? bytes / wall / 1e6 : 0;
  return cell;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

bool speed_options_ok(const SpeedOptions& opt, std::ostream& err) {
  if (!(opt.seconds > 0) || !std::isfinite(opt.seconds) || opt.seconds > 3600) {
    err << "aesxfer speed: --seconds must be in (0, 3600], got " << opt.seconds << "\n";
    return false;
  }
  if (opt.multi < 1 || opt.multi > 1024) {
    err << "aesxfer speed: --multi must be in [1, 1024], got " << opt.multi << "\n";
    return false;
  }
  if (opt.sizes.empty() || std::any_of(opt.sizes.begin(), opt.sizes.end(),
                                       [](size_t s) { return s == 0 || s > (size_t(1) << 30); })) {
    err << "aesxfer speed: block sizes must be in [1, 2^30] bytes\n";
    return false;
  }
  return true;
}

// What -c selected: ciphers, MACs and checksums, each in the order given, duplicates dropped.
struct SpeedSelection {
  std::vector<const cr::CipherDesc*> ciphers;
  std::vector<const cr::MacDesc*> macs;
  std::vector<cr::ChecksumAlg> sums;
  void add_sum(cr::ChecksumAlg a) {
    if (a != cr::ChecksumAlg::none && std::find(sums.begin(), sums.end(), a) == sums.end()) sums.push_back(a);
  }
};

// Resolves the selection: ciphers first (so "none" is the cipher), then MACs, then checksums;
// false after a one-line error for an unknown name.
bool select_speed(const SpeedOptions& opt, SpeedSelection& sel, std::ostream& err) {
  if (opt.ciphers.empty()) {
    for (const auto& c : cr::ciphers()) sel.ciphers.push_back(&c);
    for (const auto& m : cr::macs()) sel.macs.push_back(&m);
    sel.add_sum(cr::ChecksumAlg::xxh128);
    sel.add_sum(cr::ChecksumAlg::sha256);
    return true;
  }
  for (const auto& name : opt.ciphers) {
    cr::ChecksumAlg sum{};
    if (const auto* c = cr::find_cipher(name)) {
      if (std::find(sel.ciphers.begin(), sel.ciphers.end(), c) == sel.ciphers.end()) sel.ciphers.push_back(c);
    } else if (const auto* m = cr::find_mac(name)) {
      if (std::find(sel.macs.begin(), sel.macs.end(), m) == sel.macs.end()) sel.macs.push_back(m);
      if (m->tag_len) sel.add_sum(cr::ChecksumAlg::sha256);  // HMAC's own hash, beside it
    } else if (cr::find_checksum(name, sum) && sum != cr::ChecksumAlg::none) {
      sel.add_sum(sum);
    } else {
      err << "aesxfer speed: unknown cipher, MAC or checksum '" << name
          << "' (ciphers: " << cr::cipher_names() << "; MACs: " << cr::mac_names()
          << "; checksums: xxh128, sha256)\n";
      return false;
    }
  }
  return true;
}

// --no-aesni-too: the AES rows again, built while the portable code is chosen; each sits after
// its twin.
std::vector<Row> with_portable_twins(const std::vector<Row>& rows) {
  cr::set_no_aesni(true);
  std::vector<Row> both;
  for (const auto& r : rows) {
    both.push_back(r);
    const cr::CipherDesc* c = cr::find_cipher(r.cipher);
    if (!c || c->alg != cr::CipherAlg::aes128) continue;
    std::vector<Row> sw;
    add_cipher_rows(*c, sw);
    for (auto& t : sw)
      if (t.op == r.op && t.lanes == r.lanes) {
        t.no_aesni = true;
        both.push_back(t);
        break;
      }
  }
  cr::set_no_aesni(false);
  return both;
}

// The implementations that run, for the heading and the JSON.
struct SpeedImpls {
  std::string aes, gcm, ghash, sha256, xxh128;
  bool masked = false;  // --no-aesni
};

// The table's rows for the selection, and the implementations they run on. Throws when a
// primitive has no implementation.
std::vector<Row> build_rows(const SpeedOptions& opt, const SpeedSelection& sel, SpeedImpls& impls) {
  std::vector<Row> rows;
  for (const auto* c : sel.ciphers) add_cipher_rows(*c, rows);
  for (const auto* m : sel.macs) add_mac_rows(*m, rows);
  for (auto a : sel.sums) add_checksum_rows(a, rows);
  impls.aes = aes()->impl();
  impls.gcm = gcm()->impl();
  if (opt.no_aesni_too && !cr::no_aesni()) rows = with_portable_twins(rows);
  impls.sha256 = cr::sha256_impl_name(cr::ShaImpl::best);
  impls.xxh128 = cr::xxh_impl_name(cr::XxhImpl::best);
  impls.masked = cr::no_aesni() || opt.no_aesni;
  // Aes128Gcm::impl() names its AES; GHASH follows the rule gcm.h documents (carry-less multiply
  // unless the AES is the portable one or the CPU lacks PCLMULQDQ), so it is derived here.
  impls.ghash = (impls.gcm != "software" && cr::cpu().pclmul)
                    ? (impls.gcm == "vaes" && cr::cpu().vpclmul ? "vpclmulqdq" : "pclmulqdq")
                    : "portable";
  return rows;
}

// The text table's layout: column widths from the rows.
struct SpeedLayout {
  size_t label_w = 4, impl_w = 4;
  static constexpr size_t kCol = 14;
  explicit SpeedLayout(const std::vector<Row>& rows) {
    for (const auto& r : rows) label_w = std::max(label_w, r.label().size());
    for (const auto& r : rows) impl_w = std::max(impl_w, r.impl.size());
    label_w += 2;
    impl_w += 2;
  }
  static std::string pad(std::string s, size_t w) {
    if (s.size() < w) s.append(w - s.size(), ' ');
    return s;
  }
  static std::string rpad(const std::string& s, size_t w) {
    return s.size() < w ? std::string(w - s.size(), ' ') + s : s;
  }
};

void print_speed_heading(const SpeedOptions& opt, const SpeedImpls& impls, const SpeedLayout& lay,
                         std::ostream& out) {
  out << "aesxfer speed\n";
  out << "CPU:      " << cr::cpu_model() << "\n";
  out << "AES:      " << impls.aes << "   (best available: " << cr::aes_best_impl_name() << ")\n";
  out << "GHASH:    " << impls.ghash << "   (AES-128-GCM runs on " << impls.gcm << ")\n";
  out << "SHA-256:  " << impls.sha256 << "\n";
  out << "XXH3-128: " << impls.xxh128 << "\n";
  if (impls.masked) out << "AES-NI masked (--no-aesni): AES-NI, VAES, PCLMULQDQ and SHA-NI are not used\n";
  out << "threads:  " << opt.multi << (opt.multi > 1 ? " (figures summed over threads)" : "") << "\n";
  out << "seconds:  " << opt.seconds << " per cell\n";
  out << "The numbers are MB/s (1 MB = 10^6 bytes per second) of the raw operation on one buffer of\n"
         "the column's size, called repeatedly with a fresh IV/nonce per call (like openssl speed -evp);\n"
         "gcm includes the tag and a 13-byte AAD; \"xN lanes\" is the aggregate of N independent CBC\n"
         "chains of that size each.\n";
  out << SpeedLayout::pad("type", lay.label_w) << SpeedLayout::pad("impl", lay.impl_w);
  for (size_t s : opt.sizes) out << SpeedLayout::rpad(std::to_string(s) + " bytes", SpeedLayout::kCol);
  out << "\n";
  out.flush();
}

// What the cells measured: one chart series per row, the JSON results, the first failed check.
struct SpeedResults {
  std::vector<svg::Series> plot_series;  // --plot: one line per row
  Json json = Json::array();             // --json: one object per cell
  std::string failed;                    // the row whose self-check failed, or empty
};

Json cell_json(const Row& r, size_t size, const Cell& cell, bool masked) {
  Json j;
  j["cipher"] = r.cipher;
  j["op"] = r.op;
  if (r.lanes) j["lanes"] = r.lanes;
  j["impl"] = r.impl;
  j["legacy"] = r.legacy;
  j["no_aesni"] = r.no_aesni || masked;
  j["block_size"] = size;
  j["mb_per_s"] = rounded(cell.mb_per_s, 3);
  return j;
}

// Runs every cell, row by row; the text table is printed as it goes (without --json).
void run_table(const SpeedOptions& opt, const std::vector<Row>& rows, const SpeedImpls& impls,
               const SpeedLayout& lay, SpeedResults& res, std::ostream& out) {
  for (const auto& r : rows) {
    if (!opt.json)
      out << SpeedLayout::pad(r.label(), lay.label_w) << SpeedLayout::pad(r.impl, lay.impl_w) << std::flush;
    res.plot_series.push_back(svg::Series{r.label() + " [" + r.impl + "]", {}, r.colour_key()});
    for (size_t s : opt.sizes) {
      // The implementation is chosen when the cell makes its operation: the portable code for
      // the --no-aesni-too rows, the hardware's for the others.
      if (opt.no_aesni_too) cr::set_no_aesni(r.no_aesni);
      const Cell cell = run_cell(r, s, opt.seconds, opt.multi);
      if (opt.no_aesni_too) cr::set_no_aesni(false);
      if (!cell.ok) res.failed = r.label();
      if (!cell.skipped) res.plot_series.back().points.emplace_back(double(s), cell.mb_per_s);
      if (!opt.json)
        out << SpeedLayout::rpad(cell.skipped ? "n/a" : fmt("%.2f", cell.mb_per_s), SpeedLayout::kCol)
            << std::flush;
      else if (!cell.skipped)
        res.json.push_back(cell_json(r, s, cell, impls.masked));
    }
    if (!opt.json) out << "\n" << std::flush;
  }
}

Json speed_json(const SpeedOptions& opt, const SpeedImpls& impls, Json results) {
  Json j;
  j["cpu"] = cr::cpu_model();
  j["threads"] = opt.multi;
  j["seconds"] = opt.seconds;
  j["no_aesni"] = impls.masked;
  j["unit"] = "MB/s (10^6 bytes per second)";
  j["impl"] = {{"aes", impls.aes},
               {"gcm", impls.gcm},
               {"ghash", impls.ghash},
               {"sha256", impls.sha256},
               {"xxh128", impls.xxh128}};
  j["results"] = std::move(results);
  return j;
}

// --plot: MB/s against block size, one line per row; false with the reason in `why`.
bool write_speed_chart(const SpeedOptions& opt, bool masked, std::vector<svg::Series> series,
                       std::string& why) {
  svg::LineChart chart;
  chart.title = std::string("aesxfer speed: MB/s by block size") + (masked ? " (--no-aesni)" : "") +
                (opt.multi > 1 ? ", " + std::to_string(opt.multi) + " threads" : "");
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
  chart.subtitle = std::string(cr::cpu_model()) + "  \u00b7  " + date + "  \u00b7  " +
                   fmt("%g", opt.seconds) + " s per cell";
  chart.x_label = "block size (bytes, log2 scale)";
  chart.y_label = "MB/s (10^6 bytes/s, log10 scale)";
  chart.log10_y = true;  // memcpy and RC4 are orders of magnitude apart
  chart.series = std::move(series);
  return svg::write_file(opt.plot, svg::line_chart(chart), why);
}

}  // namespace

int run_speed(const SpeedOptions& opt, std::ostream& out, std::ostream& err) {
  if (!speed_options_ok(opt, err)) return 2;
  SpeedSelection sel;
  if (!select_speed(opt, sel, err)) return 2;
  std::vector<Row> rows;
  SpeedImpls impls;
  try {
    rows = build_rows(opt, sel, impls);
  } catch (const std::exception& e) {
    err << "aesxfer speed: " << e.what() << "\n";
    return 1;
  }
  if (rows.empty()) {
    err << "aesxfer speed: nothing to measure (MAC 'none' alone)\n";
    return 2;
  }
  const SpeedLayout lay(rows);
  if (!opt.json) print_speed_heading(opt, impls, lay, out);
  SpeedResults res;
  try {
    run_table(opt, rows, impls, lay, res, out);
  } catch (const std::exception& e) {
    if (!opt.json) out << "\n";
    err << "aesxfer speed: " << e.what() << "\n";
    return 1;
  }
  if (opt.json) out << json_line(speed_json(opt, impls, std::move(res.json)));
  out.flush();
  std::string why;
  if (!opt.plot.empty() && !write_speed_chart(opt, impls.masked, std::move(res.plot_series), why)) {
    err << "aesxfer speed: --plot: " << why << "\n";
    return 1;
  }
  if (!res.failed.empty()) {
    err << "aesxfer speed: self-check failed in '" << res.failed << "' (GCM open rejected its own tag)\n";
    return 1;
  }
  return 0;
}

}  // namespace aesxfer::app
