// Multi-buffer SHA-256 / HMAC-SHA256: dispatch, the lane scheduler, and the one-at-a-time
// fallback.
//
// Each message is planned as a short list of segments of whole 64-byte blocks: blocks read in
// place from the caller's buffers, at most one bounce block where the two HMAC parts meet
// off a block boundary, and the final one or two padded blocks (with the length) in a per-lane
// buffer. HMAC adds a second phase per lane: the inner digest, padded, is one block compressed
// from the outer pad state. The SIMD kernels (sha256_mb_avx512.cpp, sha256_mb_avx2.cpp) run all
// lanes for as many blocks as the shortest current segment has left; a lane whose message is
// done takes the next one at once. Messages are handed out longest first (LPT), so lanes drain
// together; when no message is waiting and fewer than kTailLanes lanes are still busy, the
// SIMD unit would mostly hash garbage, so the remaining lanes are finished one stream at a time
// with SHA-NI (or the portable code), from the lane state where they stand.
//
// Measurements: bench/sha256_mb_bench (one thread, 32 equal messages per batch, implementations
// measured in interleaved ~40 ms slices, median of 5-7 rounds, GB/s of message bytes), on an
// "AMD EPYC" VM with AVX-512 and SHA-NI (2 vCPUs, shared with other builds), g++ 12 -O2:
//
//                       software   shani   avx2x8   avx512x16   OpenSSL SHA256()
//   SHA-256  16 KiB       0.22     1.40     1.10      3.21        1.23
//   SHA-256 256 KiB       0.24     1.42     1.11      3.21        1.48
//   SHA-256   1 MiB       0.23     1.45     1.01      3.19        1.46
//   HMAC 16+256 KiB       0.26     1.22     1.04      3.24          -
//
// Absolute figures move by up to 2x with the machine's load (a run at load average 11 gave
// shani 0.80-0.86, avx512x16 1.6-1.9), but avx512x16 / shani stayed 2.0-2.4 in every run, and
// avx2x8 stayed at 0.7-0.8 of shani. Hence the order for sha256_many: avx512x16, then shani,
// then avx2x8 (only for CPUs with AVX2 but no SHA-NI), then the portable code; and in the
// portable dispatch table the portable code alone. The one-stream tail starts below 7 busy lanes of 16
// (with --jobs N --tail 1, 6 AVX-512 lanes ran at 0.94x of SHA-NI, 8 lanes at 1.14x).
#include "crypto/sha256_mb.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "crypto/cpu.h"
#include "crypto/util.h"

namespace aesxfer::crypto {

namespace detail {
void sha256_compress_shani(uint32_t h[8], const uint8_t* blocks, size_t n) noexcept;
void sha256_compress_portable(uint32_t h[8], const uint8_t* blocks, size_t n) noexcept;
void sha256_x16_avx512(uint32_t st[8][16], const uint8_t* const ptr[16], size_t nblocks) noexcept;
void sha256_x8_avx2(uint32_t st[8][8], const uint8_t* const ptr[8], size_t nblocks) noexcept;
}  // namespace detail

namespace {

constexpr uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

using Compress1 = void (*)(uint32_t*, const uint8_t*, size_t) noexcept;

bool shani_ok() noexcept { return sha256_impl_available(ShaImpl::shani); }

Compress1 scalar_compress() noexcept {
  return shani_ok() ? &detail::sha256_compress_shani : &detail::sha256_compress_portable;
}

// ---- Planning ---------------------------------------------------------------------------------

struct Seg {
  const uint8_t* p;
  size_t blocks;
};

// One message in flight: its segments, the buffer its bounce and tail blocks live in, and what
// to do when the segments are done.
struct Plan {
  Seg seg[4];
  int nseg = 0, cur = 0;
  bool outer_pending = false;  // HMAC: the outer block still to do
  uint8_t* out = nullptr;
  alignas(64) uint8_t buf[3 * 64];  // [0, 64): bounce block / outer block; [64, 192): tail

