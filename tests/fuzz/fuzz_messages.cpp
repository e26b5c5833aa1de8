// libFuzzer target: proto::decode on arbitrary control-record payloads. Whatever decodes must
// re-encode to something that decodes to the same encoding (encode/decode are inverse on valid
// messages), and never hold a NUL in a path.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "proto/messages.h"

using namespace aesxfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = proto::decode(std::span<const uint8_t>(data, size));
  if (!m) return 0;
  if (m->path.find('\0') != std::string::npos) __builtin_trap();
  if (m->path.size() > proto::kMaxPath) __builtin_trap();
  std::vector<uint8_t> a, b;
  proto::encode(*m, a);
  auto m2 = proto::decode(a);
  if (!m2) __builtin_trap();
  proto::encode(*m2, b);
  if (a != b) __builtin_trap();
  return 0;
}
