// The one loop that runs a handshake over a connection, for both ends: the client, the server
// and the tests' hand-made sessions all drive their proto:: state machine with it.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>

#include "net/conn.h"
#include "proto/handshake.h"

namespace aesxfer::net {

struct HandshakeLimits {
  // The whole handshake must finish within this, beside the timeout on each read (a peer that
  // sends one byte at a time cannot hold the connection longer). max(): the per-read timeout only.
  std::chrono::milliseconds total = std::chrono::milliseconds::max();
  // Sees the first bytes the peer sends before the state machine does, and may throw (the client
  // names a server that is not aesxfer by its greeting).
  std::function<void(const uint8_t*, size_t)> first_bytes;
  // Added to the message when the peer closes during the handshake.
  const char* closed_hint = "";
};

// Feeds what the peer sends to the machine and writes whatever it answers, until a step that
// needs the caller: done (the server's may carry errc::unauthorized), check_host (the client
// checks the host key, then sends confirm_host()'s bytes), or an error (its bytes, such as a
// refusal ServerHello, are sent first). One read may hold several frames; bytes after the last
// handshake frame go back to the connection (Conn::unread) for the record layer. Returns that
// step; throws Failure when the peer closes or a limit passes.
proto::Step drive_handshake(Conn& c, proto::HandshakeMachine& m, const HandshakeLimits& lim = {});

}  // namespace aesxfer::net
