// The handshake state machines. Every byte is specified in docs/PROTOCOL.md, "Handshake".
#include "proto/handshake.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "crypto/sha256.h"
#include "crypto/util.h"
#include "proto/error.h"
#include "proto/init.h"
#include "proto/kdf.h"
#include "proto/wire.h"

namespace aesxfer::proto {
namespace {

constexpr uint8_t kMagic[8] = {'A', 'E', 'S', 'X', 'F', 'E', 'R', '1'};
constexpr uint8_t kClientHello = 1, kServerHello = 2, kClientAuth = 3;
constexpr size_t kClientHelloBody = 8 + 1 + 1 + 1 + 1 + 32 + 32 + 4;    // 80
constexpr size_t kServerHelloBody = 8 + 1 + 1 + 32 + 32 + 32 + 4 + 64;  // 174
constexpr size_t kClientAuthPlain = 32 + crypto_sign_BYTES;             // client key || signature
constexpr size_t kAuthTag = 16;                                         // AES-128-GCM
constexpr size_t kClientAuthBody = kClientAuthPlain + kAuthTag;         // 112
constexpr std::string_view kHostSigLabel = "aesxfer-v1 host-sig";
constexpr std::string_view kClientSigLabel = "aesxfer-v4 client-sig";

enum : uint8_t {
  kStatusOk = 0,
  kStatusCipher = 1,
  kStatusMac = 2,
  kStatusVersion = 3,
  kStatusChecksum = 4,
  kStatusBusy = 5,  // too many connections waiting to log in: sent before the ClientHello is read
};

void init_sodium() { init(); }

// Accumulates one handshake frame: u32 BE length (1..kMaxFrame) | type | body. The length is
// checked before anything is allocated.
class FrameReader {
 public:
  enum class Status { need_more, frame, error };
  // Consumes at most up to the end of one frame.
  Status feed(const uint8_t* data, size_t len, size_t& used) {
    used = 0;
    while (used < len) {
      if (have_ < 4) {
        size_t n = std::min(4 - have_, len - used);
        std::memcpy(len_buf_ + have_, data + used, n);
        have_ += n;
        used += n;
        if (have_ < 4) break;
        const uint32_t l = WireReader(len_buf_).u32();
        if (l < 1 || l > kMaxFrame) return Status::error;
        frame_.assign(len_buf_, len_buf_ + 4);
        frame_.resize(4 + size_t(l));
      } else {
        size_t n = std::min(frame_.size() - have_, len - used);
        std::memcpy(frame_.data() + have_, data + used, n);
        have_ += n;
        used += n;
      }
      if (have_ >= 4 && have_ == frame_.size()) {
        have_ = 0;
        return Status::frame;
      }
    }
    return Status::need_more;
  }
  // The last complete frame (length prefix included).
  const std::vector<uint8_t>& frame() const { return frame_; }
  uint8_t type() const { return frame_[4]; }
  std::span<const uint8_t> body() const { return std::span<const uint8_t>(frame_).subspan(5); }

