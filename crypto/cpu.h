// CPU feature detection and the one start-up choice of implementations.
//
// cpu() reads CPUID once. The portable override (--no-aesni on the command line or
// AESXFER_NO_AESNI=1 in the environment) masks every crypto extension (AES-NI, VAES,
// PCLMULQDQ, VPCLMULQDQ, SHA-NI), so the whole suite runs on the constant-time portable code,
// like a CPU without them. Call set_no_aesni() before the first cipher is made.
#pragma once

namespace aesxfer::crypto {

struct CpuFeatures {
  bool sse41 = false, ssse3 = false, avx2 = false;
  bool aesni = false, pclmul = false, shani = false;
  bool avx512f = false, avx512bw = false, avx512vl = false;
  bool vaes = false, vpclmul = false;
};

// Features of this CPU as the implementations may use them (after the override).
const CpuFeatures& cpu() noexcept;
// Features the hardware has, ignoring the override.
const CpuFeatures& cpu_hardware() noexcept;

// Forces the portable implementations (true) or restores hardware detection (false).
// Reads AESXFER_NO_AESNI the first time cpu() is called when this was never called.
void set_no_aesni(bool on) noexcept;
bool no_aesni() noexcept;

// One line naming the CPU model, as /proc/cpuinfo or CPUID's brand string gives it.
const char* cpu_model() noexcept;

}  // namespace aesxfer::crypto
