// The one table of ciphers and MACs, ssh style. The CLI, the handshake (wire ids), --list-ciphers,
// `aesxfer speed` and the tests all read it. Each row carries the factory of its primitive (as
// OpenSSH's rows carry their EVP cipher), so nothing else knows which cipher or MAC it runs: the
// record layer builds one protection class per `mode` from it (proto/record_protection.h).
// A new block cipher is its own file, its vectors (tests/vectors/<name>_ecb.txt) and one row.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "crypto/aead.h"
#include "crypto/block_cipher.h"
#include "crypto/dispatch.h"
#include "crypto/mac.h"
#include "crypto/stream_cipher.h"

namespace aesxfer::crypto {

// How records are protected: an AEAD, encrypt-then-MAC over a block cipher in CBC or CTR or
// over a stream cipher, or nothing.
enum class CipherMode : uint8_t { none, cbc, ctr, gcm, stream };

using MakeBlockFn = std::unique_ptr<BlockCipher> (*)(const uint8_t* key, size_t key_len, const Dispatch& d);
using MakeAeadFn = std::unique_ptr<Aead> (*)(const uint8_t* key, const Dispatch& d);
using MakeStreamFn = std::unique_ptr<StreamCipher> (*)();
using MakeMacFn = std::unique_ptr<Mac> (*)(const uint8_t* key, size_t key_len, const Dispatch& d);

struct CipherDesc {
  uint8_t wire_id;      // on the wire in the client hello; never reused
  const char* name;     // canonical, ssh style
  const char* aliases;  // comma-separated, may be empty
  CipherMode mode;
  size_t key_len;        // bytes
  size_t block_len;      // 1 for stream ciphers and none
  size_t tag_len;        // AEAD tag; 0 otherwise
  bool aead;             // carries its own authentication: the MAC is ignored
  bool legacy;           // weak: offered for comparison only; --list-ciphers and speed mark it
  uint64_t rekey_bytes;  // 0: never; otherwise new keys every this many bytes (Blowfish, Sweet32)
  const char* note;      // one line for --list-ciphers
  // The factory for the mode: make_block for cbc and ctr, make_aead for gcm, make_stream for
  // stream; nullptr otherwise. A factory returns nullptr for a key length it does not take.
  MakeBlockFn make_block = nullptr;
  MakeAeadFn make_aead = nullptr;
  MakeStreamFn make_stream = nullptr;
  const char* record_key_label = nullptr;  // stream: label of the per-record key (docs/PROTOCOL.md)
  // OpenSSH's cipher of the same construction, for `bench --vs-scp` (scp -c): its name, or nullptr
  // when OpenSSH never had one; and why a current OpenSSH lacks it, or nullptr.
  struct {
    const char* name = nullptr;
    const char* gone = nullptr;
  } openssh = {};
};

struct MacDesc {
  uint8_t wire_id;
  const char* name;
  const char* aliases;
  size_t key_len;
  size_t tag_len;
  const char* note;
  MakeMacFn make = nullptr;  // nullptr: no MAC (tag_len 0)
};

std::span<const CipherDesc> ciphers() noexcept;
std::span<const MacDesc> macs() noexcept;

// Finds by canonical name or alias, without regard to ASCII case (-c AES works); nullptr when
// unknown.
const CipherDesc* find_cipher(std::string_view name) noexcept;
const MacDesc* find_mac(std::string_view name) noexcept;
const CipherDesc* cipher_by_wire_id(uint8_t id) noexcept;
const MacDesc* mac_by_wire_id(uint8_t id) noexcept;

// The MAC as users read it (summary, --json, server log, key log): "aead" for a cipher that
// authenticates itself (its MAC is ignored), else the MAC's name; "?" for a missing one.
const char* mac_label(const CipherDesc* c, const MacDesc* m) noexcept;

// "aes128-cbc,aes128-ctr,..." for error messages.
std::string cipher_names();
std::string mac_names();

// The implementation of this cipher a dispatch table runs ("aesni", "vaes", "vperm512",
// "portable", "none"), as the object the row's factory makes names it.
std::string cipher_impl_name(const CipherDesc& c, const Dispatch& d = dispatch());

// True when the best table runs other code for this cipher than the portable one (AES with AES-NI
// or VAES): the rows `speed` and `bench --no-aesni-too` measure twice.
bool has_portable_twin(const CipherDesc& c);

}  // namespace aesxfer::crypto
