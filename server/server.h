// The server: an Asio accept loop (with SIGINT/SIGTERM for a clean stop) that hands each connection
// to its own thread running a blocking session, as OpenSSH gives each session its own process:
// a slow or hostile client holds only its own thread, and crypto for different clients runs on
// different cores. Every read and write has a timeout.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "proto/handshake.h"

namespace aesxfer::server {

struct ServerOptions {
  std::string listen;    // address; empty: all addresses (IPv6 and IPv4)
  uint16_t port = 7227;  // 0: pick an ephemeral port
  std::filesystem::path root = ".";
  std::filesystem::path home;             // $AESXFER_HOME: host key, authorized_keys
  std::filesystem::path authorized_keys;  // default: home/authorized_keys
  std::filesystem::path port_file;        // when set, the bound port is written there once listening
  // Authenticated sessions at once; a client authenticated beyond it is told "server busy".
  size_t max_sessions = 64;
  // Unauthenticated connections (accepted, handshake not finished), as sshd's MaxStartups
  // START:RATE:FULL: from `startups_begin` on, a new one is refused with probability RATE% rising
  // linearly to 100% at `max_startups`; refused ones get a "busy" ServerHello (PROTOCOL.md 1.3).
  size_t startups_begin = 10;
  unsigned startups_rate = 30;
  size_t max_startups = 100;
  size_t per_source_max_startups = 0;  // unauthenticated connections per source address; 0: no limit
  // What one "source" is for per_source_max_startups: the address masked to these many bits, as
  // sshd's PerSourceNetBlockSize (serve --per-source-netblock V4:V6). An IPv6 client has a /64 or
  // more to pick addresses from, so a /64 is one source unless said otherwise.
  unsigned source_v4_bits = 32, source_v6_bits = 64;
  std::chrono::milliseconds timeout{30000};            // per read/write
  std::chrono::milliseconds handshake_timeout{10000};  // whole handshake, however the bytes trickle in
  std::ostream* log = nullptr;                         // one line per transfer
  // Kept partial files (send --resume) older than this are removed when their directory is next
  // written to (server/sweep.h); 0 keeps them for ever.
  std::chrono::seconds partial_max_age{7 * 24 * 3600};
  uint64_t max_list_entries = 200000;  // list (recv -r): entries per listing, at most proto::kMaxListEntries
  // Bytes one session may have the server hash for probes and resumed gets (server/digests.h).
  uint64_t max_probe_hash = uint64_t(64) << 30;
  // list: memory every listing in progress holds together (serve --max-list-memory)
  uint64_t max_list_memory = uint64_t(256) << 20;
  // Record batches of every stream together (net/buffer_budget.h; serve --max-buffer-memory): 64
  // sessions at the default record size (8 MiB each) fit, 1 MiB records take fewer lanes past it.
  uint64_t max_buffer_memory = uint64_t(512) << 20;
  proto::ServerPolicy policy;  // --checksums, --max-record-size
  // Allow-lists (serve --ciphers, --macs), names as `aesxfer --list` shows them; empty: all.
  std::vector<std::string> ciphers, macs;
  // Parallel-stream temporary files open at once over all sessions: at most this many, and never
  // more than RLIMIT_NOFILE leaves after what --max-sessions needs (checked at start).
  uint64_t max_part_files = UINT64_MAX;
  // --congestion (net/congestion.h): auto, system or a name, set on every accepted connection
  // (it matters on the ones this server sends on: the clients' recv).
  std::string congestion = "auto";
  // Test seam: called on a session's thread once the session has ended and closed the descriptor
  // `fd` it worked on (so the number is free for a new accept), before its slot is released and
  // the accept loop hears of it. Tests block here to provoke that reuse; serve leaves it empty.
  std::function<void(int fd)> on_session_end;
};

// Parses sshd's MaxStartups syntax, "START:RATE:FULL" or "N" (= N:100:N), into opt. Returns the
// reason it is not valid, or "" when it is.
std::string parse_max_startups(const std::string& text, ServerOptions& opt);
// Parses sshd's PerSourceNetBlockSize syntax, "V4:V6" or "V4" (bits, 1..32 and 1..128), into opt.
// Returns the reason it is not valid, or "" when it is.
std::string parse_netblock(const std::string& text, ServerOptions& opt);
// The source an address counts for: itself at 32 (IPv4, also when IPv4-mapped) or 128 bits, else
// its network, "10.1.2.0/24" or "2001:db8:1:2::/64". An address that does not parse stays as it is.
std::string source_block(const std::string& address, unsigned v4_bits, unsigned v6_bits);

class Server {
 public:
  explicit Server(const ServerOptions& opt);
  ~Server();
  // Binds, then serves until stop() or SIGINT/SIGTERM. Throws Failure when it cannot bind.
  void run();
  void stop();
  uint16_t port() const { return port_.load(); }  // 0 until run() is listening; any thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint16_t> port_{0};
};

}  // namespace aesxfer::server
