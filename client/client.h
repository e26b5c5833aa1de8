// The client: connect, handshake (pinning the host key), then put or get files one after the other
// on the same connection.
#pragma once
#include <fcntl.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crypto/checksum.h"
#include "crypto/suite.h"
#include "files/guarded_path.h"
#include "files/version.h"
#include "net/congestion.h"
#include "net/conn.h"
#include "net/transfer.h"
#include "proto/listing.h"

namespace aesxfer::files {
class AtomicFile;
class PartialFile;
struct PrefixScan;
}  // namespace aesxfer::files

namespace aesxfer::client {

// Names from the layer below that the client's interface uses.
using files::AtomicFile;
using files::PartialFile;
using net::Conn;
using net::ProgressFn;
using net::StreamOptions;

constexpr uint16_t kDefaultPort = 7227;
// What a put_stream's on_start is told: the size is known only at the end.
constexpr uint64_t kUnknownSize = UINT64_MAX;
// Where a get writes `local` (client.cpp): inside an open directory (dirfd, recv -r) by openat
// with O_NOFOLLOW; else written through for a FIFO, device or socket, beside the target for a
// symbolic link to a file, else a temporary file renamed into place.
std::unique_ptr<AtomicFile> open_local(const std::filesystem::path& local, int dirfd);
// The failure of a get whose `size` more bytes cannot fit in the file system of `fd`, a regular
// file: "SHOWN: no space left on device (N KiB to receive, M KiB free)" (`shown` printable already;
// "" for the reason alone), status no_space, said before any byte is written; nullopt when they
// fit (and for a FIFO, a device or a socket, written through). Nothing is reserved: a server that
// claims a size it never sends would have it held until the timeout (the third re-attack, R2).
// `copied`: the first bytes of `size` are a copy of the destination made here (recv --resume onto
// a shorter destination), said apart.
// Why DEST is not written into: an existing directory another user planted under that name in a
// sticky directory others can write to (files::planted_by), who could read, rename or replace what
// lands in it (a thirty-eighth re-attack, B-F1: recv host:f /tmp/copy.key wrote /tmp/copy.key/f
// into nobody's directory, exit 0; a trailing "/" no longer makes it meant, as a directory above
// DEST never could: a thirty-ninth, B-F5). nullopt otherwise.
std::optional<proto::Failure> planted_destination_dir(const std::filesystem::path& local);
// Why nothing is written into directory `dirfd` (where `shown` goes): it, or a directory above it,
// is one another user planted in a sticky directory others can write to (files::planted_on_way),
// who could rename or replace what lands below it. nullopt otherwise.
std::optional<proto::Failure> planted_way_refusal(int dirfd, const std::string& shown);
// A destination path the user typed, walked by files::resolve_guarded, and refused (thrown) when
// another user's link led there to what they do not own (files::foreign_reach) or a directory
// another user planted is on its way (planted_way_refusal): the one walk of every single-file
// destination, with --resume too (a fortieth re-attack, A-F2: recv --resume wrote into nobody's
// /tmp/backup, where plain recv was refused).
files::GuardedEntry guarded_destination(const std::filesystem::path& local);
std::optional<proto::Failure> room_refusal(int fd, uint64_t size, const std::string& shown,
                                           uint64_t copied = 0);
// Why a tree may not make one more file (or, with `directory`, directory) in dirfd's file system,
// `shown` (printable) named: the last 1/64 of its inodes, and for a directory's block the reserve
// (files::reserve_of), are kept, as the server keeps them from a client's tree. A listing of a
// million empty directories or files (30 MB on the wire) took every inode of the client's file
// system, or 4 GB of its blocks, and the command said ok (a fiftieth re-attack, C50-1). A file's
// own bytes are judged apart (room_refusal), as the user asked for them.
std::optional<proto::Failure> room_to_create(int dirfd, const std::string& shown, bool directory);
// What a failed get's line says when its partial file stays for the next --resume (recv_tree.cpp,
// and app/recv_cmd.cpp, which adds it after a lost connection and takes it off the reason given
// to the sources after it).
inline constexpr std::string_view kKeptNote = " (partial file kept for --resume)";
// A failure while (or just after) the destination was copied into its partial file, before any of
// the server's data: the copy is removed.
inline constexpr std::string_view kCopyDropped =
    " (copying the destination into its partial file; nothing kept, the destination is as it was)";
// The same once the server's data had begun over that copy (a withdrawn or failed resumed get): the
// copy goes, and the line does not say it failed while copying (a fifty-eighth re-attack, H58-5).
inline constexpr std::string_view kCopyDroppedAfterData =
    " (nothing kept: the copy of the destination it resumed from is removed, the destination is as it was)";
// How a put to `remote` of a file named `name` is named to the user: a directory written with a
// trailing slash (a tree's files, client/send_tree.cpp) and the name, the name alone in the root
// "." (a disk full under "send f host:" said "host:.: no space left": a nineteenth re-attack, N5),
// else `remote` itself.
inline std::string put_shown(const std::string& remote, const std::string& name) {
  if (name.empty()) return remote;
  if (remote == ".") return name;
  return !remote.empty() && remote.back() == '/' ? remote + name : remote;
}
// The server's text for where it keeps a resumable put's partial file, when it names the partial
// file beside the destination typed (`remote`, the file's `name`); else "" (client.cpp).
std::string kept_partial_text(const std::string& text, const std::string& remote, const std::string& name);

// The verdict of a put whose stream went whole and whose answer the failed link `f` took (one
// alone, or pipelined): "FILE: sent whole, no answer came (REASON): whether the server put it in
// place is not known", marked maybe_placed, so that the command's last word calls it "not
// confirmed" when no retry settles it, never "not sent". Not `acknowledged` (net::Conn): "FILE:
// written whole, but the connection failed before all of it was acknowledged (REASON): ...", since
// most likely it never arrived (the answer may still have been lost after it did).
proto::Failure answer_lost(const proto::Failure& f, const std::filesystem::path& local, bool acknowledged);
// A recv to `local` (a path as typed) writes through what it names, never into a temporary file:
// a descriptor (/dev/fd/N, /proc/self/fd/N, /dev/stdout), a FIFO, a device, a socket. Such a
// destination cannot be written again from the start (app/recv_cmd.cpp: never retried).
bool written_through(const std::filesystem::path& local);
// A file to send, `name` inside directory dirfd (AT_FDCWD: a path as the user typed it), opened
// for reading without blocking (a FIFO put where a file was, by another user who can write to the
// tree, opens at once and is refused: never waited on; an eighth re-attack, F3) and then required
// to be a regular file; `st` is its fstat. Throws Failure naming `shown`, origin local.
// The text of the Result that tells the server a get failed on this side: the reason alone (its
// errno, or its status), never the local path, which is none of the server's business (a
// twenty-seventh re-attack, N4: the client's directory names, already escaped, reached the
// server's log escaped twice more).
std::string failure_result_text(const proto::Failure& e);

// Why a get into `local` (a destination the user named, or DEST/NAME) would be refused, found
// before its request: what open_local() refuses (a link or a special file another user planted in
// a sticky directory, a link to a directory path, a directory where the file goes) and a file the
// final rename cannot replace (files::unreplaceable). nullopt when nothing is against it.
std::optional<proto::Failure> destination_refusal(const std::filesystem::path& local);
// The refusal of a local destination named in the shapes of aesxfer's own temporary and partial
// files (a thirtieth re-attack, N1).
proto::Failure reserved_destination(const std::filesystem::path& local);

files::UniqueFd open_source(int dirfd, const std::filesystem::path& name, const std::filesystem::path& shown,
                            struct stat& st);

// The one get request (docs/PROTOCOL.md 3.4), whichever way a file is fetched (alone, pipelined,
// resumed, or in ranges): `remote`, `size` (what the /dev/zero source yields; for a ranged get the
// file's size, which the server checks), and `flags` (kFlagAhead: pipelined, the caller tags it;
// kFlagResume: the client holds `offset` bytes hashing to `digest`, empty when it holds none;
// kFlagRange: see set_range).
proto::Message get_request(const std::string& remote, uint64_t size, uint8_t flags = 0, uint64_t offset = 0,
                           const std::string& digest = {});
// Makes a put or get request one of `parts` byte ranges (--streams, docs/PROTOCOL.md "Parallel
// streams") under a fresh random transfer id; each part then sets its part, offset and length.
void set_range(proto::Message& req, size_t parts);

struct PartsSent;  // client/parallel.cpp

struct ClientOptions {
  std::string host;
  uint16_t port = kDefaultPort;
  const crypto::CipherDesc* cipher = nullptr;
  const crypto::MacDesc* mac = nullptr;
  std::filesystem::path home;  // $AESXFER_HOME
  // -i / IdentityFile: the client key to use, which must exist; empty: home/id_ed25519 (created
  // on first use).
  std::filesystem::path identity;
  // -v: called with (level, line) for what the connection does (handshake steps, host key, suite
  // and implementations, socket buffers, round trip); level 1 for -v, 2 for -vv. Must be safe to
  // call from several threads (the connections of --streams are opened in parallel).
  std::function<void(int level, const std::string& line)> debug;
  bool extra_stream = false;  // one of the extra connections of --streams (no "streams:" line)
  std::chrono::milliseconds timeout{30000};
  std::string keylog;             // file to append session keys to (every connection), or empty
  bool strict_host_keys = false;  // --strict-host-keys: refuse a host not yet in known_hosts
  // Say "Permanently added" on first contact, and "created identity" when this run made the
  // user's key (the CLI, unless -q).
  bool announce_new_host = false;
  bool preserve = false;  // -p: the receiver applies mode exactly and mtime
  bool resume = false;    // --resume: puts and gets continue a kept partial file (docs/PROTOCOL.md)
  // With resume, a get with no partial file offers the existing destination as its prefix. Set (not
  // zero) by a retry of --retries without --resume: only a destination changed after then (its
  // ctime: written by this command) is offered, so that nothing about a file the command did not
  // write is sent (docs/SECURITY.md).
  timespec offer_changed_since{};
  bool fine_progress = false;  // progress after every record (-l, --json-progress), not per batch
  bool paced = false;          // -l: a rate limiter paces the progress callback (one stream only)
  // --streams: connections per file. 0 = auto: more than one only on a long path (round trip of
  // 10 ms or more) for big files; see client/parallel.cpp. Not with resume or -l (paced).
  int streams = 0;
  // --checksum and --record-size, carried in the handshake (docs/PROTOCOL.md 1.2).
  crypto::ChecksumAlg checksum = crypto::kDefaultChecksum;
  uint32_t record_size = uint32_t(proto::kDefaultPayload);
  // The record layer's crypto code: the best, or the portable one (bench --no-aesni-too).
  crypto::Impl impl = crypto::Impl::best;
  // --congestion / CongestionControl (net/congestion.h): auto, system or a name, set on every
  // connection this client opens (it matters on the ones it sends on: send).
  std::string congestion = "auto";
  // Appended to the message of a connection that could not be made: the CLI's word on an address
  // it doubts (a path that begins with what looks like a port).
  std::string connect_hint;
};

struct FileResult {
  std::string file;
  uint64_t bytes = 0;
  double seconds = 0;
  bool verified = false;
  crypto::Checksum checksum;  // of the whole file (a single stream)
  // --streams: one checksum per byte range (offset, length, checksum of that range alone)
  struct Range {
    uint64_t offset, length;
    crypto::Checksum checksum;
  };
  std::vector<Range> ranges;
  uint64_t resumed_from = 0;  // --resume: bytes the receiver already had (not sent again)
  // send: found whole and identical by a retry's probe (found_in_place), having been sent whole
  // before the link was lost, its end acknowledged: this command moved it, the retry only
  // confirmed it (app/cli.cpp). written_before_the_loss: written whole to that connection, its end
  // never acknowledged: whether those bytes or a copy already there made the match is not known
  // (a sixtieth re-attack, O60-2).
  bool sent_before_the_loss = false;
  bool written_before_the_loss = false;
  // Found whole and identical where it goes (--resume, a retry's probe): nothing moved.
  bool found_in_place() const { return bytes > 0 && resumed_from == bytes; }
  int streams = 1;           // connections the file moved over (--streams)
  uint64_t record_size = 0;  // payload bytes per record, as the handshake agreed
  // send: the congestion control of the connections the file left on and why (net/congestion.h),
  // and the share of the bytes they sent that TCP had to send again (-1: unknown).
  std::string congestion, congestion_why;
  double resent_percent = -1;
  // --resume (or a retry): why the receiver's partial file was passed over and the file moved from
  // the start (another user's, linked, not a file: docs/SECURITY.md, "Partial files"); "" otherwise.
  // Printable already.
  std::string not_resumed;
};

// send: one line saying why the path was slow and what would help, when the file's connections
// lost packets (resent 0.1 % or more) under loss-based congestion control; "" otherwise.
std::string slow_path_note(const FileResult& r);

// The answer to list (recv -r): a directory on the server and everything under it.
struct RemoteDir {
  std::string path;   // the directory, relative to the server's root ("." for the root)
  uint32_t mode = 0;  // its permission bits and mtime
  int64_t mtime = 0;
  std::vector<proto::ListEntry> entries;  // depth first, parents before their contents
};

class Client {
 public:
  // Connects and authenticates both ways; throws Failure with one clear line.
  explicit Client(const ClientOptions& opt);
  ~Client();