 private:
  uint8_t len_buf_[4] = {};
  size_t have_ = 0;
  std::vector<uint8_t> frame_;
};

// A frame's length and type, for a body of body_len bytes to follow.
void frame_header(WireWriter& w, uint8_t type, size_t body_len) {
  w.u32(uint32_t(1 + body_len));
  w.u8(type);
}

// SHA-256 over the concatenation of two byte strings.
std::array<uint8_t, 32> hash2(const std::vector<uint8_t>& a, const uint8_t* b, size_t blen) {
  std::array<uint8_t, 32> h{};
  crypto::Sha256 s;
  s.update(a.data(), a.size());
  s.update(b, blen);
  s.final(h.data());
  return h;
}

// label || hash, the message an Ed25519 signature covers.
std::vector<uint8_t> sig_message(std::string_view label, const std::array<uint8_t, 32>& th) {
  std::vector<uint8_t> m(label.begin(), label.end());
  m.insert(m.end(), th.begin(), th.end());
  return m;
}

// "aesxfer-v4 client-sig" || TH2 || client key: the client's signature binds its key too.
std::vector<uint8_t> client_sig_message(const std::array<uint8_t, 32>& th2, const PublicKey& pk) {
  auto m = sig_message(kClientSigLabel, th2);
  m.insert(m.end(), pk.begin(), pk.end());
  return m;
}

// The handshake key of ClientAuth (docs/PROTOCOL.md 1.4): AES-128-GCM keyed from K_c2s and TH2.
// The nonce is the first 12 bytes of `iv`; key and iv are wiped on destruction.
struct AuthSeal {
  uint8_t key[16]{}, iv[16]{};
  AuthSeal(const uint8_t k_c2s[32], const std::array<uint8_t, 32>& th2) {
    kdf(key, sizeof key, k_c2s, "aesxfer-v4 auth key", th2);
    kdf(iv, sizeof iv, k_c2s, "aesxfer-v4 auth iv", th2);
  }
  ~AuthSeal() {
    sodium_memzero(key, sizeof key);
    sodium_memzero(iv, sizeof iv);
  }
  AuthSeal(const AuthSeal&) = delete;
  AuthSeal& operator=(const AuthSeal&) = delete;
  // The project's own AES-128-GCM (crypto table, best implementation), never libsodium's AEAD.
  std::unique_ptr<crypto::Aead> aead() const {
    return crypto::find_cipher("aes128-gcm")->make_aead(key, crypto::dispatch());
  }
};

void derive_direction(DirectionKeys& d, const uint8_t k[32], const std::array<uint8_t, 32>& th2) {
  kdf(d.enc, sizeof d.enc, k, "aesxfer-v1 enc", th2);
  kdf(d.mac, sizeof d.mac, k, "aesxfer-v1 mac", th2);
  kdf(d.iv, sizeof d.iv, k, "aesxfer-v1 iv", th2);
}

// Reads the magic and version that open both hellos; false when the magic is wrong or the
// body too short for them.
bool read_magic(WireReader& r, uint8_t& version) {
  auto magic = r.bytes(sizeof kMagic);
  version = r.u8();
  return r.ok() && std::equal(magic.begin(), magic.end(), kMagic);
}

std::string hex(const uint8_t* p, size_t n) {
  std::string s(2 * n + 1, '\0');
  sodium_bin2hex(s.data(), s.size(), p, n);
  s.pop_back();
  return s;
}

Step fail(std::error_code ec, size_t consumed, std::string detail = {}) {
  Step s;
  s.ec = ec;
  s.consumed = consumed;
  s.detail = std::move(detail);
  return s;
}

const crypto::MacDesc* none_mac() { return crypto::find_mac("none"); }

// Fixed ephemeral values for reproducible handshakes (tests only, see set_ephemeral_for_test).
struct FixedEphemeral {
  std::array<uint8_t, 32> kx_sk{}, random{};
  ~FixedEphemeral() { sodium_memzero(kx_sk.data(), kx_sk.size()); }
};

// A fresh crypto_kx key pair and random, or the fixed ones.
void ephemeral(const std::unique_ptr<FixedEphemeral>& fixed, uint8_t pk[32], uint8_t sk[32],
               uint8_t random[32]) {
  if (!fixed) {
    crypto_kx_keypair(pk, sk);
    randombytes_buf(random, 32);
    return;
  }
  std::memcpy(sk, fixed->kx_sk.data(), 32);
  crypto_scalarmult_base(pk, sk);
  std::memcpy(random, fixed->random.data(), 32);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

// " (it allows: a, b)" for a refusal's bit set of cipher or MAC wire ids; "" when it names none
// (an older server's zeros).
// A name in a refusal's list: "none" says what it is, or "(it allows: none)" read as "it allows
// nothing" (a sixty-first re-attack, S61-4).
std::string listed(const std::string& name, const char* none_is) {
  return name == "none" ? "none (" + std::string(none_is) + ")" : name;
}

std::string allowed_names(uint32_t bits, bool ciphers) {
  std::string out;
  if (ciphers) {
    for (const auto& c : crypto::ciphers())
      if (c.wire_id < 32 && (bits & (1u << c.wire_id)))
        out += std::string(out.empty() ? "" : ", ") + listed(c.name, "no encryption");
  } else {
    for (const auto& m : crypto::macs())
      if (m.wire_id < 32 && (bits & (1u << m.wire_id)))
        out += std::string(out.empty() ? "" : ", ") + listed(m.name, "no MAC");
  }
  return out.empty() ? "" : " (it allows: " + out + ")";
}

std::string checksum_set_names(uint32_t bits) {
  std::string out;
  for (auto a : {crypto::ChecksumAlg::xxh128, crypto::ChecksumAlg::sha256, crypto::ChecksumAlg::none})
    if (bits & (1u << uint8_t(a)))
      out += std::string(out.empty() ? "" : ", ") + listed(crypto::checksum_name(a), "no checksum");
  return out.empty() ? "not one of them" : out;
}

std::vector<uint8_t> seal_client_auth(const uint8_t k_c2s[32], const std::array<uint8_t, 32>& th2,
                                      std::span<const uint8_t> plain) {
  init_sodium();
  const AuthSeal k(k_c2s, th2);
  std::vector<uint8_t> body(plain.size() + kAuthTag);
  k.aead()->seal(k.iv, nullptr, 0, plain.data(), body.data(), plain.size(), body.data() + plain.size());
  return body;
}

std::optional<std::vector<uint8_t>> open_client_auth(const uint8_t k_c2s[32],
                                                     const std::array<uint8_t, 32>& th2,
                                                     std::span<const uint8_t> body) {
  if (body.size() < kAuthTag) return std::nullopt;
  init_sodium();
  const AuthSeal k(k_c2s, th2);
  std::vector<uint8_t> plain(body.size() - kAuthTag);
  if (!k.aead()->open(k.iv, nullptr, 0, body.data(), plain.data(), plain.size(), body.data() + plain.size()))
    return std::nullopt;
  return plain;
}

DirectionKeys derive_direction_keys(const uint8_t kx_key[32],
                                    const std::array<uint8_t, 32>& transcript_hash) {
  init_sodium();
  DirectionKeys d{};
  derive_direction(d, kx_key, transcript_hash);
  return d;
}

Identity::~Identity() { sodium_memzero(sk.data(), sk.size()); }

Identity Identity::generate() {
  init_sodium();
  Identity id;
  crypto_sign_keypair(id.pk.data(), id.sk.data());
  return id;
}

std::vector<uint8_t> busy_server_hello() {
  std::vector<uint8_t> f;
  WireWriter w(f);
  frame_header(w, kServerHello, kServerHelloBody);
  w.bytes(kMagic, sizeof kMagic);
  w.u8(kVersion);
  w.u8(kStatusBusy);
  w.zeros(kServerHelloBody - 10);
  return f;
}

std::string fingerprint(const PublicKey& pk) {
  uint8_t d[32];
  crypto::Sha256::digest(pk.data(), pk.size(), d);
  char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL_NO_PADDING)];
  sodium_bin2base64(b64, sizeof b64, d, sizeof d, sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
  return std::string("SHA256:") + b64;
}

SessionKeys::~SessionKeys() {
  c2s.wipe();
  s2c.wipe();
}

std::string SessionKeys::keylog_lines() const {
  std::string out;
  auto line = [&](const char* dir, const DirectionKeys& k) {
    out += "AESXFER_V1 ";
    out += hex(client_random.data(), client_random.size());
    out += ' ';
    out += dir;
    out += ' ';
    out += cipher ? cipher->name : "?";
    out += ' ';
    out += crypto::mac_label(cipher, mac);  // as the summary and server log say
    out += " enc=" + hex(k.enc, sizeof k.enc);
    out += " mac=" + hex(k.mac, sizeof k.mac);
    out += " iv=" + hex(k.iv, sizeof k.iv);
    out += '\n';
  };
  line("C2S", c2s);
  line("S2C", s2c);
  return out;
}

// ---------------------------------------------------------------------------------------------

struct ClientHandshake::Impl {
  enum class State { init, wait_server_hello, host_pending, done, failed } state = State::init;
  const Identity& me;
  SessionKeys keys;
  uint8_t kx_pk[crypto_kx_PUBLICKEYBYTES]{};
  uint8_t kx_sk[crypto_kx_SECRETKEYBYTES]{};
  std::vector<uint8_t> client_hello;
  std::vector<uint8_t> server_hello;
  std::array<uint8_t, 32> th2{};
  uint8_t k_c2s[32]{};  // kept from the ServerHello until ClientAuth is sealed
  FrameReader reader;
  std::error_code error;
  PublicKey host{};
  std::unique_ptr<FixedEphemeral> fixed;