  void add(const uint8_t* p, size_t blocks) noexcept {
    if (blocks) seg[nseg++] = {p, blocks};
  }
};

// Plans the compression of a || b after `prefix` bytes (0, or 64 for HMAC's key block).
void plan_message(Plan& m, uint64_t prefix, const uint8_t* a, size_t la, const uint8_t* b,
                  size_t lb) noexcept {
  m.nseg = 0;
  m.cur = 0;
  const uint64_t total = prefix + la + lb;
  uint8_t* const tail = m.buf + 64;
  size_t r = 0;  // bytes placed in tail
  m.add(a, la / 64);
  const size_t ra = la % 64;
  if (ra) {
    if (ra + lb >= 64) {
      std::memcpy(m.buf, a + la - ra, ra);
      std::memcpy(m.buf + ra, b, 64 - ra);
      m.add(m.buf, 1);
      b += 64 - ra;
      lb -= 64 - ra;
    } else {
      std::memcpy(tail, a + la - ra, ra);
      r = ra;
    }
  }
  if (lb) {
    if (r == 0) {
      m.add(b, lb / 64);
      const size_t rb = lb % 64;
      if (rb) std::memcpy(tail, b + lb - rb, rb);
      r = rb;
    } else {  // ra + lb < 64
      std::memcpy(tail + r, b, lb);
      r += lb;
    }
  }
  const size_t nb = r + 1 + 8 <= 64 ? 1 : 2;
  std::memset(tail + r, 0, 128 - r);
  tail[r] = 0x80;
  store_be64(tail + 64 * nb - 8, total * 8);
  m.add(tail, nb);
}

// HMAC's outer block: the inner digest of state h, padded; 64 + 32 bytes in all.
void plan_outer(Plan& m, const uint32_t h[8]) noexcept {
  for (int i = 0; i < 8; ++i) store_be32(m.buf + 4 * i, h[i]);
  std::memset(m.buf + 32, 0, 32);
  m.buf[32] = 0x80;
  store_be64(m.buf + 56, (64 + 32) * 8);
  m.nseg = 0;
  m.cur = 0;
  m.add(m.buf, 1);
  m.outer_pending = false;
}

void write_digest(uint8_t* out, const uint32_t h[8]) noexcept {
  for (int i = 0; i < 8; ++i) store_be32(out + 4 * i, h[i]);
}

// A batch of work: either plain hashes or HMACs under one key.
struct Batch {
  const Sha256Job* sjobs = nullptr;
  const HmacJob* hjobs = nullptr;
  const HmacSha256* key = nullptr;

  size_t bytes(size_t i) const noexcept { return sjobs ? sjobs[i].len : hjobs[i].len1 + hjobs[i].len2; }

  // Plans job i and returns its starting state.
  void start(size_t i, Plan& m, uint32_t h[8]) const noexcept {
    if (sjobs) {
      plan_message(m, 0, sjobs[i].data, sjobs[i].len, nullptr, 0);
      m.outer_pending = false;
      m.out = sjobs[i].out;
      std::memcpy(h, kInit, sizeof kInit);
    } else {
      const HmacJob& j = hjobs[i];
      // Put a lone part first so that plan_message sees a || b with a non-empty a when possible.
      if (j.len1)
        plan_message(m, 64, j.p1, j.len1, j.p2, j.len2);
      else
        plan_message(m, 64, j.p2, j.len2, nullptr, 0);
      m.outer_pending = true;
      m.out = j.tag;
      std::memcpy(h, key->inner_state().h, 32);
    }
  }

  void outer_state(uint32_t h[8]) const noexcept { std::memcpy(h, key->outer_state().h, 32); }
};

// Runs m to the end on one stream from state h, writing the result.
void finish_scalar(const Batch& batch, Plan& m, uint32_t h[8], Compress1 compress) noexcept {
  for (;;) {
    for (; m.cur < m.nseg; ++m.cur) compress(h, m.seg[m.cur].p, m.seg[m.cur].blocks);
    if (!m.outer_pending) break;
    plan_outer(m, h);
    batch.outer_state(h);
  }
  write_digest(m.out, h);
}

// ---- Lane scheduler ---------------------------------------------------------------------------

template <int K>
using Kernel = void (*)(uint32_t st[8][K], const uint8_t* const ptr[K], size_t nblocks) noexcept;

// Lanes finished one stream at a time once fewer than this many are busy and none is waiting:
// about K * (one-stream GB/s) / (K-lane GB/s), from the measurements at the top of this file
// (at most K, so that a forced avx2x8 still runs its lanes on a CPU where SHA-NI beats it).
std::atomic<int> g_tail_override{0};

template <int K>
int tail_lanes() noexcept {
  const int forced = g_tail_override.load(std::memory_order_relaxed);
  if (forced > 0) return std::min(forced, K);
  if (K == 16) return shani_ok() ? 7 : 2;
  return shani_ok() ? 8 : 2;
}

constexpr size_t kChunk = 256;  // jobs sorted per chunk (no allocation)

template <int K>
struct Lanes {
  alignas(64) uint32_t st[8][K];
  Plan plan[K];
  bool busy[K];

