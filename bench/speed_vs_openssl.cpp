// In-process yardstick: the same operations as `aesxfer speed`, run against OpenSSL's EVP on the
// same buffers with the same per-call set-up, in interleaved time slices (ours, theirs, ours, ...)
// so that load from other processes hits both sides alike and the ratio stays meaningful on a
// busy machine.
//
//   speed_vs_openssl [--seconds S] [--no-aesni]
//
// --no-aesni masks the extensions on both sides: crypto::init_dispatch(true) for aesxfer, and
// OPENSSL_ia32cap="~0x200000200000000" (AES-NI and PCLMULQDQ) for OpenSSL, which reads it when the
// library loads, so the program re-executes itself with that variable set.
//
// Per call, both sides: CBC/CTR set a fresh IV then encrypt the buffer in place; GCM sets a fresh
// nonce, a 13-byte AAD, encrypts and produces the tag; RC4 continues its stream (key set once);
// SHA-256 hashes the buffer; HMAC-SHA256 reuses the keyed pads (EVP_MAC_init with no key).
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crypto/aes.h"
#include "crypto/blowfish.h"
#include "crypto/cpu.h"
#include "crypto/gcm.h"
#include "crypto/rc4.h"
#include "crypto/sha256.h"

namespace {

namespace cr = aesxfer::crypto;
using Clock = std::chrono::steady_clock;

const uint8_t kKey[32] = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15,
                          0x88, 0x09, 0xcf, 0x4f, 0x3c, 1,    2,    3,    4,    5,    6,
                          7,    8,    9,    10,   11,   12,   13,   14,   15,   16};
const uint8_t kAad[13] = {0x17, 3, 3, 0, 0x10};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "speed_vs_openssl: %s failed\n", what);
  std::exit(1);
}

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

Ctx evp_ctx(const char* name) {
  EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, name, nullptr);
  if (!c) die(name);
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!EVP_EncryptInit_ex2(ctx.get(), c, nullptr, nullptr, nullptr)) die(name);
  if (std::strcmp(name, "BF-CBC") == 0 || std::strcmp(name, "RC4") == 0) {
    if (!EVP_CIPHER_CTX_set_key_length(ctx.get(), 16)) die("set_key_length");
  }
  EVP_CIPHER_CTX_set_padding(ctx.get(), 0);
  const uint8_t iv[16] = {};
  if (!EVP_EncryptInit_ex2(ctx.get(), nullptr, kKey, EVP_CIPHER_CTX_get_iv_length(ctx.get()) ? iv : nullptr,
                           nullptr))
    die(name);
  EVP_CIPHER_free(c);
  return ctx;
}

void fresh_iv(uint8_t* iv, size_t n, uint64_t& counter) {
  std::memset(iv, 0x5a, n);
  const uint64_t c = counter++;
  std::memcpy(iv, &c, n < 8 ? n : 8);
}

struct Case {
  std::string name;
  std::function<void()> ours, theirs;
};

