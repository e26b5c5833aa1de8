// `aesxfer speed`, modelled on `openssl speed -evp`.
//
// What one cell measures: the raw primitive over ONE buffer of the column's size, called again and
// again for `seconds` of wall-clock time (std::chrono::steady_clock), after a short warm-up. The
// figure is payload bytes processed per CPU-second of the measuring thread (its
// CLOCK_THREAD_CPUTIME_ID over the same window), in MB, 1 MB = 10^6 bytes, as `openssl speed`
// divides by its process's CPU time; --elapsed divides by the wall time instead (`openssl speed
// -elapsed`). A cell whose wall time exceeds its CPU time by kBenchContendedPct (15 %) of the wall
// time or more is marked contended ("*"): other processes had the core, and the CPU figure is the
// one to trust (the wall figure is low by about that share). Every call starts a new message with a fresh IV
// / nonce / counter, so per-call set-up is part of the cost, as it is per record on the wire:
//
//   aes128-cbc   enc/dec   BlockCipher::cbc_encrypt / cbc_decrypt, in place, fresh IV per call
//   aes128-cbc   enc xN lanes   BlockCipher::cbc_encrypt_lanes over N independent buffers of the
//                          column's size (what the record layer does across records); aggregate MB/s
//   aes128-ctr   enc/dec   BlockCipher::ctr_xor, in place, fresh counter block per call
//   aes128-gcm   enc       Aead::seal with a 13-byte AAD (as `openssl speed -aead`), tag included
//                dec       Aead::open of a sealed buffer (the tag is checked every call)
//   blowfish-cbc enc/dec   Blowfish CBC through the BlockCipher interface, fresh IV per call
//   arcfour      enc/dec   StreamCipher::xor_stream, key set once (the key schedule is not timed)
//   none         enc/dec   memcpy between two buffers (the floor any cipher is compared with)
//   hmac-sha256            Mac::mac over the buffer (HMAC's pads precomputed once per key)
// Every object comes from the cipher or MAC table row's factory with a dispatch table: the best
// one, and the portable one for the --no-aesni-too twins.
//   sha256                 Sha256::digest over the buffer (a file checksum, and HMAC's hash)
//   xxh128                 XXH3-128 over the buffer (the default file checksum)
//
// Buffers are 64-byte aligned and touched before timing. The clock is read once per batch of
// calls, the batch sized during warm-up so that one batch takes about 100 microseconds: small
// buffers do not pay for clock reads, large ones do not overshoot the cell.
// --multi N: N threads, each with its own cipher objects and buffers, released together by a
// barrier; the bytes of all threads are summed and divided by the mean CPU time of a thread (or,
// with --elapsed, by the common wall time from the release to the last thread's end).
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

#include "app/cli_checks.h"
#include "app/json.h"
#include "app/lab/bench.h"
#include "app/lab/svg.h"
#include "crypto/aes.h"
#include "crypto/checksum.h"
#include "crypto/cpu.h"
#include "crypto/sha256.h"
#include "crypto/suite.h"
#include "proto/failure.h"

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
  GcmSealOp(std::unique_ptr<cr::Aead> g, size_t size) : g_(std::move(g)) {
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
  std::unique_ptr<cr::Aead> g_;
  Buf buf_;
  uint64_t n_ = 0;
  uint8_t nonce_[12] = {}, aad_[kAadLen] = {}, tag_[32] = {};
};

// open() must see a valid tag or it would stop after GHASH; so one buffer is sealed up front and
// opened (out of place, the ciphertext stays intact) on every call with its nonce.
class GcmOpenOp final : public Op {
 public:
  GcmOpenOp(std::unique_ptr<cr::Aead> g, size_t size) : g_(std::move(g)) {
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
  std::unique_ptr<cr::Aead> g_;
  Buf ct_, pt_;
  bool good_ = true;
  uint8_t nonce_[12] = {}, aad_[kAadLen] = {}, tag_[32] = {};
};

class StreamOp final : public Op {
 public:
  StreamOp(std::unique_ptr<cr::StreamCipher> sc, size_t key_len, size_t size) : sc_(std::move(sc)) {
    sc_->set_key(kKey, key_len);
    bytes_ = size;
    buf_ = alloc_buf(size);
  }
  void once() noexcept override { sc_->xor_stream(buf_.get(), buf_.get(), bytes_); }