  // Sends local file `local` to `remote` (a file or directory on the server). Throws Failure.
  // `on_start` is told the size before the first byte moves.
  // `name`, when not empty, is the file's name on the server when `remote` is a directory (else
  // local's own name). `fd`, when given, is `local` already open_source()d (send -r opens its
  // files below the directories it read); else put opens it so.
  FileResult put(const std::filesystem::path& local, const std::string& remote,
                 const std::function<void(uint64_t size)>& on_start, const ProgressFn& progress,
                 const std::string& name = "", int fd = -1);
  // Sends what fd yields until its end (send -: standard input, read as it comes, never spooled)
  // as an unsized put (docs/PROTOCOL.md 3.3), named `name` when `remote` is a directory. One
  // connection whatever --streams says; refused with --resume (the input cannot be read again).
  // on_start is told kUnknownSize; the result holds the final size and checksum. Throws Failure.
  FileResult put_stream(int fd, const std::string& remote, const std::string& name,
                        const std::function<void(uint64_t size)>& on_start, const ProgressFn& progress);
  // What a probe's answer (docs/PROTOCOL.md 3.6) says the server holds of `local`: the whole file,
  // identical (size and keyed digest of every byte; `done` then describes it, nothing to send), a
  // partial file worth a resumed put (its prefix is checked again by put), or nothing usable.
  // send -r --resume judges its pipelined probes with it. A file above kMaxAheadSize is hashed
  // with keep-alive requests: the caller's pipeline must be empty then.
  enum class Kept { nothing, partial, complete };
  Kept judge_probe(const std::filesystem::path& local, const proto::Message& probe_answer, FileResult& done,
                   int fd = -1);
  // Fetches `remote` into `local` (a file, or an existing directory to put it in). `size` is used
  // only for the /dev/zero source.
  FileResult get(const std::string& remote, const std::filesystem::path& local, uint64_t zero_size,
                 const std::function<void(uint64_t size)>& on_start, const ProgressFn& progress);
  // Creates (or reuses) directory `remote` on the server; with a non-empty `name`, and `remote` an
  // existing directory, remote/name instead (scp -r semantics). Returns the directory's path
  // relative to the server's root. With opt.preserve, an existing directory gets mode and mtime.
  std::string mkdir(const std::string& remote, const std::string& name, uint32_t mode, int64_t mtime,
                    bool apply_attrs = false, std::string* dir_id = nullptr);
  // Fetches `remote` into exactly `local` (not into a directory there). With opt.resume, through
  // the partial file .NAME.aesxfer-partial beside it, which is kept when the connection breaks and
  // continued on the next call (docs/PROTOCOL.md, "Resumed get").
  // dirfd (recv -r): the file is local.filename() inside that open directory, created there with
  // openat and O_NOFOLLOW (local names it in messages); a symbolic link there is never followed.
  // Else a FIFO, device or socket destination is written through, never replaced.
  // size_hint: the file's size when already known (from a listing); a size that would go over one
  // connection anyway then spares the stat round trip that parallel streams otherwise need.
  FileResult fetch(const std::string& remote, const std::filesystem::path& local, uint64_t zero_size,
                   const std::function<void(uint64_t size)>& on_start, const ProgressFn& progress,
                   uint64_t size_hint = UINT64_MAX, int dirfd = AT_FDCWD);
  // Lists directory `remote` recursively (symlinks and special files reported, not followed).
  // Checks what the server sends: the announced count, page bounds, every directory listed before
  // what it holds, no path twice. Throws Failure.
  RemoteDir list(const std::string& remote);
  void bye() noexcept;
  // After a put or get threw: true when it failed before any data moved (a local open error, the
  // server's refusal), so the session can go on with the next file (scp semantics).
  bool can_continue() const { return clean_failure_; }
  // True when `remote` is an existing directory on the server (the root "." always is). Asked
  // with stat, whose refusal for a directory ends in ": is a directory" (docs/PROTOCOL.md 3.3).
  // `dir_id`, when given: the directory's identity as the server's answer gives it (PROTOCOL.md
  // 3.5), or "".
  bool is_remote_dir(const std::string& remote, std::string* dir_id = nullptr);

