// CPU feature detection: what the hardware has, read once by CPUID. Which implementation runs is
// decided once from these in crypto/dispatch.h (the portable override lives there).
#pragma once

namespace aesxfer::crypto {

struct CpuFeatures {
  bool sse41 = false, ssse3 = false, avx2 = false;
  bool aesni = false, pclmul = false, shani = false;
  bool avx512f = false, avx512bw = false, avx512vl = false;
  bool vaes = false, vpclmul = false;
};

// Features of this CPU (thread-safe; read once).
const CpuFeatures& cpu() noexcept;

// One line naming the CPU model, as /proc/cpuinfo or CPUID's brand string gives it.
const char* cpu_model() noexcept;

}  // namespace aesxfer::crypto
