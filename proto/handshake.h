// The handshake as two pure state machines (no sockets). See docs/PROTOCOL.md, "Handshake".
//
//   C -> S  ClientHello  magic, version, cipher id, MAC id, checksum id, ephemeral X25519 key, random,
//                        the record size the client asks for (no identity: it is sent sealed)
//   S -> C  ServerHello  magic, version, status, ephemeral X25519 key, random, host Ed25519 key,
//                        the agreed record size, signature by the host key over SHA-256 of the
//                        transcript so far
//   C -> S  ClientAuth   sealed with AES-128-GCM under a handshake key from the key exchange and
//                        TH2: the client Ed25519 key and its signature over SHA-256 of ClientHello
//                        and ServerHello and that key (a passive observer never sees the key)
// then both sides derive per-direction keys from crypto_kx session keys and the transcript hash,
// and everything else travels in records. The server's verdict on the client key is its first
// record (see messages.h), or a ServerHello/ClientAuth-level failure closes the connection.
//
// Handshake frames: u32 BE length (of type + body, <= kMaxFrame) | u8 type | body.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "crypto/checksum.h"
#include "crypto/suite.h"
#include "proto/record.h"

namespace aesxfer::proto {

constexpr size_t kMaxFrame = 4096;
constexpr uint8_t kVersion = 6;
// Bounds of the negotiated record size (payload bytes of a data record).
constexpr uint32_t kMinRecordSize = 4096;
constexpr uint32_t kMaxRecordSize = uint32_t(kMaxPayload);

// What a client asks for besides cipher and MAC (docs/PROTOCOL.md 1.2).
struct SessionParams {
  crypto::ChecksumAlg checksum = crypto::kDefaultChecksum;
  uint32_t record_size = uint32_t(kDefaultPayload);
};

// What a server allows (serve --checksums, --max-record-size).
struct ServerPolicy {
  // Bit (1 << wire id) per allowed checksum; all by default.
  uint32_t checksums = (1u << uint8_t(crypto::ChecksumAlg::none)) |
                       (1u << uint8_t(crypto::ChecksumAlg::sha256)) |
                       (1u << uint8_t(crypto::ChecksumAlg::xxh128));
  uint32_t max_record_size = kMaxRecordSize;
  // Allow-lists (serve --ciphers, --macs): a cipher or MAC a predicate rejects is refused exactly
  // like an unknown one (ServerHello status "cipher" or "MAC"); an unset predicate allows
  // everything. The MAC is not checked for an AEAD cipher (its MAC byte is ignored).
  std::function<bool(const crypto::CipherDesc&)> cipher_allowed;
  std::function<bool(const crypto::MacDesc&)> mac_allowed;
};
// "xxh128, sha256" for a checksum bit set.
std::string checksum_set_names(uint32_t bits);
// " (it allows: aes128-gcm, aes128-ctr)" for a refusal's bit set of cipher (or MAC) wire ids.
std::string allowed_names(uint32_t bits, bool ciphers);

using PublicKey = std::array<uint8_t, 32>;  // Ed25519 public key

// A long-term Ed25519 identity (host key or client key). The secret is wiped on destruction.
struct Identity {
  PublicKey pk{};
  std::array<uint8_t, 64> sk{};  // libsodium's Ed25519 secret key (seed || pk)
  ~Identity();
  static Identity generate();
};

// The key schedule for one direction (docs/PROTOCOL.md, "Key derivation"): kx_key is that
// direction's crypto_kx session key, transcript_hash is TH2. Exposed for tests and interop checks.
DirectionKeys derive_direction_keys(const uint8_t kx_key[32], const std::array<uint8_t, 32>& transcript_hash);

// ClientAuth's body (docs/PROTOCOL.md 1.4): plain (client key || signature) sealed with
// AES-128-GCM under key = kdf(16, K_c2s, "aesxfer-v4 auth key", TH2), nonce = the first 12 bytes
// of kdf(16, K_c2s, "aesxfer-v4 auth iv", TH2), no AAD: ciphertext || 16-byte tag. Exposed for
// tests and interop checks (tests seal chosen bytes); the handshake machines call them.
std::vector<uint8_t> seal_client_auth(const uint8_t k_c2s[32], const std::array<uint8_t, 32>& th2,
                                      std::span<const uint8_t> plain);
// The plaintext, or nullopt when the tag does not match (checked in constant time first).
std::optional<std::vector<uint8_t>> open_client_auth(const uint8_t k_c2s[32],
                                                     const std::array<uint8_t, 32>& th2,
                                                     std::span<const uint8_t> body);

// "SHA256:<base64 without padding>" like ssh-keygen -l.
std::string fingerprint(const PublicKey& pk);

// What the handshake produces: the record layer for each direction and facts for logs and keylog.
struct SessionKeys {
  const crypto::CipherDesc* cipher = nullptr;
  const crypto::MacDesc* mac = nullptr;
  DirectionKeys c2s{}, s2c{};
  std::array<uint8_t, 32> client_random{};
  std::array<uint8_t, 32> transcript_hash{};
  PublicKey client_key{}, host_key{};
  crypto::ChecksumAlg checksum = crypto::kDefaultChecksum;  // the whole-file checksum of every transfer
  uint32_t record_size = uint32_t(kDefaultPayload);         // payload bytes per data record, both ways
  ~SessionKeys();
  // One line per direction in the documented keylog format (docs/PROTOCOL.md, "Key log").
  std::string keylog_lines() const;
};

// Output of a step: bytes to send (may be empty), and whether the handshake finished.
// feed() consumes input only up to the end of the handshake frame it completes: `consumed` says
// how many bytes of the input it used. Bytes after the last handshake frame belong to the record
// layer (a client may send records right behind ClientAuth). When ec is set and send is not
// empty, send the bytes (a refusal ServerHello), then close.
struct Step {
  std::vector<uint8_t> send;
  bool done = false;
  std::error_code ec;
  std::string detail;   // human-readable detail for ec (e.g. the server's refusal message)
  size_t consumed = 0;  // bytes of the fed input used (feed() only)
  // Client: the ServerHello verified; the caller checks host_key() against known_hosts, then
  // calls confirm_host(). The handshake waits for the caller and takes no more input until then.
  bool check_host = false;
};

// Either end's state machine as a driver sees it (net/handshake_driver.h runs both): bytes from
// the peer in, a Step out.
class HandshakeMachine {
 public:
  virtual ~HandshakeMachine() = default;
  virtual Step feed(const uint8_t* data, size_t len) = 0;
};

class ClientHandshake final : public HandshakeMachine {
 public:
  ClientHandshake(const Identity& me, const crypto::CipherDesc& cipher, const crypto::MacDesc& mac,
                  SessionParams params = {});
  ~ClientHandshake() override;
  // First flight (ClientHello).
  Step start();
  // Feed bytes from the server; returns the next step. After the ServerHello is in, the caller must
  // check the host key (host_key()) against known_hosts before calling confirm_host().
  Step feed(const uint8_t* data, size_t len) override;
  // Set once the ServerHello is verified.
  std::optional<PublicKey> host_key() const;
  // Sends ClientAuth after the caller accepted the host key; done becomes true.
  Step confirm_host();
  SessionKeys& keys();

