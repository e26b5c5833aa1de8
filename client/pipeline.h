// Pipelined requests on a client's connection (docs/PROTOCOL.md, "Pipelining"): small puts,
// gets and mkdirs go out without waiting for the answers to the ones before them, up to a window
// by count and by bytes; the answers come back in request order, each carrying its request's tag,
// and are matched to their files here. Every file gets its own verdict through its callback.
#pragma once
#include <cstdint>
#include <ctime>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "client/client.h"
#include "files/atomic_file.h"
#include "files/resume.h"
#include "files/unique_fd.h"

namespace aesxfer::client {

// The existing destination `dest` (in directory dirfd) as a resume base: a
// regular, non-empty file opened without following a symbolic link (nor blocking on a FIFO
// planted there), of this user and with one link (another user's file, or a link to one, is
// replaced whole: never kept as "up to date" nor appended to), with its size; or none. The
// one-file path of recv -r --resume and the pipelined offers (Pipeline::make_offer) both ask it.
// None without a checksum (opt.checksum): the end record's, over the whole file, is what proves
// the server holds our bytes; else an echo of our digest kept a private file "up to date" and -p
// gave it the server's mode 0666 (a forty-first re-attack, B-F4). When opt.offer_changed_since is
// not zero: only a file whose ctime is later. `seen`: the file's state as opened (its size is
// what is offered); a copy made of it later must find it unchanged (files::copy_prefix).
files::UniqueFd open_destination_base(int dirfd, const std::filesystem::path& dest, files::FileVersion& seen,
                                      const ClientOptions& opt);

// Thrown by Pipeline::put when its file failed as it was read (the session cannot go on): every
// file before it and this one already have their verdicts, so the caller reports nothing more.
struct PipelineStopped : proto::Failure {
  explicit PipelineStopped(const proto::Failure& f) : proto::Failure(f) {}
};

class Pipeline {
 public:
  // How much may be unanswered at once: requests, and file bytes (puts: sent; gets: announced).
  struct Window {
    size_t requests = 256;
    uint64_t bytes = uint64_t(8) << 20;  // above the bandwidth-delay product of 1 Gbit/s at 50 ms
  };
  // A file's verdict: its result when it verified (and was renamed into place), else the failure
  // (origin peer: the server refused or reported it; local: this end could not write it). A
  // failure of the connection itself is thrown by the call that met it instead.
  using Done = std::function<void(const FileResult* ok, const proto::Failure* failed)>;
  // A directory's answer: the server's path for it, or the failure.
  using DirDone = std::function<void(const std::string* path, const proto::Failure* failed)>;
  // A stat's answer: the Response (size, mode, mtime), or the server's refusal.
  using StatDone = std::function<void(const proto::Message* ok, const proto::Failure* failed)>;

  // Gathers the connection's writes from its first request until drain() (net/conn.h:
  // Conn::set_gather), so only pipelined work is gathered.
  explicit Pipeline(Client& c) : Pipeline(c, Window{}) {}
  Pipeline(Client& c, Window w);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;  // the connection calls back into this one (on_flushed)
  Pipeline& operator=(const Pipeline&) = delete;

  // True when a put of `size` bytes may be pipelined with this client's options (small, not
  // spread over parallel streams, and not --resume or -l, which keep their own exchanges).
  // probed: send -r --resume asked first (probe) and found nothing worth resuming, so the file
  // goes whole and may be pipelined despite --resume.
  bool can_put(uint64_t size, bool probed = false) const;
  // resumable: recv -r --resume, for a file without a partial file here (protocol 4: the get may
  // offer the existing destination, see get()).
  bool can_get(uint64_t size_hint, bool resumable = false) const;