 private:
  std::unique_ptr<cr::StreamCipher> sc_;
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

class MacOp final : public Op {
 public:
  MacOp(std::unique_ptr<cr::Mac> m, size_t size) : m_(std::move(m)) {
    bytes_ = size;
    buf_ = alloc_buf(size);
  }
  void once() noexcept override {
    m_->mac(cr::MacJob{nullptr, 0, buf_.get(), bytes_, tag_});
    clobber(tag_);
  }

 private:
  std::unique_ptr<cr::Mac> m_;
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
  bool portable = false;  // the portable code of a cipher with hardware code (dashed in the chart)
  std::function<std::unique_ptr<Op>(size_t size)> make;

  std::string label() const {
    return cipher + (op_name().empty() ? "" : " " + op_name()) + (legacy ? " (legacy)" : "") +
           (no_aesni ? " (no AES-NI)" : "");
  }
  // "enc", "dec", "enc x8 lanes"; empty for a MAC or a hash (the cipher names it).
  std::string op_name() const {
    if (op == "enc" || op == "dec") return op;
    if (op == "enc-lanes") return "enc x" + std::to_string(lanes) + " lanes";
    return "";
  }
  // The chart's marker: the operation (svg.h).
  svg::Marker marker() const {
    if (op == "dec") return svg::Marker::square;
    if (op == "enc-lanes") return lanes > 8 ? svg::Marker::diamond : svg::Marker::triangle;
    return svg::Marker::circle;
  }
};

// The row's primitive with a dispatch table's code (kKey's first key_len bytes as the key).
std::unique_ptr<cr::BlockCipher> block(const cr::CipherDesc& c, const cr::Dispatch& d) {
  auto bc = c.make_block(kKey, c.key_len, d);
  if (!bc) throw std::runtime_error(std::string(c.name) + ": the cipher table's factory made nothing");
  return bc;
}
std::unique_ptr<cr::Aead> aead(const cr::CipherDesc& c, const cr::Dispatch& d) {
  auto a = c.make_aead(kKey, d);
  if (!a) throw std::runtime_error(std::string(c.name) + ": the cipher table's factory made nothing");
  return a;
}

// The operations of one cipher: what is timed depends on the mode, the code on the dispatch.
void add_cipher_rows(const cr::CipherDesc& c, const cr::Dispatch& d, std::vector<Row>& rows) {
  auto add = [&](std::string op, std::string impl, std::function<std::unique_ptr<Op>(size_t)> make,
                 size_t lanes = 0) {
    Row r;
    r.cipher = c.name;
    r.op = std::move(op);
    r.lanes = lanes;
    r.impl = std::move(impl);
    r.legacy = c.legacy;
    r.portable = aes_without_aesni(c, r.impl);
    r.make = std::move(make);
    rows.push_back(std::move(r));
  };
  const cr::CipherDesc* cp = &c;
  const cr::Dispatch* dp = &d;  // the tables live as long as the process
  const std::string impl = cr::cipher_impl_name(c, d);
  switch (c.mode) {
    case cr::CipherMode::cbc: {
      add("enc", impl, [=](size_t n) { return std::make_unique<CbcOp>(block(*cp, *dp), n, false); });
      add("dec", impl, [=](size_t n) { return std::make_unique<CbcOp>(block(*cp, *dp), n, true); });
      // 8 chains (what AES-NI interleaves), or fewer where the cipher takes fewer, and the
      // cipher's own width where it is wider (VAES: 16).
      const size_t width = block(c, d)->cbc_lanes();
      for (size_t lanes : {std::min<size_t>(width, 8), width > 8 ? width : 0})
        if (lanes)
          add(
              "enc-lanes", impl,
              [=](size_t n) { return std::make_unique<CbcLanesOp>(block(*cp, *dp), n, lanes); }, lanes);
      break;
    }
    case cr::CipherMode::ctr:
      // CTR decryption is the same operation; it is measured anyway so that every cipher has both rows.
      add("enc", impl, [=](size_t n) { return std::make_unique<CtrOp>(block(*cp, *dp), n); });
      add("dec", impl, [=](size_t n) { return std::make_unique<CtrOp>(block(*cp, *dp), n); });
      break;
    case cr::CipherMode::gcm:
      add("enc", impl, [=](size_t n) { return std::make_unique<GcmSealOp>(aead(*cp, *dp), n); });
      add("dec", impl, [=](size_t n) { return std::make_unique<GcmOpenOp>(aead(*cp, *dp), n); });
      break;
    case cr::CipherMode::stream:
      add("enc", impl,
          [=](size_t n) { return std::make_unique<StreamOp>(cp->make_stream(), cp->key_len, n); });
      add("dec", impl,
          [=](size_t n) { return std::make_unique<StreamOp>(cp->make_stream(), cp->key_len, n); });
      break;
    case cr::CipherMode::none:
      add("enc", "memcpy", [](size_t n) { return std::make_unique<MemcpyOp>(n); });
      add("dec", "memcpy", [](size_t n) { return std::make_unique<MemcpyOp>(n); });
      break;
  }
}

void add_mac_rows(const cr::MacDesc& m, std::vector<Row>& rows) {
  if (!m.make) return;  // MAC "none" has nothing to measure
  const cr::MacDesc* mp = &m;
  Row h;
  h.cipher = m.name;
  h.op = "mac";
  h.impl = m.make(kKey, m.key_len, cr::dispatch())->impl();
  h.make = [mp](size_t n) { return std::make_unique<MacOp>(mp->make(kKey, mp->key_len, cr::dispatch()), n); };
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
  double bytes = 0;      // payload bytes, all threads
  double cpu = 0;        // CPU seconds of a measuring thread (the mean over threads)
  double wall = 0;       // wall seconds, from the release to the last thread's end
  bool contended = false;
  double mb_per_s = 0;  // bytes / cpu (or wall with --elapsed) / 10^6
};

double thread_cpu_seconds() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

// The cell's figures from what the threads measured.
void finish_cell(Cell& cell, double bytes, double cpu_sum, int threads, double wall, bool elapsed) {
  cell.bytes = bytes;
  cell.cpu = cpu_sum / threads;
  cell.wall = wall;
  cell.contended = wall - cell.cpu >= wall * kBenchContendedPct / 100;
  const double t = elapsed ? wall : cell.cpu;
  cell.mb_per_s = t > 0 ? bytes / t / 1e6 : 0;
}

// Runs one cell on `threads` threads (the caller's thread is thread 0).
Cell run_cell(const Row& row, size_t size, double seconds, int threads, bool elapsed) {
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
  std::vector<double> cpus(static_cast<size_t>(threads), 0);

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
    const double cpu0 = thread_cpu_seconds();
    const auto deadline = t0 + run_for;
    uint64_t n = 0;
    Clock::time_point now;
    do {
      for (size_t i = 0; i < batch; ++i) op.once();
      n += batch;
      now = Clock::now();
    } while (now < deadline);
    cpus[size_t(t)] = thread_cpu_seconds() - cpu0;
    ends[size_t(t)] = now;
    calls[size_t(t)] = n;
  };

  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  body(0);
  for (auto& th : pool) th.join();

