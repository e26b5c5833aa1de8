#include "proto/error.h"

#include <string>

#include "proto/handshake.h"

namespace aesxfer::proto {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "aesxfer.proto"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::ok:
        return "success";
      case errc::bad_magic:
        // The version this build speaks (an eleventh re-attack found "version 1" here at protocol 4).
        return "peer does not speak aesxfer protocol version " + std::to_string(kVersion) +
               " (bad magic or version)";
      case errc::bad_handshake:
        return "malformed or oversized handshake message";
      case errc::unsupported_cipher:
        return "the server does not support the requested cipher";
      case errc::unsupported_mac:
        return "the server does not support the requested MAC";
      case errc::unsupported_checksum:
        return "the server does not allow the requested file checksum";
      case errc::server_busy:
        return "server busy: too many connections are waiting to log in";
      case errc::host_key_signature:
        return "the server's host key signature over the handshake does not verify (tampering or a broken "
               "server)";
      case errc::client_signature:
        return "the client's signature over the handshake does not verify";
      case errc::unauthorized:
        return "the client key is not authorized on the server";
      case errc::record_too_large:
        return "record length exceeds the protocol limit";
      case errc::bad_record_length:
        return "record length is invalid for the cipher (not a multiple of the block size, or inconsistent)";
      case errc::bad_mac:
        return "message authentication failed (data was modified, reordered, replayed or truncated)";
      case errc::bad_padding:
        return "invalid CBC padding in an authenticated record";
      case errc::bad_record_type:
        return "record header carries an unknown type, flags or reserved bits";
      case errc::unexpected_message:
        return "message not expected at this point of the protocol";
      case errc::after_final:
        return "data received after the final record";
      case errc::bad_message:
        return "malformed control message";
      case errc::sequence_exhausted:
        return "record sequence number exhausted (2^64 records)";
    }
    return "unknown aesxfer protocol error " + std::to_string(ev);
  }
};

}  // namespace

const std::error_category& category() noexcept {
  static const Category c;
  return c;
}

}  // namespace aesxfer::proto