  Impl(const Identity& id, const crypto::CipherDesc& c, const crypto::MacDesc& m, SessionParams p) : me(id) {
    keys.cipher = &c;
    keys.mac = &m;
    keys.checksum = p.checksum;
    keys.record_size = p.record_size;
  }
  ~Impl() {
    sodium_memzero(kx_sk, sizeof kx_sk);
    sodium_memzero(k_c2s, sizeof k_c2s);
  }

  Step failed(std::error_code ec, size_t consumed, std::string detail = {}) {
    state = State::failed;
    error = ec;
    return fail(ec, consumed, std::move(detail));
  }

  // What a refusal before the key exchange is: not signed by the server's host key, so a host on
  // the path can send one listing only `none` or a legacy cipher, which read as the server's
  // policy invited the user to weaken the connection (a fifty-first re-attack, C51-2). Said of every
  // refusal in a ServerHello, the version and busy ones too: nothing before the key exchange is
  // the server's word (a fifty-second re-attack's note).
  static constexpr const char* kUnsigned =
      "; this refusal is not authenticated (any host on the path can send it)";

  // The client's reading of a refusal status in the ServerHello; `info` is its record-size field.
  // A refusal that contradicts itself (what it refuses among what it allows, a MAC refused for a
  // cipher that ignores it, a version refused in a ServerHello of the client's own version; the
  // caller has read that version already) is no server's policy: a malformed ServerHello, not shown as one (a
  // sixtieth re-attack, P60-2).
  bool contradicts(uint8_t status, uint32_t info) const {
    const auto has = [info](unsigned bit) { return bit < 32 && (info & (1u << bit)); };
    switch (status) {
      case kStatusCipher:
        return has(keys.cipher->wire_id);
      case kStatusMac:
        return keys.cipher->aead || has(keys.mac->wire_id);
      case kStatusChecksum:
        return has(unsigned(keys.checksum));
      case kStatusVersion:  // in a ServerHello of this client's own version (a sixty-first re-attack, S61-3)
        return true;
      default:
        return false;
    }
  }

