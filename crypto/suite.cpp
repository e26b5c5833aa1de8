#include "crypto/suite.h"

#include "crypto/aes.h"

namespace aesxfer::crypto {
namespace {

// Blowfish: rekey after 2^27 blocks (1 GiB), far below the 2^32-block birthday bound of a
// 64-bit block (Sweet32 needs about 2^35 bytes of one key to be practical).
constexpr uint64_t kBlowfishRekey = uint64_t(1) << 30;

constexpr CipherDesc kCiphers[] = {
    {1, "aes128-gcm", "aes128-gcm@openssh.com,gcm", CipherAlg::aes128, CipherMode::gcm, 16, 16, 16, true, false, 0,
     "AES-128 in GCM, AEAD (default)"},
    {2, "aes128-ctr", "ctr", CipherAlg::aes128, CipherMode::ctr, 16, 16, 0, false, false, 0,
     "AES-128 in CTR, encrypt-then-MAC"},
    {3, "aes128-cbc", "cbc,aes", CipherAlg::aes128, CipherMode::cbc, 16, 16, 0, false, false, 0,
     "AES-128 in CBC, encrypt-then-MAC"},
    {4, "blowfish-cbc", "blowfish,bf-cbc", CipherAlg::blowfish, CipherMode::cbc, 16, 8, 0, false, true, kBlowfishRekey,
     "Blowfish in CBC (legacy: 64-bit block, rekeyed every GiB; key-dependent S-box lookups: not constant-time)"},
    {5, "arcfour", "rc4,arcfour128", CipherAlg::rc4, CipherMode::stream, 16, 1, 0, false, true, 0,
     "RC4 keyed per record, 1536 bytes discarded (legacy: biased keystream, RFC 7465; secret-indexed state: not "
     "constant-time)"},
    {6, "none", "", CipherAlg::none, CipherMode::none, 0, 1, 0, false, true, 0,
     "no encryption (speed tests; data is readable on the wire)"},
};

constexpr MacDesc kMacs[] = {
    {1, "hmac-sha256", "hmac-sha2-256,hmac-sha2-256-etm@openssh.com,sha256", 32, 32, "HMAC-SHA256, encrypt-then-MAC"},
    {2, "none", "", 0, 0, "no MAC (speed tests only: data is unauthenticated)"},
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

std::string cipher_impl_name(const CipherDesc& c) {
  switch (c.alg) {
    case CipherAlg::aes128: return aes_best_impl_name();
    case CipherAlg::blowfish:
    case CipherAlg::rc4: return "portable";
    case CipherAlg::none: return "none";
  }
  return "?";
}

}  // namespace aesxfer::crypto
