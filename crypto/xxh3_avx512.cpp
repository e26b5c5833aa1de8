// XXH3-128 built for avx512 (see xxh3_impl.h).
#define XXH3_OPS_FN xxh3_avx512_ops
#include "crypto/xxh3_impl.h"