  Step refused(uint8_t status, uint32_t info, size_t consumed) {
    if (contradicts(status, info))
      return failed(
          errc::bad_handshake, consumed,
          std::string("the ServerHello's refusal contradicts itself (it refuses what it allows, a MAC for "
                      "a cipher that has none, or the version it speaks itself)") +
              kUnsigned);
    switch (status) {
      case kStatusCipher:
        return failed(errc::unsupported_cipher, consumed,
                      std::string("the server does not support or allow cipher ") + keys.cipher->name +
                          allowed_names(info, true) + kUnsigned);
      case kStatusMac:
        return failed(errc::unsupported_mac, consumed,
                      std::string("the server does not support or allow MAC ") + keys.mac->name +
                          allowed_names(info, false) + kUnsigned);
      case kStatusChecksum:
        return failed(errc::unsupported_checksum, consumed,
                      std::string("the server does not allow checksum ") +
                          crypto::checksum_name(keys.checksum) + " (it allows: " + checksum_set_names(info) +
                          ")" + kUnsigned);
      case kStatusBusy:
        return failed(errc::server_busy, consumed,
                      // The status does not say which bound turned the client away (a twelfth
                      // re-attack, G7: a per-source refusal was blamed on --max-startups alone).
                      std::string("server busy: too many connections are waiting to log in (its "
                                  "--max-startups, or --per-source-max-startups for this address); try "
                                  "again later") +
                          kUnsigned);
      default:
        return failed(errc::bad_handshake, consumed);
    }
  }

