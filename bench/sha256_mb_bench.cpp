// Multi-buffer SHA-256 throughput, one thread: every sha256_mb implementation this CPU has
// (forced), and OpenSSL's SHA256() one message at a time for reference, over batches of
// equal-length messages at 16 KiB, 256 KiB and 1 MiB; plus HMAC jobs shaped like records
// (16-byte prefix + body). GB/s = message bytes / second (1e9), median of --runs runs, each run
// rounds; each round gives every implementation one ~40 ms slice in turn.
//
//   sha256_mb_bench [--jobs N] [--runs R] [--tail L] [--no-aesni]
//
// --tail L overrides the lane count below which the SIMD paths finish one stream at a time
// (1: SIMD to the end), to measure the crossover behind the default.
#include <openssl/sha.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "crypto/cpu.h"
#include "crypto/sha256.h"
#include "crypto/sha256_mb.h"

namespace {

namespace cr = aesxfer::crypto;
using Clock = std::chrono::steady_clock;

// GB/s of one time slice (at least ~40 ms) of fn, which processes `bytes` message bytes per call.
double slice(const std::function<void()>& fn, double bytes) {
  int iters = 0;
  const auto t0 = Clock::now();
  double secs = 0;
  do {
    fn();
    ++iters;
    secs = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (secs < 0.04);
  return bytes * iters / secs / 1e9;
}

// Median GB/s of each of fns over `runs` rounds; each round runs every fn for one slice in turn,
// so that load from other processes or a frequency change hits all of them alike.
std::vector<double> measure(const std::vector<std::function<void()>>& fns, double bytes, int runs) {
  for (const auto& f : fns) f();  // warm up
  std::vector<std::vector<double>> rates(fns.size());
  for (int r = 0; r < runs; ++r)
    for (size_t i = 0; i < fns.size(); ++i) rates[i].push_back(slice(fns[i], bytes));
  std::vector<double> med;
  for (auto& v : rates) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

}  // namespace

int main(int argc, char** argv) {
  size_t jobs_n = 32;
  int runs = 7;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--jobs") && i + 1 < argc) {
      jobs_n = std::strtoul(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tail") && i + 1 < argc) {
      cr::detail::sha256_mb_set_tail_lanes_for_testing(std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--no-aesni")) {
      cr::init_dispatch(true);  // before anything asks for the dispatch
    } else {
      std::fprintf(stderr, "usage: sha256_mb_bench [--jobs N] [--runs R] [--tail L] [--no-aesni]\n");
      return 2;
    }
  }
  if (jobs_n == 0 || runs < 1) return 2;

  std::printf("CPU: %s\nsha256_many picks: %s; %zu messages per batch, median of %d runs, GB/s\n",
              cr::cpu_model(), cr::sha256_mb_impl_name(), jobs_n, runs);

  const cr::ShaMbImpl all[] = {cr::ShaMbImpl::software, cr::ShaMbImpl::shani, cr::ShaMbImpl::avx2x8,
                               cr::ShaMbImpl::avx512x16, cr::ShaMbImpl::best};
  std::vector<cr::ShaMbImpl> impls;
  for (cr::ShaMbImpl i : all)
    if (i == cr::ShaMbImpl::best || (cr::sha256_mb_impl_available(i) && !cr::no_aesni()) ||
        i == cr::ShaMbImpl::software)
      impls.push_back(i);

  std::printf("%-22s", "size");
  for (cr::ShaMbImpl i : impls)
    std::printf(" %10s", i == cr::ShaMbImpl::best ? "best" : cr::sha256_mb_impl_name(i));
  std::printf(" %10s\n", "openssl");

  std::mt19937_64 rng(1);
  const uint8_t key[32] = {1, 2, 3};
  cr::HmacSha256 hkey(key, sizeof key);
  for (size_t size : {size_t(1) << 10, size_t(16) << 10, size_t(256) << 10, size_t(1) << 20}) {
    std::vector<uint8_t> buf(jobs_n * size + 16);
    for (auto& b : buf) b = uint8_t(rng());
    std::vector<uint8_t> outs(32 * jobs_n);
    std::vector<cr::Sha256Job> jobs(jobs_n);
    std::vector<cr::HmacJob> hjobs(jobs_n);
    const double bytes = double(size) * double(jobs_n);

    std::vector<std::function<void()>> hash_fns, hmac_fns;
    for (cr::ShaMbImpl impl : impls) {
      hash_fns.push_back([&, impl] {
        for (size_t j = 0; j < jobs_n; ++j) jobs[j] = {buf.data() + j * size, size, outs.data() + 32 * j};
        cr::sha256_many_with(impl, jobs.data(), jobs_n);
      });
      hmac_fns.push_back([&, impl] {
        for (size_t j = 0; j < jobs_n; ++j)
          hjobs[j] = {buf.data() + j * size, 16, buf.data() + j * size + 16, size, outs.data() + 32 * j};
        cr::hmac_sha256_many_with(impl, hkey, hjobs.data(), jobs_n);
      });
    }
    hash_fns.push_back([&] {
      for (size_t j = 0; j < jobs_n; ++j) SHA256(buf.data() + j * size, size, outs.data() + 32 * j);
    });
    std::printf("SHA-256 %4zu KiB       ", size >> 10);
    for (double g : measure(hash_fns, bytes, runs)) std::printf(" %10.3f", g);
    std::printf("\nHMAC 16+%4zu KiB      ", size >> 10);
    for (double g : measure(hmac_fns, bytes, runs)) std::printf(" %10.3f", g);
    std::printf(" %10s\n", "-");
    std::fflush(stdout);
  }

  // Records of mixed lengths, uniform in [1 KiB, 1 MiB]: the scheduler's refill and tail at work.
  {
    std::vector<size_t> lens(jobs_n), offs(jobs_n);
    size_t total = 0;
    for (size_t j = 0; j < jobs_n; ++j) {
      lens[j] = 1024 + rng() % ((size_t(1) << 20) - 1024 + 1);
      offs[j] = total;
      total += lens[j];
    }
    std::vector<uint8_t> buf(total + 16);
    for (auto& b : buf) b = uint8_t(rng());
    std::vector<uint8_t> outs(32 * jobs_n);
    std::vector<cr::HmacJob> hjobs(jobs_n);
    std::vector<std::function<void()>> fns;
    for (cr::ShaMbImpl impl : impls)
      fns.push_back([&, impl] {
        for (size_t j = 0; j < jobs_n; ++j)
          hjobs[j] = {buf.data() + offs[j], 16, buf.data() + offs[j] + 16, lens[j] - 16,
                      outs.data() + 32 * j};
        cr::hmac_sha256_many_with(impl, hkey, hjobs.data(), jobs_n);
      });
    std::printf("HMAC mixed 1K..1M     ");
    for (double g : measure(fns, double(total), runs)) std::printf(" %10.3f", g);
    std::printf(" %10s\n", "-");
  }
  return 0;
}
