// The end-to-end file checksum a transfer carries in its end record (docs/PROTOCOL.md 3.1, 4.3).
//
// The record MACs and AEAD tags already authenticate every byte, its order and the end of the
// stream; this checksum is there for faults outside the cryptography (our own pipeline, memory,
// disk), as rsync's whole-file checksum is. So the default is XXH3-128 (about 20 times cheaper
// than SHA-256 here), chosen by the client in the signed handshake; SHA-256 and none stay
// available. The digest is byte for byte what `xxh128sum` and `sha256sum` print.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "crypto/dispatch.h"
#include "crypto/sha256.h"

namespace aesxfer::crypto {

// Wire ids (docs/PROTOCOL.md 4.3).
enum class ChecksumAlg : uint8_t { none = 0, sha256 = 1, xxh128 = 2 };
constexpr ChecksumAlg kDefaultChecksum = ChecksumAlg::xxh128;
constexpr size_t kMaxChecksumLen = 32;

const char* checksum_name(ChecksumAlg a) noexcept;  // "none", "sha256", "xxh128"
size_t checksum_len(ChecksumAlg a) noexcept;        // 0, 32, 16
// Case-insensitive; false for an unknown name.
bool find_checksum(std::string_view name, ChecksumAlg& out) noexcept;
// A wire id this build knows.
bool checksum_known(uint8_t wire_id) noexcept;
std::string checksum_names();  // "xxh128, sha256, none"

// XXH3 implementations, chosen once by CPUID (AVX-512, AVX2, SSE2: libxxhash's own vector code,
// compiled three times by the ISA file-name rule).
const char* xxh_impl_name(XxhImpl) noexcept;  // best: what dispatch() chose
bool xxh_impl_available(XxhImpl) noexcept;

// A finished checksum: the algorithm and its digest (len bytes of bytes).
struct Checksum {
  ChecksumAlg alg = ChecksumAlg::none;
  std::array<uint8_t, kMaxChecksumLen> bytes{};
  size_t len = 0;
  std::string hex() const;  // lower-case, as xxh128sum / sha256sum print it; "" for none
};

// A streaming checksum of one algorithm. Copyable (resume continues from a copied state).
class FileChecksum {
 public:
  explicit FileChecksum(ChecksumAlg alg = kDefaultChecksum, XxhImpl impl = XxhImpl::best) noexcept;
  FileChecksum(const FileChecksum&) noexcept = default;
  FileChecksum& operator=(const FileChecksum&) noexcept = default;

  ChecksumAlg alg() const noexcept { return alg_; }
  void update(const void* data, size_t len) noexcept;
  Checksum final() noexcept;  // the state is spent afterwards
  const char* impl() const noexcept;

 private:
  ChecksumAlg alg_;
  XxhImpl impl_;
  Sha256 sha_;
  alignas(64) uint8_t xxh_[576];  // XXH3_state_t (size checked in checksum.cpp)
};

// Internal: one XXH3-128 implementation (crypto/xxh3_*.cpp).
struct Xxh3Ops {
  void (*reset)(void* state) noexcept;
  void (*update)(void* state, const void* data, size_t len) noexcept;
  void (*digest)(const void* state, uint8_t out[16]) noexcept;
};
const Xxh3Ops& xxh3_sse2_ops() noexcept;
const Xxh3Ops& xxh3_avx2_ops() noexcept;
const Xxh3Ops& xxh3_avx512_ops() noexcept;

}  // namespace aesxfer::crypto