  const proto::SessionKeys& keys() const { return *keys_; }
  // "host:port" of the server, for messages about the connection.
  const std::string& peer() const { return conn_->peer(); }
  // A remote file named as the user writes it, "host:path" ("[v6]:path"), for messages; the port
  // goes apart, at the end of the line (port_note()), so that nothing reads as HOST:PORT:PATH.
  std::string remote_name(const std::string& path) const;
  // " (port 45201)", or "" for the default port.
  std::string port_note() const;
  // A refusal of `path` in the peer's Response or Result, as proto::refusal names it, with the
  // file as remote_name() writes it: "host:path: reason (port N)".
  proto::Failure refused(const proto::Message& m, const std::string& path) const;
  // Smoothed round-trip time of the connection (TCP_INFO), in microseconds; 0 when unknown.
  uint32_t rtt_us() const;
  // The congestion control this connection got and why (--congestion).
  const net::Congestion& congestion() const { return cc_; }
  // Connections the next file of `size` bytes would use (client/parallel.cpp).
  int streams_for(uint64_t size);
  bool resuming() const { return opt_.resume; }
  // --resume as the user gave it, not as a retry of --retries runs (offer_changed_since set).
  bool resume_asked() const {
    return opt_.resume && !opt_.offer_changed_since.tv_sec && !opt_.offer_changed_since.tv_nsec;
  }
  // Sets --resume for the puts that follow (send -r --resume sends a file whole when the server
  // refused its kept partial file); returns what it was.
  bool set_resuming(bool on) {
    std::swap(opt_.resume, on);
    return on;
  }
  // $AESXFER_HOME (recv -r records the trees it created there: client/tree_resume.h).
  const std::filesystem::path& home() const { return opt_.home; }
  // The server's host key, as "SHA256:..." (proto::fingerprint), once the handshake checked it.
  const std::string& host_key_fingerprint() const { return host_key_fp_; }
  // Offset the current or last put or get resumed from (valid from its on_start call on).
  uint64_t resume_offset() const { return resume_offset_; }

