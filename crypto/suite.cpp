#include "crypto/suite.h"

#include "crypto/aes.h"
#include "crypto/blowfish.h"
#include "crypto/gcm.h"
#include "crypto/rc4.h"

namespace aesxfer::crypto {
namespace {

// Blowfish: rekey after 2^27 blocks (1 GiB), far below the 2^32-block birthday bound of a
// 64-bit block (Sweet32 needs about 2^35 bytes of one key to be practical).
constexpr uint64_t kBlowfishRekey = uint64_t(1) << 30;

const CipherDesc kCiphers[] = {
    {.wire_id = 1,
     .name = "aes128-gcm",
     .aliases = "aes128-gcm@openssh.com,gcm",
     .mode = CipherMode::gcm,
     .key_len = 16,
     .block_len = 16,
     .tag_len = 16,
     .aead = true,
     .legacy = false,
     .rekey_bytes = 0,
     .note = "AES-128 in GCM, AEAD (default)",
     .make_aead = make_aes128_gcm_aead,
     .openssh = {"aes128-gcm@openssh.com", nullptr}},
    {.wire_id = 2,
     .name = "aes128-ctr",
     .aliases = "ctr",
     .mode = CipherMode::ctr,
     .key_len = 16,
     .block_len = 16,
     .tag_len = 0,
     .aead = false,
     .legacy = false,
     .rekey_bytes = 0,
     .note = "AES-128 in CTR, encrypt-then-MAC",
     .make_block = make_aes128_block,
     .openssh = {"aes128-ctr", nullptr}},
    {.wire_id = 3,
     .name = "aes128-cbc",
     .aliases = "cbc,aes",
     .mode = CipherMode::cbc,
     .key_len = 16,
     .block_len = 16,
     .tag_len = 0,
     .aead = false,
     .legacy = false,
     .rekey_bytes = 0,
     .note = "AES-128 in CBC, encrypt-then-MAC",
     .make_block = make_aes128_block,
     .openssh = {"aes128-cbc", nullptr}},
    {.wire_id = 4,
     .name = "blowfish-cbc",
     .aliases = "blowfish,bf-cbc",
     .mode = CipherMode::cbc,
     .key_len = 16,
     .block_len = 8,
     .tag_len = 0,
     .aead = false,
     .legacy = true,
     .rekey_bytes = kBlowfishRekey,
     .note = "Blowfish in CBC (legacy: 64-bit block, rekeyed every GiB; key-dependent S-box lookups: not "
             "constant-time)",
     .make_block = make_blowfish_block,
     .openssh = {"blowfish-cbc", "removed in OpenSSH 7.6"}},
    {.wire_id = 5,
     .name = "arcfour",
     .aliases = "rc4,arcfour128",
     .mode = CipherMode::stream,
     .key_len = 16,
     .block_len = 1,
     .tag_len = 0,
     .aead = false,
     .legacy = true,
     .rekey_bytes = 0,
     .note = "RC4 keyed per record, 1536 bytes discarded (legacy: biased keystream, RFC 7465; secret-indexed "
             "state: not constant-time)",
     .make_stream = make_rc4_stream,
     .record_key_label = "aesxfer-v1 rc4",
     .openssh = {"arcfour", "removed in OpenSSH 7.6"}},
    {.wire_id = 6,
     .name = "none",
     .aliases = "",
     .mode = CipherMode::none,
     .key_len = 0,
     .block_len = 1,
     .tag_len = 0,
     .aead = false,
     .legacy = false,  // not weak but absent: its own warning (the CLI) and "no cipher" in the lab
     .rekey_bytes = 0,
     .note = "no encryption (speed tests; data is readable on the wire)",
     .openssh = {nullptr, "OpenSSH has no unencrypted cipher"}},
};

const MacDesc kMacs[] = {
    {1, "hmac-sha256", "hmac-sha2-256,hmac-sha2-256-etm@openssh.com,sha256", 32, 32,
     "HMAC-SHA256, encrypt-then-MAC", make_hmac_sha256_mac},
    {2, "none", "", 0, 0, "no MAC (speed tests only: data is unauthenticated)", nullptr},
};

// ASCII case-insensitive equality: "AES128-GCM" names aes128-gcm, as ssh -c accepts any case.
bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

bool matches(std::string_view name, const char* canonical, const char* aliases) {
  if (same_name(name, canonical)) return true;
  std::string_view a(aliases);
  while (!a.empty()) {
    size_t comma = a.find(',');
    if (same_name(a.substr(0, comma), name)) return true;
    if (comma == std::string_view::npos) break;
    a.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::span<const CipherDesc> ciphers() noexcept { return kCiphers; }
std::span<const MacDesc> macs() noexcept { return kMacs; }

const CipherDesc* find_cipher(std::string_view name) noexcept {
  for (const auto& c : kCiphers)
    if (matches(name, c.name, c.aliases)) return &c;
  return nullptr;
}
const MacDesc* find_mac(std::string_view name) noexcept {
  for (const auto& m : kMacs)
    if (matches(name, m.name, m.aliases)) return &m;
  return nullptr;
}
const CipherDesc* cipher_by_wire_id(uint8_t id) noexcept {
  for (const auto& c : kCiphers)
    if (c.wire_id == id) return &c;
  return nullptr;
}
const MacDesc* mac_by_wire_id(uint8_t id) noexcept {
  for (const auto& m : kMacs)
    if (m.wire_id == id) return &m;
  return nullptr;
}

const char* mac_label(const CipherDesc* c, const MacDesc* m) noexcept {
  if (c && c->aead) return "aead";
  return m ? m->name : "?";
}

std::string cipher_names() {
  std::string s;
  for (const auto& c : kCiphers) {
    if (!s.empty()) s += ',';
    s += c.name;
  }
  return s;
}
std::string mac_names() {
  std::string s;
  for (const auto& m : kMacs) {
    if (!s.empty()) s += ',';
    s += m.name;
  }
  return s;
}

std::string cipher_impl_name(const CipherDesc& c, const Dispatch& d) {
  static constexpr uint8_t kZeroKey[64] = {};  // names the code; the key is irrelevant
  if (c.make_block) {
    auto bc = c.make_block(kZeroKey, c.key_len, d);
    return bc ? bc->impl() : "?";
  }
  if (c.make_aead) {
    auto a = c.make_aead(kZeroKey, d);
    return a ? a->impl() : "?";
  }
  if (c.make_stream) return c.make_stream()->impl();
  return "none";
}

bool has_portable_twin(const CipherDesc& c) {
  return cipher_impl_name(c, dispatch(Impl::best)) != cipher_impl_name(c, dispatch(Impl::portable));
}

}  // namespace aesxfer::crypto