  // Test seam (docs/PROTOCOL.md 6.3): use this X25519 secret key (its public key is
  // X25519(kx_secret, 9)) and this random instead of fresh ones, so that a handshake can be
  // reproduced byte for byte. Call before start(). The product never calls it.
  void set_ephemeral_for_test(const std::array<uint8_t, 32>& kx_secret,
                              const std::array<uint8_t, 32>& random);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The ServerHello a server sends, without reading anything, to a connection it turns away before
// the handshake because too many are waiting to log in (serve --max-startups,
// --per-source-max-startups): status 5, every other field zero (docs/PROTOCOL.md 1.3). A client
// reads it as errc::server_busy, "server busy: ...".
std::vector<uint8_t> busy_server_hello();

class ServerHandshake final : public HandshakeMachine {
 public:
  // is_authorized decides whether a client key may log in (authorized_keys).
  ServerHandshake(const Identity& host, std::function<bool(const PublicKey&)> is_authorized,
                  ServerPolicy policy = {});
  ~ServerHandshake() override;
  // Feed bytes from the client; the step carries ServerHello when the ClientHello is in, and
  // done == true once ClientAuth verified. A client X25519 value of low order (the shared secret
  // would be all zero) is refused before the server signs anything: bad_handshake, nothing to
  // send (docs/PROTOCOL.md 1.5). An unknown cipher produces a ServerHello with a
  // refusal status (sent, then the connection closes) and ec set.
  // When the client's signature verifies but is_authorized() says no, the step is
  // done == true with ec == errc::unauthorized and detail "client key SHA256:... is not
  // authorized"; keys() are valid then, and the server sends a Welcome (status refused, text =
  // detail) in a control record before closing, so the client learns why inside the
  // authenticated channel. authorized() tells the two done outcomes apart.
  Step feed(const uint8_t* data, size_t len) override;
  SessionKeys& keys();
  bool authorized() const;
  // Set once ClientAuth opened and its signature verified (the ClientHello carries no identity).
  std::optional<PublicKey> client_key() const;
  // Test seam, as ClientHandshake's (docs/PROTOCOL.md 6.3): the server's ephemeral X25519 secret
  // key and random. Call before feeding the ClientHello. The product never calls it.
  void set_ephemeral_for_test(const std::array<uint8_t, 32>& kx_secret,
                              const std::array<uint8_t, 32>& random);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aesxfer::proto