 private:
  friend class Pipeline;  // client/pipeline.h: pipelined requests on this connection
  ClientOptions opt_;
  std::unique_ptr<Conn> conn_;
  std::unique_ptr<proto::SessionKeys> keys_;
  uint64_t resume_offset_ = 0;
  bool clean_failure_ = false;
  std::string host_key_fp_;
  net::Congestion cc_;
  // The path's base round trip (tcpi_min_rtt, else the smoothed one) and the auto number of
  // connections decided from it, once per invocation (client/parallel.cpp); -1: not yet.
  mutable int auto_streams_ = -1;
  mutable uint32_t base_rtt_us_ = 0;
  // put --resume: probes what the server kept of `req`'s file. True when the server's copy is
  // whole and ours (`done` describes it); else sets req's resume flag and offset (with the prefix's
  // `scan`) and `not_resumed` when the server passed a partial file over.
  bool probe_for_resume(int fd, proto::Message& req, std::optional<files::PrefixScan>& scan,
                        std::string& not_resumed, FileResult& done);
  // The unsized put of put_stream, and of put for a file made as it is read (files::made_when_read);
  // `local` names it in a failure's line ("-" for standard input).
  FileResult unsized_put(int fd, const struct stat& st, const std::string& remote, const std::string& name,
                         const std::function<void(uint64_t size)>& on_start, const ProgressFn& progress,
                         const std::filesystem::path& local);
  // send: fills r's congestion fields from the connections fds (their counters before the file).
  void note_send(FileResult& r, const std::vector<int>& fds, const std::vector<net::TcpCounts>& before) const;

