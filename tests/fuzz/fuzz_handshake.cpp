// libFuzzer target: bytes from the network into proto::ServerHandshake (as if from a client) and
// proto::ClientHandshake (as if from a server), in chunks whose sizes the input chooses.
//
// Input: byte 0 = mode (bit 0: 0 server, 1 client; bits 1..3: cipher for the client; bits 4..7:
// chunk size - 1, 0 meaning "all at once"), then the peer's bytes.
#include <cstddef>
#include <cstdint>

#include "crypto/suite.h"
#include "proto/handshake.h"

using namespace aesxfer;

namespace {

const proto::Identity& host_id() {
  static proto::Identity id = proto::Identity::generate();
  return id;
}
const proto::Identity& client_id() {
  static proto::Identity id = proto::Identity::generate();
  return id;
}

template <typename Hs>
void feed_all(Hs& hs, const uint8_t* p, size_t n, size_t chunk, bool client) {
  bool confirmed = false;
  while (n > 0) {
    size_t k = chunk == 0 ? n : (chunk < n ? chunk : n);
    proto::Step st = hs.feed(p, k);
    if (st.consumed > k) __builtin_trap();  // never claims more than it was given
    if (st.ec || st.done) return;
    if (st.consumed == 0) __builtin_trap();  // no progress without an error
    p += st.consumed;
    n -= st.consumed;
    if constexpr (requires { hs.confirm_host(); }) {
      if (client && !confirmed && hs.host_key()) {
        confirmed = true;
        proto::Step c = hs.confirm_host();
        if (c.ec || c.done) return;
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const size_t chunk = mode >> 4;
  ++data;
  --size;
  if ((mode & 1) == 0) {
    proto::ServerHandshake s(host_id(), [](const proto::PublicKey&) { return true; });
    feed_all(s, data, size, chunk, false);
  } else {
    auto all = crypto::ciphers();
    const crypto::CipherDesc& c = all[size_t((mode >> 1) & 7) % all.size()];
    proto::ClientHandshake hs(client_id(), c, *crypto::find_mac("hmac-sha256"));
    proto::Step first = hs.start();
    if (first.send.empty()) __builtin_trap();
    feed_all(hs, data, size, chunk, true);
  }
  return 0;
}
