// A session's requests, after the handshake: one loop reads a request and dispatches on its op to
// one handler per op (put, get, mkdir, list, stat, probe, commit; put and get with the resume or
// range flag are the same handlers), all sharing one RequestContext. Plain, resumed and ranged
// transfers share one receive path and one send path; every file is reached through the Root
// (server/root.h). See docs/PROTOCOL.md for the messages and docs/DESIGN.md for the server map.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "net/conn.h"
#include "net/transfer.h"
#include "proto/handshake.h"
#include "server/digests.h"
#include "server/dir_pins.h"
#include "server/line_budget.h"
#include "server/listing_memory.h"
#include "server/log_value.h"
#include "server/made_dirs.h"
#include "server/name_budget.h"
#include "server/parts.h"
#include "server/quiet_bytes.h"
#include "server/root.h"
#include "server/sweep.h"

namespace aesxfer::server {

// Names from the layer below that the server's interface uses.
using net::Conn;
using net::StreamOptions;
using proto::Failure;

struct RequestLimits {
  uint64_t max_list_entries = 200000;  // list: entries per listing (serve --max-list), <= kMaxListEntries
  uint64_t max_probe_hash = uint64_t(64) << 30;    // bytes hashed per session (serve --max-probe-hash)
  uint64_t max_list_memory = uint64_t(256) << 20;  // every listing in progress (serve --max-list-memory)
};

// The budget of the names one client key's listings may read (RequestContext::listing_names):
// two walks of a tree at --max-list at once, then one every 20 s.
inline std::shared_ptr<NameBudget> listing_name_budget(uint64_t max_list) {
  const uint64_t walk = std::max<uint64_t>(max_list, 10000);  // a small --max-list, a few walks more
  return std::make_shared<NameBudget>(4 * walk, walk / 10);
}

// The bytes one client key's probes and resumed transfers may have the server hash, over all its
// sessions (PrefixDigests::share_key_allowance): one session's budget (--max-probe-hash) at once,
// then as much again every kProbeHashRefillSeconds. A session's budget alone bounded nothing: a
// resumed put withdrawn at once, repeated, had the server hash a 256 MiB partial file 40 times
// (10 GiB read, 8 s of CPU) for 4 KB sent, and a new session cost only a handshake (a fiftieth
// re-attack, A50-1).
constexpr uint64_t kProbeHashRefillSeconds = 600;
inline std::shared_ptr<NameBudget> probe_hash_allowance(uint64_t max_probe_hash) {
  return std::make_shared<NameBudget>(max_probe_hash,
                                      std::max<uint64_t>(max_probe_hash / kProbeHashRefillSeconds, 1));
}

// The budget of one client key's lines that move no data (RequestContext::quiet_lines).
inline std::shared_ptr<LineBudget> quiet_line_budget() {
  return std::make_shared<LineBudget>(10, "unlogged_requests", "unlogged_bytes");
}

// The budget of one client key's lines written because their requests had the server hash a MiB
// or more (RequestContext::hashing_lines).
inline std::shared_ptr<LineBudget> hashing_line_budget() {
  return std::make_shared<LineBudget>(20, "unlogged_hashing_requests", "unlogged_hashed_bytes");
}

struct RequestContext {
  Conn& c;
  const proto::SessionKeys& keys;
  const Root& root;
  const RequestLimits& limits;
  PartsRegistry& parts;
  Sweeper& sweeper;
  // What every listing of this server holds until its pages are sent, shared by its sessions
  // (bounded by limits.max_list_memory).
  ListingMemory& listings;
  std::function<void(const std::string&)> log;
  PartsRegistry::Held held{};  // parallel-stream transfers this session took part in
  // Requests that move no data (refused, a mkdir of a directory that was there, a probe or resumed
  // put that meets a partial file it may not use) cost the log ten lines a second per client key,
  // shared by all its sessions; the next line written counts those left out, and a session's end
  // the rest (a twenty-eighth re-attack, N6: 56 MB of refusals in 3 s from one session; a
  // twenty-ninth, N2 and N5: 67 MB of no-op mkdirs, and a budget per session renewed by
  // reconnecting). The server sets the key's; alone (tests), a session has its own.
  std::shared_ptr<LineBudget> quiet_lines = quiet_line_budget();
  // The bytes this key's transfers moved without a line naming their file, by file, shared by its
  // sessions (server/quiet_bytes.h): the server sets the key's; alone (tests), a session has its own.
  std::shared_ptr<QuietBytes> quiet_bytes = std::make_shared<QuietBytes>();
  // Lines worth writing only for what their requests had the server hash (a probe, a resumed
  // transfer that moved little): twenty a second per key, of their own, so that cheap stats cannot
  // spend them (A55-1); the rest counted with the bytes hashed. Without a bound, probes of 1 MiB
  // files with long names wrote 1.72 times what the client sent and read (a sixty-first
  // re-attack, R61-4). The server sets the key's; alone (tests), a session has its own.
  std::shared_ptr<LineBudget> hashing_lines = hashing_line_budget();
  // The names this key's listings may still have the server read (server/name_budget.h), shared by
  // all its sessions; the server sets the key's, from --max-list. Alone (tests): none.
  std::shared_ptr<NameBudget> listing_names = nullptr;
  // The directories this key's puts, probes and mkdirs may have the server judge on their way
  // (Root::planted_on_way), a budget of its own: a listing may overdraw listing_names (one walk
  // of a tree at --max-list), and one of another user's planted directories left the key's puts
  // busy for 30 s or more, "this key's requests ..." (a fifty-third re-attack, A53-2). The server
  // sets the key's, as listing_names. Alone (tests): none.
  std::shared_ptr<NameBudget> walk_names = nullptr;
  // Pipelined gets whose data went out and whose Result the client has not sent yet, oldest
  // first (docs/PROTOCOL.md, "Pipelining"): the Results come in request order, between requests.
  struct AwaitedResult {
    proto::Message req;
    std::string shown;
    uint64_t bytes = 0;  // the file's size
    std::chrono::steady_clock::time_point started;
    uint64_t resumed_from = 0;  // a resumed get (protocol 4): where its data started
    uint64_t hashed = 0;        // the bytes of its prefix hashed for it (hashed_here)
  };
  std::deque<AwaitedResult> awaiting{};
  size_t awaiting_bytes = 0;  // the sum of their `shown` (at most kMaxAwaitedBytes)
  // The signal that is stopping the server (SIGINT, SIGTERM; -1 for Server::stop()), 0 while it
  // runs: a transfer that fails then is logged as stopped, not as the connection failure the stop
  // caused.
  const std::atomic<int>* stop_signal = nullptr;
  // The digests this session had the server compute for probes and resumed gets, and what it may
  // still have hashed (server/digests.h).
  PrefixDigests digests{limits.max_probe_hash};
  // The bytes hashed for the request being handled (session_digest): its log line says them, a
  // resumed get's, a resumed put's and a probe's ("hashed="), so that a log shows what the
  // server read for a request that moved no data (a fifty-fourth re-attack, B54-1: a probe of a
  // 300 MiB file hashed it all and wrote no line).
  uint64_t hashed_here = 0;
  bool told_budget = false;  // the log said once that the budget is spent
  // The directories every session of its client key made, each at its path (server/made_dirs.h;
  // the server sets the key's, alone a session has its own): the only ones a mkdir with the
  // preserve flag gives a mode and time (PROTOCOL.md 3.5). One that existed keeps its own.
  std::shared_ptr<MadeDirs> key_made_dirs = std::make_shared<MadeDirs>();
  // The directories this session's mkdirs answered for, by path: a put or mkdir there reaches the
  // same directory or is refused (server/dir_pins.h).
  DirPins pins{};
  // The key of the directory identities a mkdir's and a stat's answer carry (docs/PROTOCOL.md
  // 3.5), derived from the host key so that it outlives a restart; alone (tests): none, and the
  // answers carry no identity.
  const std::array<uint8_t, 32>* dir_id_key = nullptr;
};

// The server's key for directory identities, derived from its host key's secret.
std::array<uint8_t, 32> dir_id_key(const proto::Identity& host);

// Why a request or session failed, as the log says: "the server was stopped (SIGTERM)" once the
// server is stopping, else the failure's own text.
std::string failure_text(const std::atomic<int>* stop_signal, const Failure& f);

// Pipelined gets a session may leave unconfirmed at once (a client's window is far smaller); one
// more is a protocol error.
constexpr size_t kMaxAwaitedResults = 4096;
// ...and at most this many bytes of their paths (the reference client, 256 requests in flight of
// at most 4096 bytes each, needs 1 MiB).
constexpr size_t kMaxAwaitedBytes = size_t(2) << 20;

// Serves requests until the client says bye (returns) or the connection cannot continue (throws
// Failure).
void serve_requests(RequestContext& ctx);

// A get's data: sends `size` bytes of fd (fd < 0: zeros) as a record stream, then reads the
// client's Result. Throws Failure with the reason, the client's own when it said why it stopped
// (a receiver that gives up sends a Result and closes, so our writes fail before we read it).
void send_file_await_result(Conn& c, int fd, uint64_t size, const StreamOptions& opt);

}  // namespace aesxfer::server
