// The implementations this process runs, chosen once (libsodium's pick_best_implementation).
//
// Two tables are filled together, the first time either is asked for, under std::call_once:
//   Impl::best      the fastest implementation of each primitive this CPU runs, or the portable
//                   table when the portable override is on (--no-aesni, AESXFER_NO_AESNI=1);
//   Impl::portable  the constant-time portable code: no AES-NI, VAES, PCLMULQDQ or SHA-NI.
// Nothing changes them afterwards. Code that must run the portable code while the rest of the
// process runs the best (speed --no-aesni-too, bench, tests) asks for dispatch(Impl::portable)
// and hands it to the factories; nothing flips a global.
#pragma once
#include <cstdint>

namespace aesxfer::crypto {

enum class Impl : uint8_t { best, portable };

enum class AesImpl { best, aesni, vaes, software, vperm, vperm512 };
enum class GhashImpl : uint8_t { portable, pclmul, vpclmul };
enum class ShaImpl { best, shani, software };
enum class ShaMbImpl { best, avx512x16, avx2x8, shani, software };
enum class XxhImpl { best, avx512, avx2, sse2 };

// The chosen implementation of every primitive with more than one (never `best`).
struct Dispatch {
  Impl which;
  AesImpl aes;          // AES-128 block function, CBC and CTR kernels (crypto/aes.h)
  GhashImpl ghash;      // GHASH of AES-128-GCM; follows aes (crypto/gcm.h)
  ShaImpl sha256;       // one-stream SHA-256 and HMAC-SHA256 (crypto/sha256.h)
  ShaMbImpl sha256_mb;  // multi-buffer SHA-256 and HMAC-SHA256 (crypto/sha256_mb.h)
  XxhImpl xxh3;         // XXH3-128 file checksum (crypto/checksum.h); no crypto extension in it
};

// Makes the start-up choice: the best table is the portable one when force_portable is set or
// AESXFER_NO_AESNI is set (non-empty, not "0"). Call it once, before anything asks for a table
// (main does, right after parsing the command line). Returns false, and changes nothing, when the
// tables were already filled with the other choice.
bool init_dispatch(bool force_portable) noexcept;

// One of the two tables; the first call fills them (environment only) if init_dispatch was not
// called. Thread-safe; the reference stays valid for the life of the process.
const Dispatch& dispatch(Impl which = Impl::best) noexcept;

// True when the portable override made the best table the portable one.
bool no_aesni() noexcept;

const char* ghash_impl_name(GhashImpl) noexcept;  // "portable", "pclmulqdq", "vpclmulqdq"

namespace detail {
// Each primitive's pick (in its own file), called only while the tables are filled.
AesImpl aes_pick(bool portable) noexcept;
GhashImpl ghash_pick(AesImpl aes) noexcept;
ShaImpl sha256_pick(bool portable) noexcept;
ShaMbImpl sha256_mb_pick(bool portable) noexcept;
XxhImpl xxh3_pick() noexcept;
}  // namespace detail

}  // namespace aesxfer::crypto