// Interleaves slices of each side until each has run `seconds`; returns calls per second for both.
std::pair<double, double> race(const Case& c, double seconds) {
  for (int i = 0; i < 50; ++i) c.ours(), c.theirs();  // warm-up
  const auto slice = std::chrono::duration<double>(std::min(0.02, seconds / 10));
  double t_ours = 0, t_theirs = 0;
  uint64_t n_ours = 0, n_theirs = 0;
  auto run = [&](const std::function<void()>& f, double& t, uint64_t& n) {
    const auto start = Clock::now();
    auto now = start;
    do {
      for (int i = 0; i < 16; ++i) f();
      n += 16;
      now = Clock::now();
    } while (now - start < slice);
    t += std::chrono::duration<double>(now - start).count();
  };
  while (t_ours < seconds || t_theirs < seconds) {
    run(c.ours, t_ours, n_ours);
    run(c.theirs, t_theirs, n_theirs);
  }
  return {double(n_ours) / t_ours, double(n_theirs) / t_theirs};
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.5;
  bool no_aesni = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--no-aesni") == 0) {
      no_aesni = true;
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--no-aesni]\n", argv[0]);
      return 2;
    }
  }
  if (no_aesni) {
    const char* cap = std::getenv("OPENSSL_ia32cap");
    if (!cap || std::strcmp(cap, "~0x200000200000000") != 0) {
      setenv("OPENSSL_ia32cap", "~0x200000200000000", 1);
      execv("/proc/self/exe", argv);
      die("re-exec with OPENSSL_ia32cap");
    }
    cr::init_dispatch(true);  // the choice is made once, before the dispatch is filled
  }
  if (!OSSL_PROVIDER_load(nullptr, "legacy") || !OSSL_PROVIDER_load(nullptr, "default")) die("provider load");

  std::printf("CPU: %s; aesxfer AES %s, SHA-256 %s; %s; OPENSSL_ia32cap=%s\n", cr::cpu_model(),
              cr::aes_best_impl_name(), cr::sha256_impl_name(cr::ShaImpl::best),
              OpenSSL_version(OPENSSL_VERSION),
              std::getenv("OPENSSL_ia32cap") ? std::getenv("OPENSSL_ia32cap") : "(unset)");
  std::printf("MB/s (10^6 bytes/s), interleaved slices, %.2f s per side per cell\n", seconds);
  std::printf("%-16s %8s %12s %12s %8s\n", "operation", "bytes", "aesxfer", "openssl", "ratio");

  for (size_t size : {size_t(16), size_t(1024), size_t(16384)}) {
    std::vector<uint8_t> a(size + 64), b(size + 64);  // two buffers: each side works on its own
    uint8_t* pa = a.data() + (64 - reinterpret_cast<uintptr_t>(a.data()) % 64) % 64;
    uint8_t* pb = b.data() + (64 - reinterpret_cast<uintptr_t>(b.data()) % 64) % 64;
    const int len = int(size);
    uint64_t na = 0, nb = 0;
    uint8_t iv_a[16], iv_b[16], tag_a[32], tag_b[32];
    int outl = 0;

    auto aes = cr::make_aes128(kKey);
    auto gcm = cr::Aes128Gcm::make(kKey);
    auto bf = cr::make_blowfish(kKey, 16);
    cr::Rc4 rc4(kKey, 16, 0);
    cr::HmacSha256 hmac(kKey, 32);
    Ctx cbc = evp_ctx("AES-128-CBC"), ctr = evp_ctx("AES-128-CTR"), g = evp_ctx("AES-128-GCM"),
        bfc = evp_ctx("BF-CBC"), rc4c = evp_ctx("RC4");
    EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    EVP_MAC_CTX* mctx = EVP_MAC_CTX_new(mac);
    OSSL_PARAM mp[] = {OSSL_PARAM_construct_utf8_string("digest", const_cast<char*>("SHA256"), 0),
                       OSSL_PARAM_construct_end()};
    if (!EVP_MAC_init(mctx, kKey, 32, mp)) die("EVP_MAC_init");
    EVP_MD* sha = EVP_MD_fetch(nullptr, "SHA256", nullptr);

    std::vector<Case> cases;
    cases.push_back({"aes128-cbc enc",
                     [&] {
                       fresh_iv(iv_a, 16, na);
                       aes->cbc_encrypt(iv_a, pa, pa, size / 16);
                     },
                     [&] {
                       fresh_iv(iv_b, 16, nb);
                       EVP_EncryptInit_ex2(cbc.get(), nullptr, nullptr, iv_b, nullptr);
                       EVP_EncryptUpdate(cbc.get(), pb, &outl, pb, len);
                     }});
    cases.push_back({"aes128-ctr",
                     [&] {
                       fresh_iv(iv_a, 16, na);
                       std::memset(iv_a + 12, 0, 4);
                       aes->ctr_xor(iv_a, pa, pa, size);
                     },
                     [&] {
                       fresh_iv(iv_b, 16, nb);
                       std::memset(iv_b + 12, 0, 4);
                       EVP_EncryptInit_ex2(ctr.get(), nullptr, nullptr, iv_b, nullptr);
                       EVP_EncryptUpdate(ctr.get(), pb, &outl, pb, len);
                     }});
    cases.push_back({"aes128-gcm seal",
                     [&] {
                       fresh_iv(iv_a, 12, na);
                       gcm->seal(iv_a, kAad, 13, pa, pa, size, tag_a);
                     },
                     [&] {
                       fresh_iv(iv_b, 12, nb);
                       EVP_EncryptInit_ex2(g.get(), nullptr, nullptr, iv_b, nullptr);
                       EVP_EncryptUpdate(g.get(), nullptr, &outl, kAad, 13);
                       EVP_EncryptUpdate(g.get(), pb, &outl, pb, len);
                       EVP_EncryptFinal_ex(g.get(), pb + len, &outl);
                       EVP_CIPHER_CTX_ctrl(g.get(), EVP_CTRL_AEAD_GET_TAG, 16, tag_b);
                     }});
    cases.push_back({"blowfish-cbc enc",
                     [&] {
                       fresh_iv(iv_a, 8, na);
                       bf->cbc_encrypt(iv_a, pa, pa, size / 8);
                     },
                     [&] {
                       fresh_iv(iv_b, 8, nb);
                       EVP_EncryptInit_ex2(bfc.get(), nullptr, nullptr, iv_b, nullptr);
                       EVP_EncryptUpdate(bfc.get(), pb, &outl, pb, len);
                     }});
    cases.push_back({"arcfour", [&] { rc4.xor_stream(pa, pa, size); },
                     [&] { EVP_EncryptUpdate(rc4c.get(), pb, &outl, pb, len); }});
    cases.push_back({"sha256", [&] { cr::Sha256::digest(pa, size, tag_a); },
                     [&] { EVP_Digest(pb, size, tag_b, nullptr, sha, nullptr); }});
    cases.push_back({"hmac-sha256", [&] { hmac.mac(pa, size, tag_a); },
                     [&] {
                       size_t l = 0;
                       EVP_MAC_init(mctx, nullptr, 0, nullptr);
                       EVP_MAC_update(mctx, pb, size);
                       EVP_MAC_final(mctx, tag_b, &l, 32);
                     }});
    for (auto& c : cases) {
      const auto [ours, theirs] = race(c, seconds);
      std::printf("%-16s %8zu %12.1f %12.1f %8.2f\n", c.name.c_str(), size, ours * double(size) / 1e6,
                  theirs * double(size) / 1e6, ours / theirs);
      std::fflush(stdout);
    }
    EVP_MD_free(sha);
    EVP_MAC_CTX_free(mctx);
    EVP_MAC_free(mac);
  }
  return 0;
}
