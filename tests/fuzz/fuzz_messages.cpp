// libFuzzer target: proto::decode and proto::decode_list_page on arbitrary control-record
// payloads. Whatever decodes must re-encode to something that decodes to the same encoding
// (encode/decode are inverse on valid messages), and never hold a NUL in a path; a listing page
// must re-encode to the input itself and hold only paths a receiver may create; so must an end
// record (proto::decode_end: the length and the whole-file checksum that close every stream).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "proto/end_record.h"
#include "proto/listing.h"
#include "proto/messages.h"

using namespace aesxfer;

static void check_list_page(const uint8_t* data, size_t size) {
  auto p = proto::decode_list_page(std::span<const uint8_t>(data, size));
  if (!p) return;
  for (const auto& e : p->entries)  // "." only counts names left out of the listed directory
    if (!proto::valid_list_path(e.path) && !(e.type == proto::EntryType::left_out && e.path == "."))
      __builtin_trap();
  std::vector<uint8_t> a;
  proto::encode_list_page(*p, a);
  if (a.size() != size || !std::equal(a.begin(), a.end(), data)) __builtin_trap();
}

static void check_end_record(const uint8_t* data, size_t size) {
  auto e = proto::decode_end(std::span<const uint8_t>(data, size));
  if (!e) return;
  uint8_t out[proto::kMaxEndPayload];
  const size_t n = proto::encode_end(out, *e);
  if (n != size || !std::equal(out, out + n, data)) __builtin_trap();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_list_page(data, size);
  check_end_record(data, size);
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
