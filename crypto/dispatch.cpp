#include "crypto/dispatch.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace aesxfer::crypto {
namespace {

struct Tables {
  Dispatch best, portable;
  bool forced = false;
};

Dispatch pick(Impl which, bool portable) noexcept {
  Dispatch d{};
  d.which = which;
  d.aes = detail::aes_pick(portable);
  d.ghash = detail::ghash_pick(d.aes);
  d.sha256 = detail::sha256_pick(portable);
  d.sha256_mb = detail::sha256_mb_pick(portable);
  d.xxh3 = detail::xxh3_pick();
  return d;
}

bool env_forces_portable() noexcept {
  const char* e = std::getenv("AESXFER_NO_AESNI");
  return e && *e && std::strcmp(e, "0") != 0;
}

Tables g_tables;
std::once_flag g_once;

const Tables& tables(bool force_portable) noexcept {
  std::call_once(g_once, [force_portable] {
    g_tables.forced = force_portable || env_forces_portable();
    g_tables.portable = pick(Impl::portable, true);
    g_tables.best = g_tables.forced ? g_tables.portable : pick(Impl::best, false);
    g_tables.best.which = Impl::best;
  });
  return g_tables;
}

}  // namespace

bool init_dispatch(bool force_portable) noexcept {
  const bool want = force_portable || env_forces_portable();
  return tables(force_portable).forced == want;
}

const Dispatch& dispatch(Impl which) noexcept {
  const Tables& t = tables(false);
  return which == Impl::portable ? t.portable : t.best;
}

bool no_aesni() noexcept { return tables(false).forced; }

const char* ghash_impl_name(GhashImpl g) noexcept {
  switch (g) {
    case GhashImpl::pclmul:
      return "pclmulqdq";
    case GhashImpl::vpclmul:
      return "vpclmulqdq";
    case GhashImpl::portable:
      break;
  }
  return "portable";
}

}  // namespace aesxfer::crypto
