// XXH3-128 built for sse2 (see xxh3_impl.h).
#define XXH3_OPS_FN xxh3_sse2_ops
#include "crypto/xxh3_impl.h"