  ~Lanes() {
    secure_zero(st, sizeof st);
    for (Plan& p : plan) secure_zero(p.buf, sizeof p.buf);
  }

  void load_state(int l, const uint32_t h[8]) noexcept {
    for (int i = 0; i < 8; ++i) st[i][l] = h[i];
  }
  void save_state(int l, uint32_t h[8]) const noexcept {
    for (int i = 0; i < 8; ++i) h[i] = st[i][l];
  }
};

template <int K>
void run_lanes(const Batch& batch, size_t n, Kernel<K> kernel) noexcept {
  const Compress1 compress = scalar_compress();
  const int tail = tail_lanes<K>();
  Lanes<K> lanes;
  uint32_t h[8];
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t cn = std::min(kChunk, n - base);
    uint16_t order[kChunk];
    for (size_t i = 0; i < cn; ++i) order[i] = uint16_t(i);
    std::sort(order, order + cn, [&](uint16_t x, uint16_t y) {
      const size_t bx = batch.bytes(base + x), by = batch.bytes(base + y);
      return bx != by ? bx > by : x < y;
    });
    size_t next = 0;
    int active = 0;
    for (int l = 0; l < K; ++l) lanes.busy[l] = false;
    auto refill = [&](int l) {
      if (next < cn && size_t(cn - next) + size_t(active) >= size_t(tail)) {
        batch.start(base + order[next++], lanes.plan[l], h);
        lanes.load_state(l, h);
        lanes.busy[l] = true;
        ++active;
      }
    };
    for (int l = 0; l < K; ++l) refill(l);

    while (active >= tail) {
      size_t m = SIZE_MAX;
      int any = -1;
      for (int l = 0; l < K; ++l)
        if (lanes.busy[l]) {
          const Plan& p = lanes.plan[l];
          m = std::min(m, p.seg[p.cur].blocks);
          any = l;
        }
      const uint8_t* ptr[K];
      for (int l = 0; l < K; ++l) {
        const Plan& p = lanes.plan[lanes.busy[l] ? l : any];
        ptr[l] = p.seg[p.cur].p;
      }
      kernel(lanes.st, ptr, m);
      for (int l = 0; l < K; ++l) {
        if (!lanes.busy[l]) continue;
        Plan& p = lanes.plan[l];
        Seg& s = p.seg[p.cur];
        s.p += 64 * m;
        s.blocks -= m;
        if (s.blocks) continue;
        if (++p.cur < p.nseg) continue;
        lanes.save_state(l, h);
        if (p.outer_pending) {
          plan_outer(p, h);
          batch.outer_state(h);
          lanes.load_state(l, h);
          continue;
        }
        write_digest(p.out, h);
        lanes.busy[l] = false;
        --active;
        refill(l);
      }
    }
    // Too few lanes busy for the SIMD unit to pay: finish them, then any jobs never started,
    // one stream at a time.
    for (int l = 0; l < K; ++l) {
      if (!lanes.busy[l]) continue;
      lanes.save_state(l, h);
      finish_scalar(batch, lanes.plan[l], h, compress);
      lanes.busy[l] = false;
    }
    Plan& scratch = lanes.plan[0];
    for (; next < cn; ++next) {
      batch.start(base + order[next], scratch, h);
      finish_scalar(batch, scratch, h, compress);
    }
  }
  secure_zero(h, sizeof h);
}

// ---- One at a time -----------------------------------------------------------------------------

void sha256_one_by_one(ShaImpl impl, Sha256Job* jobs, size_t n) noexcept {
  Sha256 ctx(impl);
  for (size_t i = 0; i < n; ++i) {
    ctx.reset();
    if (jobs[i].len) ctx.update(jobs[i].data, jobs[i].len);
    ctx.final(jobs[i].out);
  }
}

void hmac_one_by_one(ShaImpl impl, const HmacSha256& key, HmacJob* jobs, size_t n) noexcept {
  Sha256 ctx(impl);
  uint8_t inner[32];
  for (size_t i = 0; i < n; ++i) {
    ctx.set_state(key.inner_state());
    if (jobs[i].len1) ctx.update(jobs[i].p1, jobs[i].len1);
    if (jobs[i].len2) ctx.update(jobs[i].p2, jobs[i].len2);
    ctx.final(inner);
    ctx.set_state(key.outer_state());
    ctx.update(inner, sizeof inner);
    ctx.final(jobs[i].tag);
  }
  secure_zero(inner, sizeof inner);
}

// ---- Dispatch ----------------------------------------------------------------------------------

bool avx512_ok() noexcept { return cpu().avx512f && cpu().avx512bw && cpu().avx512vl; }

ShaMbImpl resolve(ShaMbImpl impl) noexcept {
  if (impl == ShaMbImpl::best) return dispatch().sha256_mb;
  if (impl == ShaMbImpl::avx512x16 && !avx512_ok()) impl = ShaMbImpl::avx2x8;
  if (impl == ShaMbImpl::avx2x8 && !cpu().avx2) impl = ShaMbImpl::shani;
  if (impl == ShaMbImpl::shani && !shani_ok()) impl = ShaMbImpl::software;
  return impl;
}

}  // namespace

