// A connected TCP socket carrying the handshake and then records. Blocking I/O with a timeout
// on every read and write (poll), one reused buffer per direction: nothing is allocated per record.
// Shared by the client and the server; it only moves bytes, the protocol lives in proto/.
#pragma once
#include <sys/uio.h>

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "files/unique_fd.h"
#include "net/buffer_budget.h"
#include "proto/end_record.h"
#include "proto/failure.h"
#include "proto/handshake.h"
#include "proto/messages.h"
#include "proto/record.h"

namespace aesxfer::net {

// The rule that makes a peer's string printable, and the origin of a failure (proto/failure.h).
using proto::Origin;
using proto::printable;
using proto::quoted;

class Conn {
 public:
  // Takes ownership of a connected socket descriptor.
  Conn(int fd, std::chrono::milliseconds timeout, std::string peer);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  const std::string& peer() const { return peer_; }
  // The peer is on this machine (127.0.0.0/8, ::1, or ::ffff:127.x): both ends share its cores.
  bool loopback_peer() const { return loopback_; }
  int fd() const { return fd_.get(); }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // A time by which every wait must be over, besides the per-read timeout (the client's whole
  // handshake, its Welcome included); `what` is the failure's text when it passes.
  void set_deadline(std::chrono::steady_clock::time_point at, std::string what) {
    deadline_ = at;
    deadline_what_ = std::move(what);
  }
  void clear_deadline() { deadline_ = std::chrono::steady_clock::time_point::max(); }

  void write_all(const uint8_t* p, size_t n);
  void read_exact(uint8_t* p, size_t n);
  // Reads what is available (at least one byte) into p; returns 0 at end of stream.
  size_t read_some(uint8_t* p, size_t n);

  // Runs after the handshake: installs the record layer for each direction.
  void start_records(const proto::SessionKeys& keys, bool is_client, crypto::Impl impl = crypto::Impl::best);

  // Bytes that arrived behind the last handshake frame: handed out before the socket is read again.
  void unread(const uint8_t* p, size_t n);

  // Writes every iovec whole (one gather write per batch of records when the socket keeps up).
  void writev_all(struct iovec* iov, int n);

  // Gathering (client/pipeline.h, pipelined small files): what is written is held here, up to
  // kGatherBytes, and goes out in one send when that fills, before this connection waits for the
  // peer (a read that finds nothing yet), and when gathering ends (flush). Several small files' request, data
  // and end records then cost one send instead of three each. A write larger than what is left goes out
  // directly (after what is held).
  static constexpr size_t kGatherBytes = 128 << 10;
  void set_gather(bool on);
  void flush();
  // Whether gathering holds bytes not yet sent, and what runs each time what it held went out: a
  // pipelined put counts its file as sent whole only then (files::AwaitingAnswer; a fifty-fifth
  // re-attack, C55-1: 100 small files held here were said "sent whole" and never reached the server).
  bool holding() const { return !gathered_.empty(); }
  void on_flushed(std::function<void()> f) { on_flushed_ = std::move(f); }

  // The bytes handed to the kernel so far (all of them, the handshake's too), and whether the
  // peer's TCP acknowledged the first `upto` of them (TCP_INFO's bytes acked, less the SYN's one);
  // true where the kernel does not say. A put whose end record was written but not acknowledged
  // when the link failed most likely never reached the server: its verdict does not say "sent
  // whole" (a fifty-eighth re-attack, I58-5: megabytes in the socket buffer were called so). Only
  // the next hop acknowledges: a relay on the way may have taken bytes the server never got.
  uint64_t written() const { return written_; }
  bool acknowledged(uint64_t upto) const;

  // Reads one whole record (header, body, tag) into rec, which has room for proto::kMaxRecord
  // bytes, framed by proto::RecordFramer: the header is bounds-checked before the rest is read,
  // and nothing past the record is read. Returns the wire length. The record is neither opened
  // nor checked against in_order() (the data plane opens and checks a batch at a time).
  size_t read_record(uint8_t* rec, proto::RecordHeader& hdr, const char* what);
  // The same into `room` bytes: a longer record is refused (integrity) before its body is read,
  // in in_order()'s words for `too_long` (the verdict the record would have got once opened).
  size_t read_record(uint8_t* rec, proto::RecordHeader& hdr, const char* what, size_t room,
                     proto::RecordOrder::Verdict too_long);

  // What the handshake agreed for every transfer on this connection.
  crypto::ChecksumAlg checksum() const { return checksum_; }
  size_t record_size() const { return record_size_; }
  // The process's budget for the record batches of this connection's streams (a server's
  // --max-buffer-memory, net/buffer_budget.h), or none: every stream takes the batches it wants.
  BufferBudget* buffer_budget() const { return buffers_; }
  void set_buffer_budget(BufferBudget* b) { buffers_ = b; }

