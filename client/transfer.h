// The data plane shared by both ends: stream a file as data records followed by an `end` record
// (final flag, SHA-256 of the whole file and its length), or receive such a stream into a file.
#pragma once
#include <array>
#include <cstdint>
#include <functional>

#include "client/conn.h"

namespace aesxfer::net {

// Called with the bytes moved so far (at most every record).
using ProgressFn = std::function<void(uint64_t done)>;

// Sends `size` bytes read from fd (fd < 0: zeros, the /dev/zero source). Throws Failure.
// A file that is shorter than `size` by the time it is read fails the transfer.
std::array<uint8_t, 32> send_stream(Conn& c, int fd, uint64_t size, const ProgressFn& progress);

// Receives exactly `size` bytes into fd (fd < 0: discard, the /dev/null sink) and checks the
// final record's length and SHA-256. Throws Failure; the caller removes its temporary file.
struct RecvError : Failure {
  RecvError(const std::string& m, int st) : Failure(m), status(st) {}
  int status;  // proto::Status value to report to the peer
};
std::array<uint8_t, 32> recv_stream(Conn& c, int fd, uint64_t size, const ProgressFn& progress);

}  // namespace aesxfer::net