// Order chosen by measurement (see the top of this file): 16 AVX-512 lanes beat SHA-NI, which
// beats 8 AVX2 lanes; the portable table runs the portable code alone.
ShaMbImpl detail::sha256_mb_pick(bool portable) noexcept {
  if (portable) return ShaMbImpl::software;
  if (avx512_ok()) return ShaMbImpl::avx512x16;
  if (shani_ok()) return ShaMbImpl::shani;
  if (cpu().avx2) return ShaMbImpl::avx2x8;
  return ShaMbImpl::software;
}

void detail::sha256_mb_set_tail_lanes_for_testing(int lanes) noexcept {
  g_tail_override.store(lanes, std::memory_order_relaxed);
}

bool sha256_mb_impl_available(ShaMbImpl impl) noexcept {
  switch (impl) {
    case ShaMbImpl::avx512x16:
      return avx512_ok();
    case ShaMbImpl::avx2x8:
      return cpu().avx2;
    case ShaMbImpl::shani:
      return shani_ok();
    case ShaMbImpl::best:
    case ShaMbImpl::software:
      return true;
  }
  return false;
}

const char* sha256_mb_impl_name(ShaMbImpl impl) noexcept {
  switch (resolve(impl)) {
    case ShaMbImpl::avx512x16:
      return "avx512x16";
    case ShaMbImpl::avx2x8:
      return "avx2x8";
    case ShaMbImpl::shani:
      return "shani";
    default:
      return "software";
  }
}

const char* sha256_mb_impl_name() noexcept { return sha256_mb_impl_name(ShaMbImpl::best); }

namespace {

// The one switch on the implementation: the lanes of the multi-buffer kernels, or one job at a
// time (one_by_one(ShaImpl)) with SHA-NI or the portable code.
template <class OneByOne>
void run_with(ShaMbImpl impl, Batch& batch, size_t n, const OneByOne& one_by_one) noexcept {
  switch (resolve(impl)) {
    case ShaMbImpl::avx512x16:
      return run_lanes<16>(batch, n, &detail::sha256_x16_avx512);
    case ShaMbImpl::avx2x8:
      return run_lanes<8>(batch, n, &detail::sha256_x8_avx2);
    case ShaMbImpl::shani:
      return one_by_one(ShaImpl::shani);
    default:
      return one_by_one(ShaImpl::software);
  }
}

}  // namespace

void sha256_many_with(ShaMbImpl impl, Sha256Job* jobs, size_t n) noexcept {
  Batch batch;
  batch.sjobs = jobs;
  run_with(impl, batch, n, [&](ShaImpl one) { sha256_one_by_one(one, jobs, n); });
}

void hmac_sha256_many_with(ShaMbImpl impl, const HmacSha256& key, HmacJob* jobs, size_t n) noexcept {
  Batch batch;
  batch.hjobs = jobs;
  batch.key = &key;
  run_with(impl, batch, n, [&](ShaImpl one) { hmac_one_by_one(one, key, jobs, n); });
}

void sha256_many(Sha256Job* jobs, size_t n) noexcept { sha256_many_with(ShaMbImpl::best, jobs, n); }

void hmac_sha256_many(const HmacSha256& key, HmacJob* jobs, size_t n) noexcept {
  hmac_sha256_many_with(ShaMbImpl::best, key, jobs, n);
}

}  // namespace aesxfer::crypto