  Step on_server_hello(size_t consumed) {
    if (reader.type() != kServerHello) return failed(errc::unexpected_message, consumed);
    WireReader r(reader.body());
    uint8_t version = 0;
    if (!read_magic(r, version)) return failed(errc::bad_magic, consumed);
    if (version != kVersion)
      return failed(errc::bad_magic, consumed,
                    "the server speaks aesxfer protocol version " + std::to_string(version) +
                        ", this client " + std::to_string(kVersion) + " (upgrade the older end)" + kUnsigned);
    if (r.remaining() != kServerHelloBody - 9) return failed(errc::bad_handshake, consumed);
    const uint8_t status = r.u8();
    uint8_t server_kx[32], host_pk[32];
    r.copy(server_kx, 32);
    r.bytes(32);  // the server's random: bound by the transcript hash
    r.copy(host_pk, 32);
    const uint32_t record_size = r.u32();
    auto sig = r.bytes(crypto_sign_BYTES);
    if (status != kStatusOk) return refused(status, record_size, consumed);
    if (record_size < kMinRecordSize || record_size > keys.record_size)
      return failed(errc::bad_handshake, consumed);
    server_hello = reader.frame();
    // TH1 = SHA-256(ClientHello frame || ServerHello frame without the signature)
    auto th1 = hash2(client_hello, server_hello.data(), server_hello.size() - crypto_sign_BYTES);
    auto msg = sig_message(kHostSigLabel, th1);
    if (crypto_sign_verify_detached(sig.data(), msg.data(), msg.size(), host_pk) != 0)
      return failed(errc::host_key_signature, consumed);
    th2 = hash2(client_hello, server_hello.data(), server_hello.size());
    if (!derive_keys(server_kx))
      return failed(errc::bad_handshake, consumed, "invalid server key exchange value");
    std::memcpy(host.data(), host_pk, 32);
    keys.host_key = host;
    keys.transcript_hash = th2;
    keys.record_size = record_size;
    state = State::host_pending;
    Step s;
    s.consumed = consumed;
    s.check_host = true;
    return s;
  }

  // Both directions' keys from the X25519 exchange and TH2; false for a low-order point.
  bool derive_keys(const uint8_t server_kx[32]) {
    uint8_t rx[crypto_kx_SESSIONKEYBYTES], tx[crypto_kx_SESSIONKEYBYTES];
    const bool ok = crypto_kx_client_session_keys(rx, tx, kx_pk, kx_sk, server_kx) == 0;
    if (ok) {
      derive_direction(keys.c2s, tx, th2);
      derive_direction(keys.s2c, rx, th2);
      std::memcpy(k_c2s, tx, sizeof k_c2s);
      sodium_memzero(kx_sk, sizeof kx_sk);
    }
    sodium_memzero(rx, sizeof rx);
    sodium_memzero(tx, sizeof tx);
    return ok;
  }
};

ClientHandshake::ClientHandshake(const Identity& me, const crypto::CipherDesc& cipher,
                                 const crypto::MacDesc& mac, SessionParams params) {
  init_sodium();
  if (params.record_size < kMinRecordSize || params.record_size > kMaxRecordSize)
    throw std::invalid_argument("record size out of range");
  impl_ = std::make_unique<Impl>(me, cipher, mac, params);
}
ClientHandshake::~ClientHandshake() = default;

Step ClientHandshake::start() {
  Impl& m = *impl_;
  if (m.state != Impl::State::init) return fail(errc::unexpected_message, 0);
  ephemeral(m.fixed, m.kx_pk, m.kx_sk, m.keys.client_random.data());
  m.keys.client_key = m.me.pk;
  std::vector<uint8_t> f;
  WireWriter w(f);
  frame_header(w, kClientHello, kClientHelloBody);
  w.bytes(kMagic, sizeof kMagic);
  w.u8(kVersion);
  w.u8(m.keys.cipher->wire_id);
  w.u8(m.keys.mac->wire_id);
  w.u8(uint8_t(m.keys.checksum));
  w.bytes(m.kx_pk, 32);
  w.bytes(m.keys.client_random.data(), 32);
  w.u32(m.keys.record_size);  // no identity: it travels sealed in ClientAuth (1.4)
  m.client_hello = f;
  m.state = Impl::State::wait_server_hello;
  Step s;
  s.send = std::move(f);
  return s;
}

Step ClientHandshake::feed(const uint8_t* data, size_t len) {
  Impl& m = *impl_;
  if (m.state == Impl::State::failed) return fail(m.error, 0);
  if (m.state != Impl::State::wait_server_hello) {
    if (len == 0) return Step{};
    return m.failed(errc::unexpected_message, 0);
  }
  size_t used = 0;
  switch (m.reader.feed(data, len, used)) {
    case FrameReader::Status::need_more: {
      Step s;
      s.consumed = used;
      return s;
    }
    case FrameReader::Status::error:
      return m.failed(errc::bad_handshake, used, "oversized or empty handshake frame");
    case FrameReader::Status::frame:
      break;
  }
  return m.on_server_hello(used);
}

std::optional<PublicKey> ClientHandshake::host_key() const {
  if (impl_->state == Impl::State::host_pending || impl_->state == Impl::State::done) return impl_->host;
  return std::nullopt;
}

Step ClientHandshake::confirm_host() {
  Impl& m = *impl_;
  if (m.state != Impl::State::host_pending) return fail(errc::unexpected_message, 0);
  const auto msg = client_sig_message(m.th2, m.me.pk);
  uint8_t plain[kClientAuthPlain];  // client key || signature, sealed (1.4)
  std::memcpy(plain, m.me.pk.data(), 32);
  crypto_sign_detached(plain + 32, nullptr, msg.data(), msg.size(), m.me.sk.data());
  const auto body = seal_client_auth(m.k_c2s, m.th2, plain);
  sodium_memzero(m.k_c2s, sizeof m.k_c2s);
  std::vector<uint8_t> f;
  WireWriter w(f);
  frame_header(w, kClientAuth, kClientAuthBody);
  w.bytes(body.data(), body.size());
  m.state = Impl::State::done;
  Step s;
  s.send = std::move(f);
  s.done = true;
  return s;
}

SessionKeys& ClientHandshake::keys() { return impl_->keys; }

void ClientHandshake::set_ephemeral_for_test(const std::array<uint8_t, 32>& kx_secret,
                                             const std::array<uint8_t, 32>& random) {
  impl_->fixed = std::make_unique<FixedEphemeral>();
  impl_->fixed->kx_sk = kx_secret;
  impl_->fixed->random = random;
}

// ---------------------------------------------------------------------------------------------

struct ServerHandshake::Impl {
  enum class State { wait_client_hello, wait_client_auth, done, failed } state = State::wait_client_hello;
  const Identity& host;
  std::function<bool(const PublicKey&)> is_authorized;
  ServerPolicy policy;
  SessionKeys keys;
  uint8_t kx_pk[crypto_kx_PUBLICKEYBYTES]{};
  uint8_t kx_sk[crypto_kx_SECRETKEYBYTES]{};
  uint8_t client_kx[32]{};
  // crypto_kx session keys, computed from the ClientHello before the ServerHello is signed.
  uint8_t kx_rx[crypto_kx_SESSIONKEYBYTES]{}, kx_tx[crypto_kx_SESSIONKEYBYTES]{};
  std::unique_ptr<FixedEphemeral> fixed;
  std::vector<uint8_t> client_hello;
  std::vector<uint8_t> server_hello;
  FrameReader reader;
  std::error_code error;
  bool have_client_key = false;
  bool authorized = false;

