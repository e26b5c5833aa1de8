// The interface of a MAC as the record layer uses it (encrypt-then-MAC), one message or many.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "crypto/dispatch.h"
#include "crypto/sha256_mb.h"

namespace aesxfer::crypto {

// One message given as two parts p1 || p2 (the record layer's seq || header, then the body).
using MacJob = HmacJob;

class Mac {
 public:
  virtual ~Mac() = default;
  virtual size_t tag_len() const noexcept = 0;
  // Which code runs ("shani", "software", ...).
  virtual const char* impl() const noexcept = 0;
  // Messages worth handing to mac_many at once (1: no gain from batching).
  virtual size_t batch() const noexcept = 0;
  virtual void mac(const MacJob& job) noexcept = 0;
  // The tags of n independent messages; equals n calls of mac().
  virtual void mac_many(MacJob* jobs, size_t n) noexcept = 0;
};

// The MAC table's factory (crypto/suite.h): HMAC-SHA256 on the dispatch's SHA-256 code, 16
// messages at a time where the multi-buffer code runs them as lanes.
std::unique_ptr<Mac> make_hmac_sha256_mac(const uint8_t* key, size_t key_len, const Dispatch& d);

}  // namespace aesxfer::crypto
