// The vector-permute AES (crypto/aes_vperm_impl.h) built with AVX-512VL encodings: impl
// "vperm512", the same constant-time algorithm with no AES instruction, preferred over "vperm"
// when CPUID reports AVX-512F/BW/VL. Compiled with -mavx2 -mavx512f -mavx512bw -mavx512vl
// (file-name suffix).
#define AESXFER_VPERM_NAME "vperm512"
#define AESXFER_VPERM_FACTORY make_aes128_vperm512
#include "crypto/aes_vperm_impl.h"
