// The one table of ciphers and MACs, ssh style. The CLI, the handshake (wire ids), --list-ciphers,
// `aesxfer speed` and the tests all read it; adding a cipher is one entry here plus its
// construction in the record layer (proto/record_crypto.cpp), which switches on `mode`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace aesxfer::crypto {

enum class CipherMode : uint8_t { none, cbc, ctr, gcm, stream };
enum class CipherAlg : uint8_t { none, aes128, blowfish, rc4 };

struct CipherDesc {
  uint8_t wire_id;          // on the wire in the client hello; never reused
  const char* name;         // canonical, ssh style
  const char* aliases;      // comma-separated, may be empty
  CipherAlg alg;
  CipherMode mode;
  size_t key_len;           // bytes
  size_t block_len;         // 1 for stream ciphers and none
  size_t tag_len;           // AEAD tag; 0 otherwise
  bool aead;                // carries its own authentication: the MAC is ignored
  bool legacy;              // weak: allowed only when named, prints a warning
  uint64_t rekey_bytes;     // 0: never; otherwise new keys every this many bytes (Blowfish, Sweet32)
  const char* note;         // one line for --list-ciphers
};

struct MacDesc {
  uint8_t wire_id;
  const char* name;
  const char* aliases;
  size_t key_len;
  size_t tag_len;
  const char* note;
};

std::span<const CipherDesc> ciphers() noexcept;
std::span<const MacDesc> macs() noexcept;

// Finds by canonical name or alias (case-sensitive, like ssh); nullptr when unknown.
const CipherDesc* find_cipher(std::string_view name) noexcept;
const MacDesc* find_mac(std::string_view name) noexcept;
const CipherDesc* cipher_by_wire_id(uint8_t id) noexcept;
const MacDesc* mac_by_wire_id(uint8_t id) noexcept;

// "aes128-cbc,aes128-ctr,..." for error messages.
std::string cipher_names();
std::string mac_names();

// The implementation that would run for this cipher now ("aesni", "vaes", "software", "portable").
std::string cipher_impl_name(const CipherDesc& c);

}  // namespace aesxfer::crypto
