// The fixed direction keys of the record fuzz targets and of the seeds make_corpus writes for
// them: a seed opens only under the keys it was sealed with.
#pragma once
#include <cstdint>

#include "proto/record.h"

namespace aesxfer::fuzz {

inline proto::DirectionKeys fixed_keys() {
  proto::DirectionKeys k{};
  for (int i = 0; i < 32; ++i) k.enc[i] = uint8_t(i);
  for (int i = 0; i < 32; ++i) k.mac[i] = uint8_t(0x20 + i);
  for (int i = 0; i < 16; ++i) k.iv[i] = uint8_t(0x40 + i);
  return k;
}

}  // namespace aesxfer::fuzz
