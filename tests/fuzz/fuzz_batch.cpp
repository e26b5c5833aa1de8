// libFuzzer target: RecordOpener::open_batch, the receive path of the data plane in production
// (net/transfer.cpp's BatchReader opens GCM records 2 at a time and CBC + HMAC records 16 at a
// time), over each cipher and MAC with fixed keys.
//
// Input: byte 0 = cipher index, byte 1 = MAC index (bit 7 set: round-trip mode), byte 2 = records
// per batch - 1 (mod 16), then
//   - a byte stream cut into records as Conn::read_record does (parse_header, then exactly the
//     bytes it asks for), each record in a buffer of its own size (so ASan sees any read past it),
//     opened batch by batch: on success every payload lies inside its record and next_seq()
//     advanced by the batch; on failure next_seq() did not move and the stream ends, as the
//     connection would;
//   - or (round trip) byte 3 = tamper selector (0: none; else one bit flipped in one record,
//     bytes 4-5 its position), then payloads: the records are sealed with seal_batch and opened
//     with open_batch; untouched they must come back unchanged, and with an authenticated
//     cipher or MAC any flipped bit must fail the whole batch.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "crypto/suite.h"
#include "proto/record.h"
#include "tests/fuzz/fixed_keys.h"

using namespace aesxfer;

namespace {

using Bytes = std::vector<uint8_t>;

using fuzz::fixed_keys;

// Payloads inside their records: the opener may only point into the buffer it was given.
void check_payloads(const proto::OpenJob* jobs, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const auto& j = jobs[i];
    if (j.payload.size() > proto::kMaxPayload) __builtin_trap();
    if (!j.payload.empty() && (j.payload.data() < j.rec + proto::kHeaderLen ||
                               j.payload.data() + j.payload.size() > j.rec + j.rec_len))
      __builtin_trap();
  }
}

void hostile_stream(proto::RecordOpener& opener, size_t per_batch, const uint8_t* data, size_t size) {
  size_t off = 0;
  for (;;) {
    std::vector<Bytes> recs;
    while (recs.size() < per_batch && size - off >= proto::kHeaderLen) {
      proto::RecordHeader hdr{};
      std::error_code ec;
      const size_t rest = opener.parse_header(data + off, hdr, ec);
      if (ec) return;  // the connection ends at a bad header
      if (size - off - proto::kHeaderLen < rest) break;
      recs.emplace_back(data + off, data + off + proto::kHeaderLen + rest);
      off += proto::kHeaderLen + rest;
      if (hdr.type != proto::RecordType::data) break;  // an end or control record closes a batch
    }
    if (recs.empty()) return;
    std::vector<proto::OpenJob> jobs;
    for (Bytes& r : recs) jobs.push_back({r.data(), r.size(), {}, {}});
    const uint64_t seq = opener.next_seq();
    if (opener.open_batch(jobs.data(), jobs.size())) {
      if (opener.next_seq() != seq) __builtin_trap();
      return;
    }
    if (opener.next_seq() != seq + jobs.size()) __builtin_trap();
    check_payloads(jobs.data(), jobs.size());
  }
}

void round_trip(const crypto::CipherDesc& c, const crypto::MacDesc& m, size_t per_batch, const uint8_t* data,
                size_t size) {
  if (size < 3) return;
  const uint8_t tamper = data[0];
  const size_t bit = size_t(data[1]) << 8 | data[2];
  data += 3;
  size = std::min(size - 3, proto::kMaxPayload);
  const proto::DirectionKeys keys = fixed_keys();
  proto::RecordSealer sealer(c, m, keys);
  proto::RecordOpener opener(c, m, keys);
  // Payload i is the i-th of per_batch nearly equal slices; the last record may be an end record.
  std::vector<Bytes> recs(per_batch);
  std::vector<proto::SealJob> seal(per_batch);
  size_t at = 0;
  for (size_t i = 0; i < per_batch; ++i) {
    const size_t len = (size - at) / (per_batch - i);
    recs[i].assign(proto::kHeaderLen + len + sealer.max_overhead(), 0);
    if (len) std::memcpy(recs[i].data() + proto::kHeaderLen, data + at, len);
    at += len;
    const bool end = i + 1 == per_batch && len % 2 == 1;
    seal[i] = {end ? proto::RecordType::end : proto::RecordType::data, uint8_t(end ? proto::kFlagFinal : 0),
               recs[i].data(), len, 0};
  }
  sealer.seal_batch(seal.data(), per_batch);
  std::vector<proto::OpenJob> jobs;
  for (size_t i = 0; i < per_batch; ++i) {
    if (seal[i].wire_len > recs[i].size()) __builtin_trap();
    recs[i].resize(seal[i].wire_len);
    jobs.push_back({recs[i].data(), recs[i].size(), {}, {}});
  }
  Bytes& victim = recs[tamper % per_batch];
  if (tamper) victim[(bit / 8) % victim.size()] ^= uint8_t(1u << (bit % 8));
  const std::error_code ec = opener.open_batch(jobs.data(), per_batch);
  const bool authenticated = c.aead || m.tag_len > 0;
  if (tamper && authenticated && !ec) __builtin_trap();  // a flipped bit got through
  if (tamper) return;
  if (ec) __builtin_trap();  // what the sealer made must open
  check_payloads(jobs.data(), per_batch);
  at = 0;
  for (size_t i = 0; i < per_batch; ++i) {
    const size_t len = seal[i].payload_len;
    if (jobs[i].payload.size() != len || jobs[i].hdr.type != seal[i].type) __builtin_trap();
    if (len && std::memcmp(jobs[i].payload.data(), data + at, len) != 0) __builtin_trap();
    at += len;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  auto ciphers = crypto::ciphers();
  auto macs = crypto::macs();
  const crypto::CipherDesc& c = ciphers[data[0] % ciphers.size()];
  const crypto::MacDesc& m = macs[(data[1] & 0x7f) % macs.size()];
  const bool rt = data[1] & 0x80;
  const size_t per_batch = size_t(data[2] % 16) + 1;
  if (rt) {
    round_trip(c, m, per_batch, data + 3, size - 3);
  } else {
    proto::RecordOpener opener(c, m, fixed_keys());
    hostile_stream(opener, per_batch, data + 3, size - 3);
  }
  return 0;
}