  const auto last = *std::max_element(ends.begin(), ends.end());
  const double wall = std::chrono::duration<double>(last - t0).count();
  double bytes = 0, cpu = 0;
  for (int t = 0; t < threads; ++t) {
    bytes += double(calls[size_t(t)]) * double(ops[size_t(t)]->bytes());
    cpu += cpus[size_t(t)];
    cell.ok = cell.ok && ops[size_t(t)]->ok();
  }
  finish_cell(cell, bytes, cpu, threads, wall, elapsed);
  return cell;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

bool speed_options_ok(const SpeedOptions& opt, std::ostream& err) {
  if (const std::string why = opt.plot.empty() ? "" : unwritable(opt.plot); !why.empty()) {
    err << "aesxfer speed: --plot " << why << "\n";
    return false;
  }
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
      err << "aesxfer speed: unknown cipher, MAC or checksum '" << proto::printable(name)
          << "' (ciphers: " << cr::cipher_names() << "; MACs: " << cr::mac_names()
          << "; checksums: xxh128, sha256)\n";
      return false;
    }
  }
  return true;
}

// --no-aesni-too: the rows whose code differs (AES) again, on the portable dispatch table; each
// sits after its twin.
std::vector<Row> with_portable_twins(const std::vector<Row>& rows) {
  std::vector<Row> both;
  for (const auto& r : rows) {
    both.push_back(r);
    const cr::CipherDesc* c = cr::find_cipher(r.cipher);
    if (!c || !cr::has_portable_twin(*c)) continue;
    std::vector<Row> sw;
    add_cipher_rows(*c, cr::dispatch(cr::Impl::portable), sw);
    for (auto& t : sw)
      if (t.op == r.op && t.lanes == r.lanes) {
        t.no_aesni = true;
        both.push_back(t);
        break;
      }
  }
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
  const cr::Dispatch& best = cr::dispatch();
  for (const auto* c : sel.ciphers) add_cipher_rows(*c, best, rows);
  for (const auto* m : sel.macs) add_mac_rows(*m, rows);
  for (auto a : sel.sums) add_checksum_rows(a, rows);
  impls.aes = cr::aes_impl_name(best.aes);
  impls.gcm = impls.aes;  // AES-128-GCM's CTR part runs on the same AES
  impls.ghash = cr::ghash_impl_name(best.ghash);
  if (opt.no_aesni_too && !cr::no_aesni()) rows = with_portable_twins(rows);
  impls.sha256 = cr::sha256_impl_name(cr::ShaImpl::best);
  impls.xxh128 = cr::xxh_impl_name(cr::XxhImpl::best);
  impls.masked = cr::no_aesni() || opt.no_aesni;
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
  out << (opt.elapsed ? "The numbers are MB per second of wall time (--elapsed; 1 MB = 10^6 bytes)"
                      : "The numbers are MB per CPU-second of the measuring thread (1 MB = 10^6 bytes;\n"
                        "--elapsed for wall time)")
      << " of the raw operation on one buffer of\n"
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
  bool contended = false;                // a cell was marked "*"
};

