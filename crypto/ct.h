// Constant-time checking hooks (docs/SECURITY.md, "What is proven, and how").
//
// Built with -DAESXFER_CT_CHECK=ON, the tests in tests/ct/ mark secrets (keys, plaintext, tags
// under comparison) as undefined memory for valgrind's memcheck with ct_secret(); memcheck then
// reports every branch and every memory address computed from them. The product code calls
// ct_public() at the few places where a value derived from secrets becomes public by design: the
// verdict of a tag comparison (the peer sees whether its record was accepted) and the verdict and
// length of a CBC padding check (the payload length the receiver acts on). Everything before
// those points must be free of secret-dependent branches and addresses, and memcheck checks that.
// In a normal build (and outside valgrind) both are no-ops.
#pragma once
#include <cstddef>

#ifdef AESXFER_CT_CHECK
#include <valgrind/memcheck.h>
#endif

namespace aesxfer::crypto {

inline void ct_secret(const void* p, size_t n) noexcept {
#ifdef AESXFER_CT_CHECK
  (void)VALGRIND_MAKE_MEM_UNDEFINED(p, n);
#else
  (void)p;
  (void)n;
#endif
}

inline void ct_public(const void* p, size_t n) noexcept {
#ifdef AESXFER_CT_CHECK
  (void)VALGRIND_MAKE_MEM_DEFINED(p, n);
#else
  (void)p;
  (void)n;
#endif
}

}  // namespace aesxfer::crypto