  Impl(const Identity& h, std::function<bool(const PublicKey&)> f, ServerPolicy p)
      : host(h), is_authorized(std::move(f)), policy(p) {}
  ~Impl() {
    sodium_memzero(kx_sk, sizeof kx_sk);
    sodium_memzero(kx_rx, sizeof kx_rx);
    sodium_memzero(kx_tx, sizeof kx_tx);
  }

  Step failed(std::error_code ec, size_t consumed, std::string detail = {}) {
    state = State::failed;
    error = ec;
    return fail(ec, consumed, std::move(detail));
  }

  // A ServerHello with a non-zero status and all key/signature fields zero; the record-size field
  // carries `info` (for status 4, the allowed checksums as a bit set).
  Step refuse(uint8_t status, std::error_code ec, size_t consumed, std::string detail, uint32_t info = 0) {
    std::vector<uint8_t> f;
    WireWriter w(f);
    frame_header(w, kServerHello, kServerHelloBody);
    w.bytes(kMagic, sizeof kMagic);
    w.u8(kVersion);
    w.u8(status);
    w.zeros(32 + 32 + 32);  // key exchange value, random, host key
    w.u32(info);
    w.zeros(crypto_sign_BYTES);
    Step s = failed(ec, consumed, std::move(detail));
    s.send = std::move(f);
    return s;
  }

  // The fields of a ClientHello after magic and version.
  struct Hello {
    uint8_t cipher = 0, mac = 0, checksum = 0;
    uint32_t record_size = 0;
  };