// What "*" means, under the table and in the chart's key.
std::string contended_legend() {
  return "* CPU contended: wall time exceeded CPU time by " + fmt("%g", kBenchContendedPct) +
         "% or more (other processes had the core)";
}

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
  j["bytes"] = cell.bytes;
  j["cpu_seconds"] = cell.cpu;
  j["wall_seconds"] = cell.wall;
  j["contended"] = cell.contended;
  return j;
}

// A row's line in the chart: its family's panel and colour, its operation's marker, dashed when
// it runs AES without AES-NI (svg.h).
svg::Series series_of(const Row& r) {
  svg::Series se;
  se.label = r.label() + " [" + r.impl + "]";
  se.family = r.cipher;
  se.panel = r.cipher + (r.legacy ? " (legacy)" : "");
  se.portable = r.portable;
  se.marker = r.marker();
  se.op = r.op_name().empty() ? (r.op == "mac" ? "MAC" : "hash") : r.op_name();
  if (r.op == "enc-lanes")
    se.op = r.lanes > 8 ? "enc x" + std::to_string(r.lanes) + " lanes" : "enc xN lanes";
  return se;
}

// Runs every cell, row by row; the text table is printed as it goes (without --json).
void run_table(const SpeedOptions& opt, const std::vector<Row>& rows, const SpeedImpls& impls,
               const SpeedLayout& lay, SpeedResults& res, std::ostream& out) {
  for (const auto& r : rows) {
    if (!opt.json)
      out << SpeedLayout::pad(r.label(), lay.label_w) << SpeedLayout::pad(r.impl, lay.impl_w) << std::flush;
    res.plot_series.push_back(series_of(r));
    for (size_t s : opt.sizes) {
      const Cell cell = run_cell(r, s, opt.seconds, opt.multi, opt.elapsed);
      if (!cell.ok) res.failed = r.label();
      res.contended = res.contended || cell.contended;
      if (!cell.skipped) {
        res.plot_series.back().points.emplace_back(double(s), cell.mb_per_s);
        res.plot_series.back().marks.push_back(cell.contended ? "*" : "");
      }
      if (!opt.json)
        out << SpeedLayout::rpad(
                   cell.skipped ? "n/a" : fmt("%.2f", cell.mb_per_s) + (cell.contended ? "*" : " "),
                   SpeedLayout::kCol)
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
  j["unit"] = opt.elapsed ? "MB/s (10^6 bytes per second of wall time)" : "MB per CPU-second (10^6 bytes)";
  j["timed_by"] = opt.elapsed ? "wall time" : "thread CPU time";
  j["contended_threshold_pct"] = kBenchContendedPct;
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
  chart.title =
      std::string(opt.elapsed ? "aesxfer speed: MB/s (wall time)" : "aesxfer speed: MB per CPU-second") +
      " by block size" + (masked ? " (--no-aesni)" : "") +
      (opt.multi > 1 ? ", " + std::to_string(opt.multi) + " threads" : "");
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
  chart.subtitle = std::string(cr::cpu_model()) + "  \u00b7  " + date + "  \u00b7  " +
                   fmt("%g", opt.seconds) + " s per cell";
  chart.x_label = "block size (bytes, log2 scale); one panel per cipher, MAC and checksum";
  chart.y_label = opt.elapsed ? "MB/s (wall time, log10 scale)" : "MB per CPU-second (log10 scale)";
  chart.mark_legend = {contended_legend()};
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
  if (!opt.json && res.contended) out << contended_legend() << "\n";
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