  // Parallel streams (client/parallel.cpp): the extra connections, opened on first use and kept
  // for the following files; a broken one is not reused.
  std::vector<std::unique_ptr<Client>> extra_;
  bool extra_tried_ = false;
  int auto_streams() const;
  // The steps of the constructor (client.cpp).
  proto::Identity load_client_identity() const;
  void connect_and_hello(proto::ClientHandshake& hs);
  void check_host_key(const proto::PublicKey& host_key);
  files::UniqueFd open_keylog() const;
  void write_keylog(files::UniqueFd kfd) const;
  void await_welcome(const proto::Identity& id);
  void log(int level, const std::string& line) const {
    if (opt_.debug) opt_.debug(level, line);
  }
  void log_session(std::chrono::steady_clock::duration handshake) const;
  bool grows() const;        // client/stream_growth.h applies to this client's parallel puts
  int open_extra(int want);  // returns the connections available in all, this one included
  // `need` more connections to the same server, opened in parallel; those that failed are left out.
  std::vector<std::unique_ptr<Client>> connect_more(size_t need) const;
  FileResult put_parallel(int fd, const std::filesystem::path& local, proto::Message req, int n,
                          const std::function<void(uint64_t)>& on_start, const ProgressFn& progress);
  FileResult get_parallel(const std::string& remote, const std::filesystem::path& local,
                          const proto::Message& st, int n, const std::function<void(uint64_t)>& on_start,
                          const ProgressFn& progress, int dirfd);
  // commit: sent right behind the range's end record (part 0), answered once every part verified.
  // After a failed send: throws the receiver's Result when it said why it stopped (else returns).
  void throw_receivers_reason(const std::string& remote);
  // Sends a put's request and returns its ok Response; a refusal (thrown) leaves the session usable.
  proto::Message ask_put(const proto::Message& req);
  // Reads the Result that ends a put; throws Failure unless it is ok.
  void expect_ok_result(const std::string& remote);
  // Runs `read`, which reads the answer to a put of `local` this end sent whole on conn_ (its
  // Result, or a parallel put's commit's Response). A link failure meanwhile becomes the put's
  // verdict, answer_lost's, said by whether TCP acknowledged all that was written before it.
  void await_sent_answer(const std::filesystem::path& local, const std::function<void()>& read);
  // The Result that follows a stream, whatever its status.
  proto::Message expect_result();
  // A put's stream failed with `f`: the failure to report, the file named (a withdrawn one after
  // the server's Result, the session going on). `shown`: the destination as put_shown names it.
  [[noreturn]] void put_failed(const proto::Failure& f, const std::filesystem::path& local,
                               const std::string& shown);
  // `since`: the file as put_parallel found it (a part read after it changed is withdrawn).
  // `commit`, when given, goes right behind the part. `sent` is told when the part's stream and
  // the commit have gone (PartsSent, client/parallel.cpp).
  crypto::Checksum put_range(int fd, const proto::Message& req, const ProgressFn& progress,
                             const proto::Message* commit, const struct stat* since, PartsSent* sent);
  // `version`: the server's name of the file version the part was read from (PROTOCOL.md 3.9).
  crypto::Checksum get_range(int fd, const proto::Message& req, const ProgressFn& progress,
                             std::string& version);
  // nullopt when the partial file may not be adopted: `not_resumed` says why, and the caller
  // receives the file from the start. `size_hint` as for fetch(): the file's size when known.
  // fetch() and put() past the resume: the whole file, or (put) from the offset the probe agreed.
  FileResult fetch_whole(const std::string& remote, const std::filesystem::path& local, uint64_t zero_size,
                         const std::function<void(uint64_t size)>& on_start, const ProgressFn& progress,
                         uint64_t size_hint, int dirfd, bool sink, bool through);
  FileResult put_data(int fd, const struct stat& st, const std::filesystem::path& local,
                      const std::string& remote, const proto::Message& req,
                      const std::optional<files::PrefixScan>& scan,
                      const std::function<void(uint64_t size)>& on_start, const ProgressFn& progress);
  std::optional<FileResult> fetch_resumed(const std::string& remote, const std::filesystem::path& local,
                                          uint64_t zero_size,
                                          const std::function<void(uint64_t size)>& on_start,
                                          const ProgressFn& progress, uint64_t size_hint, int dirfd,
                                          std::string& not_resumed);
  // For prefix_mac's tick while this client hashes a resume prefix: a `stat` of the root every
  // half second, so that a server's idle timeout (30 s by default) never drops the session while
  // a large file is hashed from a slow disk.
  std::function<void()> keepalive();
  // True when the probe answer `pr` is the server's whole copy of the open file fd (`size` bytes)
  // and it hashes like ours; fills `done` (all but its name). tick as for prefix_mac.
  bool already_there(int fd, const proto::Message& pr, uint64_t size, FileResult& done,
                     const std::function<void()>& tick);
  // Tells the server why this receiver stopped (a Result with the error's status); a connection
  // that is already gone is not an error here.
  void send_failure_result(const proto::Failure& e) noexcept;
  // A receive into a destination that failed: rethrows `e` unless the connection is at the file's
  // end (net::at_file_end), else answers it with a Result; a stream the server withdrew (the file
  // changed as it read it) then lets the session go on with the next file.
  void answer_failed_receive(const proto::Failure& e);
  // recv --resume before its get: the prefix offered (the partial file, or the destination base_fd
  // copied into it unless `whole`), hashed once the room for the rest is judged (recv_tree.cpp).
  std::optional<files::PrefixScan> resume_prefix(PartialFile& pf, int base_fd, bool whole, uint64_t have,
                                                 uint64_t size_hint, const std::filesystem::path& local);
  // recv --resume once the server agreed where to start: the stream into the partial file (or,
  // when the destination already is the server's whole file, only its end record), the Result,
  // and the file's figures. base_fd: the destination offered as the prefix, or -1; base_seen: its
  // state when it was hashed.
  FileResult finish_resumed(FileResult r, const proto::Message& resp, const StreamOptions& so,
                            PartialFile& pf, int base_fd, const files::FileVersion& base_seen, bool whole,
                            const std::filesystem::path& local,
                            const std::function<void(uint64_t size)>& on_start, const ProgressFn& progress);
  // Sends a request on this connection and returns the server's Response, which is ok: a refusal
  // is thrown as the peer's Failure (refused()). Throws Failure when the connection
  // fails or something else arrives.
  proto::Message ask(const proto::Message& req, const char* what = "the request");
  // The same exchange with the Response's status unchecked (a caller that reads a refusal).
  proto::Message exchange(const proto::Message& req, const char* what);
  // A stat request; returns the Response (its status unchecked). Throws Failure on a protocol error.
  proto::Message stat_remote(const std::string& remote, uint64_t zero_size, const char* what = "the request");
};

}  // namespace aesxfer::client