  // The server's policy on the cipher, MAC and checksum a client asks for: a refusal step, or
  // nothing with keys.cipher, keys.mac and keys.checksum set.
  std::optional<Step> choose(const Hello& h, size_t consumed) {
    // Refusals of a cipher or MAC carry the allowed ones as a bit set of wire ids (1.3).
    uint32_t ciphers_ok = 0, macs_ok = 0;
    for (const auto& cd : crypto::ciphers())
      if (cd.wire_id < 32 && (!policy.cipher_allowed || policy.cipher_allowed(cd)))
        ciphers_ok |= 1u << cd.wire_id;
    for (const auto& md : crypto::macs())
      if (md.wire_id < 32 && (!policy.mac_allowed || policy.mac_allowed(md))) macs_ok |= 1u << md.wire_id;
    const crypto::CipherDesc* c = crypto::cipher_by_wire_id(h.cipher);
    if (!c)
      return refuse(kStatusCipher, errc::unsupported_cipher, consumed,
                    "client asked for unknown cipher id " + std::to_string(h.cipher), ciphers_ok);
    const crypto::MacDesc* mac = crypto::mac_by_wire_id(h.mac);
    if (!mac) {
      if (!c->aead)
        return refuse(kStatusMac, errc::unsupported_mac, consumed,
                      "client asked for unknown MAC id " + std::to_string(h.mac), macs_ok);
      mac = none_mac();  // AEAD: the MAC byte is ignored
    }
    if (policy.cipher_allowed && !policy.cipher_allowed(*c))
      return refuse(kStatusCipher, errc::unsupported_cipher, consumed,
                    std::string("client asked for cipher ") + c->name + ", which --ciphers does not allow",
                    ciphers_ok);
    if (!c->aead && policy.mac_allowed && !policy.mac_allowed(*mac))
      return refuse(kStatusMac, errc::unsupported_mac, consumed,
                    std::string("client asked for MAC ") + mac->name + ", which --macs does not allow",
                    macs_ok);
    const auto checksum = crypto::ChecksumAlg(h.checksum);
    if (!(policy.checksums & (1u << h.checksum)))
      return refuse(kStatusChecksum, errc::unsupported_checksum, consumed,
                    std::string("client asked for checksum ") + crypto::checksum_name(checksum) +
                        ", which serve --checksums does not allow",
                    policy.checksums);
    keys.cipher = c;
    keys.mac = mac;
    keys.checksum = checksum;
    return std::nullopt;
  }

  Step on_client_hello(size_t consumed) {
    if (reader.type() != kClientHello) return failed(errc::unexpected_message, consumed);
    WireReader r(reader.body());
    uint8_t version = 0;
    if (!read_magic(r, version)) return failed(errc::bad_magic, consumed);
    if (version != kVersion)
      return refuse(kStatusVersion, errc::bad_magic, consumed,
                    "client speaks protocol version " + std::to_string(version) + ", this server " +
                        std::to_string(kVersion) + " (upgrade the older end)");
    if (r.remaining() != kClientHelloBody - 9) return failed(errc::bad_handshake, consumed);
    Hello h;
    h.cipher = r.u8();
    h.mac = r.u8();
    h.checksum = r.u8();
    r.copy(client_kx, 32);
    r.copy(keys.client_random.data(), 32);
    h.record_size = r.u32();
    if (!crypto::checksum_known(h.checksum) || h.record_size < kMinRecordSize ||
        h.record_size > kMaxRecordSize)
      return failed(errc::bad_handshake, consumed);
    if (auto refusal = choose(h, consumed)) return std::move(*refusal);
    keys.record_size = std::max(kMinRecordSize, std::min(h.record_size, policy.max_record_size));
    keys.host_key = host.pk;
    client_hello = reader.frame();
    // The X25519 shared secret before anything is signed: a client value of low order (all-zero
    // shared secret, libsodium returns -1) gets no ServerHello at all (docs/PROTOCOL.md 1.5).
    uint8_t server_random[32];
    ephemeral(fixed, kx_pk, kx_sk, server_random);
    const int kx_rc = crypto_kx_server_session_keys(kx_rx, kx_tx, kx_pk, kx_sk, client_kx);
    sodium_memzero(kx_sk, sizeof kx_sk);
    if (kx_rc != 0) {
      sodium_memzero(kx_rx, sizeof kx_rx);
      sodium_memzero(kx_tx, sizeof kx_tx);
      return failed(errc::bad_handshake, consumed,
                    "invalid client key exchange value (low-order X25519 point)");
    }
    Step s;
    s.send = server_hello_frame(server_random);
    s.consumed = consumed;
    state = State::wait_client_auth;
    return s;
  }

