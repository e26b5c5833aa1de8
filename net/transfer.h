// The data plane shared by both ends: stream a file as data records of the negotiated size
// followed by an `end` record (final flag, the length and the whole-file checksum of the algorithm
// the handshake agreed), or receive such a stream into a file.
#pragma once
#include <sys/stat.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>

#include "crypto/checksum.h"
#include "net/conn.h"

namespace aesxfer::net {

// Called with the bytes moved so far (at most every record).
using ProgressFn = std::function<void(uint64_t done)>;

struct StreamOptions {
  // Resume: the first `offset` bytes are already at the receiver. They are hashed from fd (so the
  // end record still carries the checksum of the whole file) but not sent; data records carry
  // bytes [offset, size). The receiver's fd must hold them and be positioned at offset.
  uint64_t offset = 0;
  // Report progress after every record (256 KiB) rather than per batch of 16, for -l pacing
  // and --json-progress; records are then read, sealed and written one at a time.
  bool per_record = false;
  // Parallel streams (--streams): the stream carries bytes [base, base + size) of the file, read
  // with pread / written with pwrite at those offsets (several streams share one descriptor); the
  // end record holds the checksum and length of that range alone. Not combined with `offset`.
  bool ranged = false;
  uint64_t base = 0;
  // With offset: the checksum state after the first `offset` bytes, already computed by the
  // caller (scan_prefix); fd is then not read for them (a receiver's fd may be -1: nothing to write).
  const crypto::FileChecksum* prefix_hash = nullptr;
  // Receiver (pipelined transfers, docs/PROTOCOL.md "Pipelining"): a write error does not stop the
  // stream; the rest of the file's records are read (and dropped) up to its end record, and the
  // write error is thrown after that. `complete`, when set, becomes true once the end record has
  // been read (sender: sent), so a caller can tell a failure that left the connection at a file
  // boundary (a bad checksum, a write error, a withdrawn stream) from one that did not.
  bool read_to_end = false;
  bool* complete = nullptr;
  // Sender: the file as it was when opened (fstat), before anything was read of it (a resume's
  // prefix hashed, say); nullptr: as send_stream finds it. A regular file whose size,
  // modification or change time moved by the time it was read, or that shrank or could not be
  // read, is withdrawn (docs/PROTOCOL.md 3.1, protocol 6): its end record says so, the receiver
  // drops what arrived, and send_stream throws a Failure that withdrawn() recognizes. A file
  // changed in place while it was read arrived as a mix of two versions, "verified" (a thirty-fifth
  // re-attack, B-N3). Unsized streams (send -) copy what they read, as cat does.
  const struct stat* since = nullptr;
  // Whether the file I/O and checksum run on a thread of their own beside the record crypto and
  // the socket (threads), or in the calling thread (inline). auto: inline when both ends share
  // this machine's cores (a loopback peer) and there are fewer than 4 of them, where a second
  // busy thread per end only queues for a core; threads otherwise; the environment variable
  // AESXFER_PIPELINE=threads|inline overrides it. The others are for measurement
  // (bench/pipeline_floor) and tests.
  enum class Pipeline { auto_choice, threads, inline_stage } pipeline = Pipeline::auto_choice;
  // An unsized stream (send -, docs/PROTOCOL.md 3.3; not with offset or ranged). The sender reads
  // fd until its end of file (`size` is ignored) and sends what it read as it comes: a record goes
  // out when it is full, when no more input arrived within kGatherWindow of its first byte, or at
  // the end; after kKeepAlive without input an empty data record keeps the connection alive. The
  // receiver takes any number of bytes up to the end record, whose length is the stream's.
  bool unsized = false;
  // When set, receives the stream's length (the end record's): the one way to learn an unsized
  // stream's size.
  uint64_t* length = nullptr;
  // Receiver: the writes keep the file system's reserve (files::SpaceReserve, one allowance shared
  // by every receiver writing into it); one that would go into it fails with no_space (the
  // server's puts).
  bool keep_reserve = false;
};

// Unsized streams (StreamOptions::unsized): how long a record waits for more input once it holds
// some, and how long the sender waits for input before it sends an empty record instead.
constexpr std::chrono::milliseconds kGatherWindow{50};
constexpr std::chrono::milliseconds kKeepAlive{1000};

// A stream its sender withdrew (StreamOptions::since): thrown by send_stream once the end record
// that says so is sent (origin local), by recv_stream once it is read (origin peer). Status
// changed; the connection is at a file boundary, so that file fails alone and the session goes on
// (the receiver still sends its Result, status changed).
inline bool withdrawn(const proto::Failure& e) {
  return e.status == proto::Status::changed && e.origin != proto::Origin::link;
}
// A receive that failed with the connection at the file's end: this end's own failure (a bad end
// record, a write that failed) or a stream the sender withdrew. The receiver answers it with a
// Result; any other failure (the link, the peer's refusal) leaves nothing to answer.
inline bool at_file_end(const proto::Failure& e) { return e.origin == proto::Origin::local || withdrawn(e); }

// The choice `auto_choice` makes for this connection.
bool pipeline_threads(const Conn& c, StreamOptions::Pipeline p);

// Sends `size` bytes read from fd (fd < 0: zeros, the /dev/zero source). Throws Failure.
// A file that is shorter than `size` by the time it is read fails the transfer.
crypto::Checksum send_stream(Conn& c, int fd, uint64_t size, const ProgressFn& progress,
                             const StreamOptions& opt = {});

// Receives exactly `size` bytes into fd (fd < 0: discard, the /dev/null sink) and checks the
// end record's length and checksum. Throws Failure: origin local when this end stops (a bad end
// record, a write error: its status is what to tell the peer), link when the connection fails;
// the caller removes its temporary file.

crypto::Checksum recv_stream(Conn& c, int fd, uint64_t size, const ProgressFn& progress,
                             const StreamOptions& opt = {});

}  // namespace aesxfer::net
