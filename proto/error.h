// Protocol errors travel in std::error_code beside socket errors (Beast style).
#pragma once
#include <string>
#include <system_error>

namespace aesxfer::proto {

enum class errc {
  ok = 0,
  bad_magic = 1,  // peer is not aesxfer or speaks another version
  bad_handshake,  // malformed or oversized handshake frame
  unsupported_cipher,
  unsupported_mac,
  host_key_signature,  // server's signature over the transcript does not verify
  client_signature,    // client's signature does not verify
  unauthorized,        // client key not in authorized_keys
  record_too_large,    // length field over the bound, rejected before allocation
  bad_record_length,   // not a multiple of the block size, shorter than the tag, ...
  bad_mac,             // authentication failed: tampered, reordered, replayed or wrong key
  bad_padding,
  bad_record_type,
  unexpected_message,
  after_final,           // data after the final record
  bad_message,           // control message malformed
  sequence_exhausted,    // 2^64 records in one direction (never in practice)
  unsupported_checksum,  // the server does not allow the requested file checksum
  server_busy,           // ServerHello status 5: too many connections waiting to log in (--max-startups)
};

const std::error_category& category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

}  // namespace aesxfer::proto

template <>
struct std::is_error_code_enum<aesxfer::proto::errc> : std::true_type {};