  // ServerHello (status ok) signed by the host key over TH1; kept for the transcript.
  std::vector<uint8_t> server_hello_frame(const uint8_t server_random[32]) {
    std::vector<uint8_t> f;
    WireWriter w(f);
    frame_header(w, kServerHello, kServerHelloBody);
    w.bytes(kMagic, sizeof kMagic);
    w.u8(kVersion);
    w.u8(kStatusOk);
    w.bytes(kx_pk, 32);
    w.bytes(server_random, 32);
    w.bytes(host.pk.data(), 32);
    w.u32(keys.record_size);
    auto th1 = hash2(client_hello, f.data(), f.size());
    auto msg = sig_message(kHostSigLabel, th1);
    uint8_t sig[crypto_sign_BYTES];
    crypto_sign_detached(sig, nullptr, msg.data(), msg.size(), host.sk.data());
    w.bytes(sig, sizeof sig);
    server_hello = f;
    return f;
  }

  Step on_client_auth(size_t consumed) {
    if (reader.type() != kClientAuth) return failed(errc::unexpected_message, consumed);
    if (reader.body().size() != kClientAuthBody) return failed(errc::bad_handshake, consumed);
    auto th2 = hash2(client_hello, server_hello.data(), server_hello.size());
    // Sealed with the handshake key only the two ends of the key exchange know (1.4).
    const auto plain = open_client_auth(kx_rx, th2, reader.body());
    if (!plain)
      return failed(errc::bad_handshake, consumed, "ClientAuth does not open (tampered or wrong key)");
    std::memcpy(keys.client_key.data(), plain->data(), 32);
    const auto msg = client_sig_message(th2, keys.client_key);
    if (crypto_sign_verify_detached(plain->data() + 32, msg.data(), msg.size(), keys.client_key.data()) != 0)
      return failed(errc::client_signature, consumed);
    have_client_key = true;
    derive_direction(keys.c2s, kx_rx, th2);
    derive_direction(keys.s2c, kx_tx, th2);
    sodium_memzero(kx_rx, sizeof kx_rx);
    sodium_memzero(kx_tx, sizeof kx_tx);
    keys.transcript_hash = th2;
    authorized = is_authorized ? is_authorized(keys.client_key) : false;
    state = State::done;
    Step s;
    s.done = true;
    s.consumed = consumed;
    if (!authorized) {
      s.ec = errc::unauthorized;
      s.detail = "client key " + fingerprint(keys.client_key) + " is not authorized";
    }
    return s;
  }
};

ServerHandshake::ServerHandshake(const Identity& host, std::function<bool(const PublicKey&)> is_authorized,
                                 ServerPolicy policy) {
  init_sodium();
  impl_ = std::make_unique<Impl>(host, std::move(is_authorized), policy);
}
ServerHandshake::~ServerHandshake() = default;

Step ServerHandshake::feed(const uint8_t* data, size_t len) {
  Impl& m = *impl_;
  if (m.state == Impl::State::failed) return fail(m.error, 0);
  if (m.state == Impl::State::done) {
    if (len == 0) return Step{};
    return fail(errc::unexpected_message, 0);  // records go to the record layer
  }
  size_t used = 0;
  switch (m.reader.feed(data, len, used)) {
    case FrameReader::Status::need_more: {
      Step s;
      s.consumed = used;
      return s;
    }
    case FrameReader::Status::error:
      return m.failed(errc::bad_handshake, used, "oversized or empty handshake frame");
    case FrameReader::Status::frame:
      break;
  }
  if (m.state == Impl::State::wait_client_hello) return m.on_client_hello(used);
  return m.on_client_auth(used);
}

SessionKeys& ServerHandshake::keys() { return impl_->keys; }
bool ServerHandshake::authorized() const { return impl_->authorized; }

void ServerHandshake::set_ephemeral_for_test(const std::array<uint8_t, 32>& kx_secret,
                                             const std::array<uint8_t, 32>& random) {
  impl_->fixed = std::make_unique<FixedEphemeral>();
  impl_->fixed->kx_sk = kx_secret;
  impl_->fixed->random = random;
}
std::optional<PublicKey> ServerHandshake::client_key() const {
  if (impl_->have_client_key) return impl_->keys.client_key;
  return std::nullopt;
}

}  // namespace aesxfer::proto