  proto::RecordSealer& sealer() { return *sealer_; }
  proto::RecordOpener& opener() { return *opener_; }
  // Which record may come next from the peer: recv_record() checks every record with it, and
  // recv_stream() opens a file stream in it.
  proto::RecordOrder& in_order() { return order_; }

  // Buffer to fill with up to proto::kMaxPayload bytes of payload, then send_record(len).
  uint8_t* payload_buffer() { return wbuf_.data() + proto::kHeaderLen; }
  void send_record(proto::RecordType type, uint8_t flags, size_t payload_len);
  void send_message(const proto::Message& m);

  struct Incoming {
    proto::RecordHeader hdr;
    std::span<uint8_t> payload;
  };
  // Reads and opens one record and checks that it may come now (in_order()); throws Failure
  // with the protocol's message on any error. `what` names the transfer for messages ("peer
  // closed the connection during <what>").
  Incoming recv_record(const char* what);
  proto::Message recv_message(const char* what);

 private:
  files::UniqueFd fd_;
  uint64_t written_ = 0;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  std::string deadline_what_;
  std::string peer_;
  std::unique_ptr<proto::RecordSealer> sealer_;
  std::unique_ptr<proto::RecordOpener> opener_;
  proto::RecordOrder order_{crypto::kDefaultChecksum, proto::kDefaultPayload};
  std::vector<uint8_t> wbuf_, rbuf_;
  std::vector<uint8_t> msg_;
  std::vector<uint8_t> pending_;
  size_t pending_pos_ = 0;
  std::vector<uint8_t> gathered_;
  bool gather_ = false;
  std::function<void()> on_flushed_;
  bool held(const uint8_t* p, size_t n);  // gathering: appended (true), or flushed first (false)
  void send_all(const uint8_t* p, size_t n);
  bool loopback_ = false;
  crypto::ChecksumAlg checksum_ = crypto::kDefaultChecksum;
  size_t record_size_ = proto::kDefaultPayload;
  BufferBudget* buffers_ = nullptr;
  void wait(short events);
};

// A connection's counters from TCP_INFO (Linux's full struct, newer than glibc's): the smoothed
// round trip, the lowest one it has seen (the path's base RTT, not inflated by its own queue),
// what it sent and what of that it sent again. Zeros where the kernel does not report them.
struct TcpCounts {
  uint64_t bytes_sent = 0, bytes_retrans = 0;
  uint64_t bytes_acked = 0;  // what the peer acknowledged: delivered (client/stream_growth.h)
  uint32_t rtt_us = 0, min_rtt_us = 0;
};
TcpCounts tcp_counts(int fd);
// Smoothed round-trip time of a TCP connection (TCP_INFO) in microseconds; 0 when unknown.
inline uint32_t tcp_rtt_us(int fd) { return tcp_counts(fd).rtt_us; }
// Round trips from this long on count as a long path (parallel streams, pinned receive buffers).
constexpr uint32_t kLongPathRttUs = 10000;
// On a long path: a receive buffer of net.core.rmem_max from the start instead of autotuning,
// which grows it one round trip at a time (on the namespaced 1 Gbit/s, 50 ms path, five streams
// received at 89 % of the link autotuned and at 95 % pinned). Only when rmem_max is at least
// 4 MiB; otherwise autotuning is left alone.
void pin_receive_buffer(int fd);
// On a long path: at most kLongPathUnsent bytes written but not yet sent wait in the socket
// (TCP_NOTSENT_LOWAT); the send buffer still holds a full window in flight. Measured on the
// namespaced 100 ms path with 1 % loss, MTU 1500, cubic and auto streams: 5.8 MB/s against 3.1
// with the whole 8 MiB send buffer free to fill with unsent data (which a connection in loss
// recovery then held for seconds); on the clean 50 and 100 ms paths at MTU 9000, the same rate
// (docs/DESIGN.md, "Socket buffers").
constexpr uint32_t kLongPathUnsent = 1u << 20;
void bound_unsent(int fd);
// pin_receive_buffer and bound_unsent when the connection's RTT says long path; returns the RTT (us).
uint32_t tune_for_path(int fd);

int connect_tcp(const std::string& host, uint16_t port, std::chrono::milliseconds timeout);
// No Nagle: records are written whole. Socket buffers: see size_buffer() in conn.cpp.
void tune_socket(int fd);

}  // namespace aesxfer::net
