// libFuzzer target: the record layer over each cipher and MAC with fixed keys.
//
// Input: byte 0 = cipher index, byte 1 = MAC index (bit 7 set: round-trip mode), byte 2 = chunk
// size - 1 (0: all at once), then either a byte stream for RecordReader/RecordOpener, or (round
// trip) a payload that must come back unchanged through RecordSealer and RecordOpener.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "crypto/suite.h"
#include "proto/record.h"
#include "proto/record_reader.h"
#include "tests/fuzz/fixed_keys.h"

using namespace aesxfer;
using fuzz::fixed_keys;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  auto ciphers = crypto::ciphers();
  auto macs = crypto::macs();
  const crypto::CipherDesc& c = ciphers[data[0] % ciphers.size()];
  const crypto::MacDesc& m = macs[(data[1] & 0x7f) % macs.size()];
  const bool round_trip = data[1] & 0x80;
  const size_t chunk = data[2];
  data += 3;
  size -= 3;
  const proto::DirectionKeys keys = fixed_keys();
  proto::RecordOpener opener(c, m, keys);

  if (round_trip) {
    // Payload types cycle through data/control/end so every sealing path runs.
    if (size > proto::kMaxPayload) size = proto::kMaxPayload;
    proto::RecordSealer sealer(c, m, keys);
    std::vector<uint8_t> rec(proto::kHeaderLen + size + sealer.max_overhead());
    auto type = size % 3 == 0   ? proto::RecordType::end
                : size % 3 == 1 ? proto::RecordType::data
                                : proto::RecordType::control;
    uint8_t flags = type == proto::RecordType::end ? proto::kFlagFinal : 0;
    if (size) std::memcpy(rec.data() + proto::kHeaderLen, data, size);
    size_t n = sealer.seal(type, flags, rec.data(), size);
    if (n > rec.size()) __builtin_trap();
    proto::RecordHeader hdr{};
    std::error_code ec;
    size_t rest = opener.parse_header(rec.data(), hdr, ec);
    if (ec || proto::kHeaderLen + rest != n) __builtin_trap();
    std::span<uint8_t> payload;
    ec = opener.open(rec.data(), n, hdr, payload);
    if (ec || payload.size() != size || hdr.type != type) __builtin_trap();
    if (size && std::memcmp(payload.data(), data, size) != 0) __builtin_trap();
    return 0;
  }

  proto::RecordReader reader(opener);
  size_t off = 0;
  while (off < size) {
    size_t k = chunk == 0 ? size - off : std::min<size_t>(chunk, size - off);
    size_t used = reader.feed(data + off, k);
    off += used;
    proto::RecordHeader hdr{};
    std::span<uint8_t> payload;
    std::error_code ec;
    proto::RecordReader::Status st;
    while ((st = reader.next(hdr, payload, ec)) == proto::RecordReader::Status::record) {
      if (payload.size() > proto::kMaxPayload) __builtin_trap();
    }
    if (st == proto::RecordReader::Status::error) return 0;
    if (used == 0) __builtin_trap();  // need_more, yet nothing consumed
  }
  return 0;
}
