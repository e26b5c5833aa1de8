#include "crypto/cpu.h"

#include <cpuid.h>

#include <cstring>
#include <mutex>

namespace aesxfer::crypto {
namespace {

uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.ssse3 = c & bit_SSSE3;
  f.sse41 = c & bit_SSE4_1;
  f.aesni = c & bit_AES;
  f.pclmul = c & bit_PCLMUL;
  const bool osxsave = c & bit_OSXSAVE;
  const bool avx = c & bit_AVX;
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm_ok = avx && (xcr0 & 0x6) == 0x6;
  const bool zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ymm_ok && (b & bit_AVX2);
    f.shani = b & bit_SHA;
    f.avx512f = zmm_ok && (b & bit_AVX512F);
    f.avx512bw = zmm_ok && (b & bit_AVX512BW);
    f.avx512vl = zmm_ok && (b & bit_AVX512VL);
    f.vaes = ymm_ok && (c & bit_VAES);
    f.vpclmul = ymm_ok && (c & bit_VPCLMULQDQ);
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu() noexcept {
  static const CpuFeatures f = detect();  // thread-safe initialisation (C++11 magic statics)
  return f;
}

const char* cpu_model() noexcept {
  static char brand[49] = {0};
  static std::once_flag once;
  std::call_once(once, [] {
    unsigned regs[12] = {0};
    unsigned max = __get_cpuid_max(0x80000000, nullptr);
    if (max >= 0x80000004) {
      for (unsigned i = 0; i < 3; ++i)
        __get_cpuid(0x80000002 + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
      std::memcpy(brand, regs, 48);
    }
    char* p = brand;
    while (*p == ' ') ++p;
    if (p != brand) std::memmove(brand, p, std::strlen(p) + 1);
    for (size_t n = std::strlen(brand); n > 0 && brand[n - 1] == ' '; --n) brand[n - 1] = 0;
    if (!brand[0]) std::strcpy(brand, "unknown x86-64 CPU");
  });
  return brand;
}

}  // namespace aesxfer::crypto
