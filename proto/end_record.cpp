#include "proto/end_record.h"

#include <cstring>

#include "crypto/util.h"

namespace aesxfer::proto {

size_t encode_end(uint8_t* out, const EndRecord& e) noexcept {
  crypto::store_be64(out, e.length);
  out[8] = uint8_t(e.checksum.alg);
  const size_t n = crypto::checksum_len(e.checksum.alg);
  std::memcpy(out + 9, e.checksum.bytes.data(), n);
  return 9 + n;
}

std::optional<EndRecord> decode_end(std::span<const uint8_t> p) noexcept {
  if (p.size() < 9 || !crypto::checksum_known(p[8])) return std::nullopt;
  EndRecord e;
  e.length = crypto::load_be64(p.data());
  e.checksum.alg = crypto::ChecksumAlg(p[8]);
  e.checksum.len = crypto::checksum_len(e.checksum.alg);
  if (p.size() != 9 + e.checksum.len) return std::nullopt;
  std::memcpy(e.checksum.bytes.data(), p.data() + 9, e.checksum.len);
  return e;
}

}  // namespace aesxfer::proto
