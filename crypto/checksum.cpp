#include "crypto/checksum.h"

#include <cstring>

#include "crypto/cpu.h"
#include "crypto/util.h"

namespace aesxfer::crypto {
namespace {

XxhImpl resolve(XxhImpl i) noexcept { return i == XxhImpl::best ? dispatch().xxh3 : i; }

const Xxh3Ops& ops(XxhImpl i) noexcept {
  switch (i) {
    case XxhImpl::avx512:
      return xxh3_avx512_ops();
    case XxhImpl::avx2:
      return xxh3_avx2_ops();
    default:
      return xxh3_sse2_ops();
  }
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

}  // namespace

// Not a crypto extension: the portable table keeps the vector code too.
XxhImpl detail::xxh3_pick() noexcept {
  const CpuFeatures& f = cpu();
  if (f.avx512f && f.avx512bw && f.avx512vl) return XxhImpl::avx512;
  if (f.avx2) return XxhImpl::avx2;
  return XxhImpl::sse2;
}

const char* checksum_name(ChecksumAlg a) noexcept {
  switch (a) {
    case ChecksumAlg::none:
      return "none";
    case ChecksumAlg::sha256:
      return "sha256";
    case ChecksumAlg::xxh128:
      return "xxh128";
  }
  return "?";
}

size_t checksum_len(ChecksumAlg a) noexcept {
  switch (a) {
    case ChecksumAlg::sha256:
      return 32;
    case ChecksumAlg::xxh128:
      return 16;
    default:
      return 0;
  }
}

bool checksum_known(uint8_t id) noexcept { return id <= uint8_t(ChecksumAlg::xxh128); }

bool find_checksum(std::string_view name, ChecksumAlg& out) noexcept {
  for (ChecksumAlg a : {ChecksumAlg::xxh128, ChecksumAlg::sha256, ChecksumAlg::none}) {
    std::string_view n = checksum_name(a);
    if (n.size() != name.size()) continue;
    bool eq = true;
    for (size_t i = 0; i < n.size() && eq; ++i) eq = lower(name[i]) == n[i];
    if (eq) {
      out = a;
      return true;
    }
  }
  return false;
}

std::string checksum_names() { return "xxh128, sha256, none"; }

const char* xxh_impl_name(XxhImpl i) noexcept {
  switch (resolve(i)) {
    case XxhImpl::avx512:
      return "xxh3 avx512";
    case XxhImpl::avx2:
      return "xxh3 avx2";
    default:
      return "xxh3 sse2";
  }
}

bool xxh_impl_available(XxhImpl i) noexcept {
  const CpuFeatures& f = cpu();
  switch (i) {
    case XxhImpl::avx512:
      return f.avx512f && f.avx512bw && f.avx512vl;
    case XxhImpl::avx2:
      return f.avx2;
    default:
      return true;
  }
}

std::string Checksum::hex() const { return to_hex(bytes.data(), len); }

FileChecksum::FileChecksum(ChecksumAlg alg, XxhImpl impl) noexcept : alg_(alg), impl_(resolve(impl)) {
  std::memset(xxh_, 0, sizeof xxh_);
  if (alg_ == ChecksumAlg::xxh128) ops(impl_).reset(xxh_);
}

void FileChecksum::update(const void* data, size_t len) noexcept {
  switch (alg_) {
    case ChecksumAlg::sha256:
      sha_.update(data, len);
      break;
    case ChecksumAlg::xxh128:
      ops(impl_).update(xxh_, data, len);
      break;
    case ChecksumAlg::none:
      break;
  }
}

Checksum FileChecksum::final() noexcept {
  Checksum c;
  c.alg = alg_;
  c.len = checksum_len(alg_);
  if (alg_ == ChecksumAlg::sha256)
    sha_.final(c.bytes.data());
  else if (alg_ == ChecksumAlg::xxh128)
    ops(impl_).digest(xxh_, c.bytes.data());
  return c;
}

const char* FileChecksum::impl() const noexcept {
  switch (alg_) {
    case ChecksumAlg::sha256:
      return sha_.impl();
    case ChecksumAlg::xxh128:
      return xxh_impl_name(impl_);
    default:
      return "none";
  }
}

}  // namespace aesxfer::crypto
