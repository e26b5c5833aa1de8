#include "proto/init.h"

#include <sodium.h>

#include <mutex>
#include <stdexcept>

#include "crypto/dispatch.h"

namespace aesxfer::proto {

void init() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = sodium_init() >= 0; });
  if (!ok) throw std::runtime_error("libsodium failed to initialise");
}

void init(bool no_aesni) {
  if (!crypto::init_dispatch(no_aesni))
    throw std::logic_error("the portable-code choice (--no-aesni) came after the CPU dispatch was filled");
  init();
}

}  // namespace aesxfer::proto
