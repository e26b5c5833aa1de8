// The vector-permute AES (crypto/aes_vperm_impl.h) built for SSSE3: impl "vperm", the portable
// constant-time choice when AES-NI is missing or masked. Compiled with -mssse3 (file-name
// suffix); only called when CPUID reports SSSE3.
#define AESXFER_VPERM_NAME "vperm"
#define AESXFER_VPERM_FACTORY make_aes128_vperm
#include "crypto/aes_vperm_impl.h"
