// XXH3-128 built for avx2 (see xxh3_impl.h).
#define XXH3_OPS_FN xxh3_avx2_ops
#include "crypto/xxh3_impl.h"