  // Sends a put of `local` (opened and checked here; a local error is reported through done at
  // once, nothing sent) to `remote` (`name` as for Client::put). The data goes out right behind
  // the request.
  // `fd`, when given, is `local` already open_source()d (client.h); else put opens it so.
  void put(const std::filesystem::path& local, const std::string& remote, const std::string& name, Done done,
           int fd = -1);
  // mkdir of `path` (no name: the caller knows its place), answered through done.
  void mkdir(const std::string& path, uint32_t mode, int64_t mtime, bool apply_attrs, DirDone done);
  // A get of `remote` into `local` (inside dir, an open directory that `keep` holds open until
  // the file is done; or dir = AT_FDCWD and a path). size_hint: the listed size. offer (recv -r
  // --resume, docs/PROTOCOL.md 3.8 and 3.10): when the destination is a regular file of exactly
  // size_hint bytes, the get carries the resume flag and the keyed digest of all of it; if the
  // server agrees only its end record comes (checked against our checksum; the file is left as it
  // is, with -p it takes the server's mode and time), or the rest of a file that grew since.
  void get(const std::string& remote, const std::filesystem::path& local, uint64_t size_hint, int dir,
           std::shared_ptr<void> keep, Done done, bool offer = false);
  // stat of `path` (size, mode and mtime, or the refusal), answered through done.
  void stat(const std::string& path, StatDone done);
  // probe (protocol 4, docs/PROTOCOL.md 3.6) of where a put of `size` bytes to `path` (`name` as
  // for put) would go: the Response (what the server keeps there) or the refusal.
  void probe(const std::string& path, const std::string& name, uint64_t size, StatDone done);
  // Waits for every answer still due (before any request that is not pipelined, and at the end).
  void drain();
  size_t in_flight() const { return q_.size(); }

 private:
  enum class Kind { put, get, mkdir, stat };
  struct Offer {
    files::UniqueFd fd;           // the destination, read only
    files::FileVersion hashed{};  // as it was when scanned: its size is what is offered (A51-1)
    files::PrefixScan scan;
  };
  struct Item {
    Kind kind = Kind::put;
    uint32_t tag = 0;
    std::string remote;
    std::filesystem::path local;
    uint64_t bytes = 0;
    int dir = -1;
    std::shared_ptr<void> keep;
    std::shared_ptr<Offer> offer;  // get: the destination offered as the prefix
    crypto::Checksum sum;
    std::chrono::steady_clock::time_point started;
    net::TcpCounts before;  // put: the connection's counters when its data started (--json's resent_percent)
    std::optional<proto::Failure> withdrawn;  // put: this end withdrew its stream; the Result is still due
    files::AwaitingAnswer sent;               // put: sent whole, its Result not read (a signal says so)
    uint64_t end_at = 0;                      // put: the connection's bytes written once it was sent whole
    bool held_back = false;  // put: whole, but its tail still held by gathering (not yet `sent`)
    Done done;
    DirDone dir_done;
    StatDone stat_done;
  };
  Client& c_;
  Window w_;
  std::deque<Item> q_;
  uint64_t bytes_ = 0;
  uint32_t next_tag_ = 0;

  void make_room(uint64_t bytes);
  void complete_front();
  void count_flushed();      // what gathering held went out: its puts are sent whole
  void mark_sent(Item& it);  // a put sent whole (a signal counts it), its end at written() bytes
  void settle_front(Item& it);
  // The connection failed (f): every put still waiting for its answers gets a verdict naming it,
  // sent whole or not, instead of none (a fifty-fifth re-attack, B55-1 and C55-2: a send whose
  // connection dropped after its small files went named none of them, --json gave no object).
  void lose_puts(Item* failed, const proto::Failure& f);
  // Runs `write` (what writes to the connection): a link failure met there gives the puts queued
  // their verdicts before it goes on (a fifty-sixth re-attack, B56-1: only a failure met while
  // waiting for an answer did, and 41 files the server held of 300 were never named).
  template <class Write>
  void writing(const Write& write);
  proto::Message answer(const Item& it, proto::MsgType type);
  void finish_get(Item& it, const proto::Message& resp);
  std::shared_ptr<Offer> make_offer(const std::filesystem::path& local, int dir, uint64_t size);
  uint64_t agreed_start(const Item& it, const proto::Message& resp) const;
  proto::Message request(proto::Op op, const std::string& path, uint8_t flags = 0);  // tagged
  proto::Message tagged(proto::Message req);    // pipelined: kFlagAhead and the next tag
  void ask(proto::Message req, StatDone done);  // a request answered by one Response (stat, probe)
};

}  // namespace aesxfer::client
