// The lane scheduler of the interleaved CBC encryptions (AES-NI x8, vperm x4): keeps up to kWidth
// lanes that still have blocks active, runs them together for as many blocks as the shortest has
// left, retires the finished ones (keeping the order of the others) and refills from the list.
// Scalar bookkeeping only, inlined into each instruction-set file; the ISA work is `step`, a
// template lambda called as step.template operator()<N>(act, done, steps) for N active lanes,
// which must advance each act[j]'s chain by `steps` blocks and add `steps` to done[j].
#pragma once
#include <cstddef>

#include "crypto/block_cipher.h"

namespace aesxfer::crypto::detail {

// Fills act (up to width lanes, na active now) from lanes[next..n), skipping empty chains;
// returns the new count. Static for the same reason as retire_done_lanes below.
static inline size_t refill_lanes(CbcLane* lanes, size_t n, size_t& next, CbcLane** act, size_t* done,
                                  size_t na, size_t width) noexcept {
  for (; na < width && next < n; ++next) {
    if (lanes[next].blocks == 0) continue;
    act[na] = &lanes[next];
    done[na++] = 0;
  }
  return na;
}

// Drops the lanes whose chains are done (done[j] == blocks), keeping the order of the others;
// returns how many remain. Internal linkage (static): every instruction-set file compiles its own
// copy with its own flags, so no linker ever picks an AVX-512 build of it for an SSE file.
static inline size_t retire_done_lanes(CbcLane** act, size_t* done, size_t na) noexcept {
  size_t kept = 0;
  for (size_t j = 0; j < na; ++j) {
    if (done[j] < act[j]->blocks) {
      act[kept] = act[j];
      done[kept] = done[j];
      ++kept;
    }
  }
  return kept;
}

template <size_t N, typename Step>
inline void run_lanes_of_width(size_t na, Step& step, CbcLane* const* act, size_t* done,
                               size_t steps) noexcept {
  if constexpr (N == 1) {
    step.template operator()<1>(act, done, steps);
  } else {
    if (na >= N)
      step.template operator()<int(N)>(act, done, steps);
    else
      run_lanes_of_width<N - 1>(na, step, act, done, steps);
  }
}

template <size_t kWidth, typename Step>
inline void schedule_cbc_lanes(CbcLane* lanes, size_t n, Step step) noexcept {
  CbcLane* act[kWidth];
  size_t done[kWidth];
  size_t na = 0, next = 0;
  for (;;) {
    na = refill_lanes(lanes, n, next, act, done, na, kWidth);
    if (na == 0) break;
    size_t steps = act[0]->blocks - done[0];
    for (size_t j = 1; j < na; ++j)
      if (act[j]->blocks - done[j] < steps) steps = act[j]->blocks - done[j];
    run_lanes_of_width<kWidth>(na, step, act, done, steps);
    na = retire_done_lanes(act, done, na);
  }
}

}  // namespace aesxfer::crypto::detail
