#include "server/requests.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iomanip>
#include <optional>
#include <sstream>

#include "crypto/sha256.h"
#include "crypto/util.h"
#include "files/atomic_file.h"
#include "files/dir_chain.h"
#include "files/guarded_path.h"
#include "files/io.h"
#include "files/resume.h"
#include "files/version.h"
#include "net/transfer.h"
#include "proto/listing.h"
#include "proto/ops.h"

namespace aesxfer::server {

using proto::Failure;

using namespace aesxfer::net;    // the layers below: connections and streams,
using namespace aesxfer::files;  // files and keys
using Clock = std::chrono::steady_clock;
using proto::Message;
using proto::Status;

// A failure the client reported in its Result, as the log shows it: its text raw, made printable
// once where the line is written (log_value), not also here (a twenty-ninth re-attack, N6: a
// client's text logged as \x5cxff). Its status is the client's, an error in any case.
// Only the first bytes of the text that escape to at most kClientWords characters are kept, and
// "...[N bytes]" says how long it was: a client's failure is a short reason (an errno's words or
// a status), and 120 bytes of 0xff in every Result made a get of a 1-byte file cost the log 2.8
// times what the client sent (a thirty-second re-attack, A-N1).
constexpr size_t kClientWords = 64;
static Failure client_reported(const Message& res) {
  std::string text = res.text.empty() ? std::string(proto::status_name(res.status)) : res.text;
  if (log_quoted(text).size() > kClientWords + 2) {
    size_t keep = std::min(text.size(), kClientWords);
    while (keep > 0 && log_quoted(text.substr(0, keep)).size() > kClientWords + 2) --keep;
    text = text.substr(0, keep) + "...[" + std::to_string(text.size()) + " bytes]";
  }
  return Failure("client reported: " + text, res.status == Status::ok ? Status::internal : res.status, 0,
                 proto::Origin::peer);
}

void send_file_await_result(Conn& c, int fd, uint64_t size, const StreamOptions& opt,
                            const net::ProgressFn& progress) {
  bool sent = false;
  try {
    send_stream(c, fd, size, progress, opt);
    sent = true;
    Message res = c.recv_message("the transfer");
    if (res.type != proto::MsgType::result) throw Failure("protocol error: expected a result");
    if (res.status != Status::ok) throw client_reported(res);
  } catch (const Failure& e) {
    if (sent) throw;
    if (net::withdrawn(e)) {  // the end record said so: the client's Result follows as after any stream
      Message res = c.recv_message("the transfer");
      if (res.type != proto::MsgType::result) throw Failure("protocol error: expected a result");
      throw;
    }
    // Cut while sending: the client may have said why it stopped (disk full, ...) before closing.
    std::optional<Failure> why;
    try {
      c.set_timeout(std::chrono::milliseconds(500));
      Message res = c.recv_message("the transfer");
      if (res.type == proto::MsgType::result && res.status != Status::ok) why = client_reported(res);
    } catch (const Failure&) {
    }
    if (why) throw *why;
    throw;
  }
}

std::string failure_text(const std::atomic<int>* stop_signal, const Failure& f) {
  const int sig = stop_signal ? stop_signal->load() : 0;
  if (sig == 0) return f.what();
  return std::string("the server was stopped") + (sig == SIGINT    ? " (SIGINT)"
                                                  : sig == SIGTERM ? " (SIGTERM)"
                                                                   : "");
}

namespace {

Message response(Status st, const std::string& text = {}) {
  Message m;
  m.type = proto::MsgType::response;
  m.status = st;
  m.text = text;
  return m;
}

// The one place a request's outcome is logged, in logfmt: 'peer=P op=OP file="F"[ details]
// result=R'; the path and a failure's text (both may hold what the peer sent) are quoted and
// bounded (log_value), the details are the server's own numbers and names.
void log_outcome(RequestContext& ctx, const Message& req, const std::string& shown,
                 const std::string& details, const std::string& result) {
  std::string r = result == "ok" ? result : log_value(result, kLoggedResult);
  const char* what = req.op == proto::Op::list ? " dir=" : " file=";
  ctx.log("peer=" + ctx.c.peer() + " op=" + proto::op_info(req.op).name + what +
          log_value(shown, kLoggedPath) + details + " result=" + r);
}

// What a transfer's log line says besides its file: bytes, cipher, MAC, speed, and where it
// resumed or which part it was.
std::string transfer_details(RequestContext& ctx, const Message& req, uint64_t bytes, double secs,
                             uint64_t resumed_from, uint64_t hashed) {
  std::ostringstream os;
  os << " bytes=" << bytes;
  if (req.flags & proto::kFlagRange) os << " part=" << req.part << "/" << req.nparts;
  os << " cipher=" << ctx.keys.cipher->name << " mac=" << crypto::mac_label(ctx.keys.cipher, ctx.keys.mac);
  if (req.flags & proto::kFlagResume) os << " resumed_from=" << resumed_from << " hashed=" << hashed;
  os << " MB/s=" << std::fixed << std::setprecision(1) << (secs > 0 ? double(bytes) / secs / 1e6 : 0.0);
  return os.str();
}

// Sends an answer to req: a pipelined request's answer carries its tag.
void answer(RequestContext& ctx, const Message& req, Message m) {
  if (req.flags & proto::kFlagAhead) {
    m.tagged = true;
    m.tag = req.tag;
  }
  ctx.c.send_message(m);
}

// log_outcome for a request that moved no data: within the key's budget (RequestContext::quiet_lines).
// Returns whether it was written; `moved`: the data bytes of a transfer left out, which the count
// says (unlogged_bytes=).
bool log_quiet(RequestContext& ctx, const Message& req, const std::string& shown, const std::string& result,
               const std::string& details = "", uint64_t moved = 0) {
  const auto more = ctx.quiet_lines->take(moved);
  if (more) log_outcome(ctx, req, shown, details + *more, result);
  return more.has_value();
}

// A transfer's line is always written when the transfer is worth it (Worth): when the bytes its
// file moved without a line, this transfer's with them, are more than the line takes; when what it
// did alone is (the file a put made); when a put replaced more bytes than its file moved without a
// line (this one's with them); or when its request made the server hash a MiB or more of a file. Otherwise it
// is within the key's budget of quiet lines, and its bytes wait for the next line of its file
// (server/quiet_bytes.h). So the log never grows faster than what the client sent or read:
// - 4,096 pipelined gets of an empty file wrote a line each, 2.2 bytes of log for each byte
//   received (a thirtieth re-attack, N1); 20,000 gets of 1 byte, 1.65 times the bytes sent, 3.2
//   times with a name of control bytes (a fifty-eighth, F58-1).
// and no file is read or put whole in pieces too small to be named:
// - 800 ranged gets of 250 bytes read a 200 KB file, and a file of 1 MB was grown by resumed puts
//   cut at 65,000 bytes, each session's within the budget; no line named either file (a sixtieth
//   re-attack, N60-1, N60-2).
// A request that hashed a MiB: a key's ten quiet lines a second, spent on cheap stats, hid what a
// probe or a resumed get that sent nothing hashed (a fifty-fifth re-attack, A55-1: 1.2 GiB hashed,
// "unlogged_requests=1").
constexpr uint64_t kHashedWorthALine = 1 << 20;
struct Worth {
  uint64_t moved = 0;     // the data bytes it moved: its file's until its file is named
  uint64_t alone = 0;     // judged alone: the size of the file a put made
  uint64_t hashed = 0;    // the bytes of a file the server hashed for it (hashed_here)
  uint64_t replaced = 0;  // the size of the file a put replaced
  // What a put left in place (the file it made; nothing for a failed put or a ranged part): from
  // here, the key's own bytes there (server/quiet_bytes.h).
  std::optional<uint64_t> placed = std::nullopt;
};

// What a line costs the log beyond its path, details and result: the time, peer, op and keys.
constexpr size_t kLineFrame = 192;

// client_words: the end of the result that the client chose (a pipelined get's failure, bounded by
// kClientWords); it is not counted in the line's cost, or a client's longer words would buy it more
// bytes read without a line (a sixtieth re-attack, N60-5).
void log_transfer(RequestContext& ctx, const Message& req, const std::string& shown, const Worth& w,
                  const std::string& details, const std::string& result,
                  const std::string& client_words = "") {
  const size_t line_cost = kLineFrame + log_value(shown, kLoggedPath).size() + details.size() +
                           log_value(result, kLoggedResult).size();
  const QuietBytes::Owed before = ctx.quiet_bytes->add(shown, w.moved, w.placed);
  // Each byte on one line only: this line's own (bytes=), or a count's (unlogged_bytes=), not a
  // repeat of the count's on this line (a sixty-first re-attack, R61-6).
  if (before.moved + w.moved > line_cost || w.alone > line_cost || w.replaced > before.placed) {
    ctx.quiet_bytes->settle(shown);
    return log_outcome(ctx, req, shown, details, result + client_words);
  }
  if (w.hashed >= kHashedWorthALine) {
    if (const auto more = ctx.hashing_lines->take(w.hashed)) {
      ctx.quiet_bytes->settle(shown);
      return log_outcome(ctx, req, shown, details + *more, result + client_words);
    }
    // Left out: its data bytes are counted with the others' (a sixty-second re-attack's note).
    ctx.quiet_lines->add_bytes(w.moved);
    return;
  }
  if (log_quiet(ctx, req, shown, result + client_words, details, w.moved)) ctx.quiet_bytes->settle(shown);
}

void refuse(RequestContext& ctx, const Message& req, const std::string& shown, const Refusal& r,
            const std::string& details = "") {
  answer(ctx, req, response(r.status, r.text));
  log_quiet(ctx, req, shown, "refused: " + r.text, details);
  // A pipelined put's data is already on its way: read it to its end record and drop it, so the
  // next request is where the client put it. Bounded: the size is at most kMaxAheadSize, and
  // anything but exactly that stream ends the session.
  if (req.op == proto::Op::put && (req.flags & proto::kFlagAhead)) {
    try {
      recv_stream(ctx.c, -1, req.size, nullptr);
    } catch (const Failure& e) {
      if (!net::withdrawn(e)) throw;  // withdrawn: it ended at its end record all the same
    }
  }
}

// A put or probe refused before its destination was found is logged with the path and the name
// the client gave, so that a refused `send a b c host:dir/` names each file (a forty-seventh
// re-attack, A47-2: three lines each said only file="dir/").
void refuse_target(RequestContext& ctx, const Message& req, const Refusal& r) {
  refuse(ctx, req, req.path, r, req.text.empty() ? "" : " name=" + log_value(req.text, kLoggedPath));
}

// ---- the one receive path (put: plain, resumed, ranged) ---------------------------------------

struct Receiver {
  int fd = -1;                   // -1: the /dev/null sink
  std::function<void()> finish;  // commit, or mark the part verified
  // Cleans up (origin local: this end refused the data; link: the connection failed); returns what
  // the log says.
  std::function<std::string(const Failure& e)> failed;
  // The size of the file it replaced, judged by `finish` right before its rename (receive()).
  uint64_t replaced = 0;
};

// After the ok response: receives `size` bytes (so.unsized: up to the end record) into r.fd,
// finishes, and sends the Result.
void receive(RequestContext& ctx, const Message& req, const std::string& shown, uint64_t size,
             const StreamOptions& so, Receiver& r, uint64_t resumed_from = 0) {
  const auto t0 = Clock::now();
  Message result;
  result.type = proto::MsgType::result;
  const bool ahead = req.flags & proto::kFlagAhead;
  bool complete = false;
  uint64_t length = 0;  // the end record's: the file's (or range's) size
  uint64_t got = 0;     // data bytes received so far: what a failure's log line says moved
  try {
    StreamOptions o = so;
    o.length = &length;
    // Pipelined: the file's own records are read to its end whatever happens to the file, so a
    // write error or a bad checksum fails this file alone and the next request follows.
    o.read_to_end = ahead;
    o.complete = &complete;
    o.keep_reserve = true;  // a put of unknown size, or puts that each fit alone (files::SpaceReserve)
    recv_stream(
        ctx.c, r.fd, size, [&got](uint64_t d) { got = d; }, o);
    if (r.finish) r.finish();
  } catch (const Failure& e) {
    // The other direction may still be intact (a MAC failure, say): tell the client why.
    result.status = e.status;
    result.text = e.what();
    std::string label = r.failed ? r.failed(e) : "failed";
    // A stream the client withdrew (it changed as the client read it) ended at its end record too.
    const bool goes_on = complete && ((ahead && e.origin == proto::Origin::local) || net::withdrawn(e));
    // Not after the link's own failure (this end stopped waiting for the client, or the connection
    // broke): a client that was only suspended would read a refusal naming its own address and end
    // the command; with the connection closed it meets a lost link, which --retries resumes (a
    // twenty-first re-attack, N3).
    try {
      if (e.origin != proto::Origin::link) answer(ctx, req, result);
    } catch (...) {
      if (goes_on) throw;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const uint64_t moved = got > so.offset ? got - so.offset : 0;
    // A put that failed (or was withdrawn) after a few bytes: within the key's budget until its
    // file's bytes are worth a line, so that 1-byte withdrawn puts cannot write 2.5 bytes of log per
    // byte sent (a thirty-eighth re-attack, A-F4). Its bytes count towards its file's next line, as
    // a resumed put that completes it later may make the file of them (N60-2).
    log_transfer(ctx, req, shown, {moved, 0, ctx.hashed_here},
                 transfer_details(ctx, req, moved, secs, resumed_from, ctx.hashed_here),
                 label + ": " + failure_text(ctx.stop_signal, e));
    if (goes_on) return;
    throw;
  }
  // An empty put (2,000 of them to /dev/null, a thirty-second re-attack, A-N2) moved nothing:
  // within the key's budget, as an empty get is. Judged alone, a put is worth the file it made (a
  // resumed put of 1 byte completed a 1 MB file whose pieces came in sessions within the budget,
  // N60-2). One that replaced more bytes than its file moved without a line, judged at its rename,
  // is always logged: 60 files emptied were named 9 times (a forty-sixth re-attack, B-F6), and a
  // put over a file filled after its request was logged nowhere (a fifty-ninth, J59-2). Not when
  // the bytes it replaced were this key's, within the budget: a 1-byte put and a 0-byte put over
  // it, repeated, wrote 1.52 bytes of log for each byte sent (a sixtieth re-attack, N60-3).
  // Logged once the file is in place, before the Result goes: a client that reset the connection
  // while a slow rename ran (over a 1 GB file) made the Result fail, and the put that replaced the
  // file was never logged (a fifty-first re-attack, B51-2).
  const uint64_t made = (req.flags & proto::kFlagRange) ? 0 : length;
  log_transfer(
      ctx, req, shown,
      {length - so.offset, made, ctx.hashed_here, r.replaced,
       (req.flags & proto::kFlagRange) ? std::nullopt : std::optional<uint64_t>(length)},
      transfer_details(ctx, req, length - so.offset, std::chrono::duration<double>(Clock::now() - t0).count(),
                       resumed_from, ctx.hashed_here),
      "ok");
  answer(ctx, req, result);
}

// ---- the one send path (get: plain, resumed, ranged) ------------------------------------------

void send(RequestContext& ctx, const Message& req, const std::string& shown, const Message& resp, int fd,
          uint64_t size, const StreamOptions& so) {
  answer(ctx, req, resp);
  const auto t0 = Clock::now();
  // What left for the client before a failure is logged as a put logs what arrived (a thirteenth
  // re-attack, H5: an interrupted get said bytes=0 after tens of MB).
  uint64_t upto = so.offset;
  const net::ProgressFn count = [&upto](uint64_t done) { upto = done; };
  // Within the key's budget when it moved less than its line takes, as a pipelined get's failed
  // Result is (a fifty-ninth re-attack, J59-4: gets the client failed were each logged, 1.3 times
  // the bytes it sent and read).
  auto failed = [&](const Failure& e) {
    const uint64_t moved = upto > so.offset ? upto - so.offset : 0;
    log_transfer(ctx, req, shown, {moved, 0, ctx.hashed_here},
                 transfer_details(ctx, req, moved, std::chrono::duration<double>(Clock::now() - t0).count(),
                                  so.offset, ctx.hashed_here),
                 "failed: " + failure_text(ctx.stop_signal, e));
  };
  if (req.flags & proto::kFlagAhead) {  // pipelined: the Result comes later, between requests
    if (ctx.awaiting.size() >= kMaxAwaitedResults)
      throw Failure("protocol error: more than " + std::to_string(kMaxAwaitedResults) +
                    " pipelined gets without a result");
    if (ctx.awaiting_bytes + shown.size() > kMaxAwaitedBytes)
      throw Failure("protocol error: more than " + std::to_string(kMaxAwaitedBytes >> 20) +
                    " MiB of paths of pipelined gets without a result");
    try {
      send_stream(ctx.c, fd, size, count, so);
    } catch (const Failure& e) {
      // Withdrawn: the client's Result for it comes later, as for any pipelined get, and its line
      // is written then (take_result).
      if (!net::withdrawn(e)) {
        failed(e);
        throw;
      }
    }
    // What its line needs, not the request's path, text and digest again (a thirty-second
    // re-attack, A-N6: 4,096 gets of 4 KB paths held 32 MB a session).
    Message slim;
    slim.op = req.op;
    slim.flags = req.flags;
    slim.tag = req.tag;
    slim.tagged = req.tagged;
    slim.part = req.part;
    slim.nparts = req.nparts;
    ctx.awaiting.push_back({std::move(slim), shown, size, t0, so.offset, ctx.hashed_here});
    ctx.awaiting_bytes += shown.size();
    return;
  }
  try {
    send_file_await_result(ctx.c, fd, size, so, count);
  } catch (const Failure& e) {
    failed(e);
    if (net::withdrawn(e) && e.origin == proto::Origin::local) return;  // the session goes on
    throw;
  }
  log_transfer(
      ctx, req, shown, {size - so.offset, 0, ctx.hashed_here},
      transfer_details(ctx, req, size - so.offset, std::chrono::duration<double>(Clock::now() - t0).count(),
                       so.offset, ctx.hashed_here),
      "ok");
}

std::string parent_shown(const std::string& shown) {
  auto slash = shown.rfind('/');
  return slash == std::string::npos ? "." : shown.substr(0, slash);
}

// The refusal of a put or mkdir whose directory is not the one this session's mkdir answered for
// at its path `dir` (server/dir_pins.h).
Refusal moved_dir(const std::string& dir) {
  return {Status::permission, dir +
                                  ": no longer the directory this session made or found there (it was "
                                  "moved or replaced meanwhile); nothing is written into it"};
}

// A put with the resume flag: into the kept partial file (adopted only when partial_distrust
// allows), from the client's offset; kept when the connection breaks.
std::optional<files::PrefixScan> session_digest(RequestContext& ctx, const Message& req,
                                                const std::string& shown, int fd, const struct stat& st,
                                                uint64_t len, bool need_sum);
std::string over_budget(const RequestContext& ctx, uint64_t len);

// Returns false, having sent nothing, when a partial file that may not be adopted (another user's,
// linked, writable by others, not a file) is in the way of a put from byte 0: that put then runs
// as a plain one, into a temporary file, and keeps nothing if it breaks. The file is left as it is
// and does not block the transfer (a fourteenth re-attack, H6: another local user's planted
// partial file refused every --resume and every retry of that name for good).
void put_kept(RequestContext& ctx, const Message& req, const Place& dest, const std::string& shown,
              KeptPartial& partial);

bool put_resumed(RequestContext& ctx, const Message& req, const Place& dest, const std::string& shown) {
  std::unique_ptr<KeptPartial> pf;
  try {
    pf = std::make_unique<KeptPartial>(dest);
  } catch (const Failure& f) {
    if (!f.err && f.status == Status::permission && req.offset == 0) {
      log_quiet(ctx, req, shown, std::string(f.what()) + "; received from the start instead");
      return false;
    }
    refuse(ctx, req, shown,
           f.err ? refusal_for(req.path, f.err) : Refusal{f.status, shown + ": " + f.what()});
    return true;
  }
  put_kept(ctx, req, dest, shown, *pf);
  return true;
}

// A put with the resume flag into its adopted partial file, from the client's offset.
void put_kept(RequestContext& ctx, const Message& req, const Place& dest, const std::string& shown,
              KeptPartial& partial) {
  const bool preserve = req.flags & proto::kFlagPreserve;
  Receiver r;
  KeptPartial* pf = &partial;
  if (req.offset > pf->length() || req.offset > req.size)
    return refuse(ctx, req, shown,
                  {Status::integrity, req.path + ": resume point beyond the kept partial file"});
  // The probe of this session read the prefix: its checksum state spares a second read.
  struct stat st {};
  std::optional<files::PrefixScan> probed;
  if (req.offset == pf->length() && ::fstat(pf->fd(), &st) == 0)
    probed = ctx.digests.remembered(st, req.offset);
  // Without that state (no probe, or its state gave way) the prefix is read here, charged to the
  // same budget as probes; past it the resume is refused rather than read for free.
  if (!probed && req.offset > 0) {
    try {
      if (::fstat(pf->fd(), &st) == 0)
        probed = session_digest(ctx, req, shown, pf->fd(), st, req.offset, true);
    } catch (const Failure&) {  // shrank meanwhile: the stream finds out
    }
    if (!probed)
      return refuse(ctx, req, shown,
                    {Status::busy, req.path + ": not resumed: " + over_budget(ctx, req.offset) +
                                       (req.offset > ctx.limits.max_probe_hash ? ""
                                        : ctx.digests.key_spent()              ? "; send it again later"
                                                                  : "; send it again in a new session")});
  }
  try {
    pf->truncate_to(req.offset);
  } catch (const Failure& f) {
    return refuse(ctx, req, shown, refusal_for(req.path, f.err));
  }
  // The prefix's scan, kept under the file's state after each cut back to the offset (here, and
  // after a withdrawn stream): the next resumed put at that offset in this session reads nothing.
  std::optional<files::PrefixScan> at_offset = probed;
  auto remember_cut = [&] {
    if (struct stat now{}; at_offset && ::fstat(pf->fd(), &now) == 0)
      ctx.digests.remember(now, req.offset, *at_offset);
  };
  remember_cut();
  Message ok = response(Status::ok);
  ok.size = req.offset;
  // Where what arrives is kept, for the client's word after an interrupt (docs/PROTOCOL.md 3.6).
  const std::string dir = parent_shown(shown);
  ok.text = (dir == "." ? "" : dir + "/") + files::partial_name(dest.name);
  ctx.c.send_message(ok);
  r.fd = pf->fd();
  // A partial file that holds the whole file replaces the destination with no byte sent: logged
  // as an empty put over a file is (a fiftieth re-attack, B50-2: no line named the file).
  r.finish = [&] {
    r.replaced = content_size(dest.dir.get(), dest.name);
    pf->commit(stored_mode(req.mode, preserve), effective_mtime(req.mtime, preserve));
  };
  // Known bad data: start over next time. A lost connection keeps the partial file; a stream the
  // client withdrew keeps what was there before it (the next probe judges that prefix).
  r.failed = [&](const Failure& e) {
    if (net::withdrawn(e)) {
      try {
        pf->truncate_to(req.offset);
        remember_cut();
        return std::string("failed (partial file kept as it was)");
      } catch (const Failure&) {
      }
    } else if (e.origin != proto::Origin::local || e.status != Status::integrity) {
      return std::string("failed (partial file kept)");
    }
    pf->discard();
    return std::string("failed");
  };
  StreamOptions so{req.offset, false};
  if (probed) so.prefix_hash = &probed->sum;
  return receive(ctx, req, shown, req.size, so, r, req.offset);
}

// ---- put --------------------------------------------------------------------------------------

// Why a put of req.size bytes to NAME in dirfd cannot fit, or "": for a part of a ranged put (whose
// parts share the file's bytes) and a put of unknown size (size 0) only the reserve its file would
// go into is judged. A resumed put's partial file of
// this server's own is cut to the put's offset before the data, so what it holds past the offset
// counts as free; any other put leaves it until its own file is in place, and the refusal names
// it (a thirty-fourth re-attack, B-N5: a stale partial file took the space, and the line said
// nothing of it).
std::string room_refusal(int dirfd, const std::string& name, const std::string& shown, const Message& req,
                         bool resume) {
  uint64_t need =
      req.flags & proto::kFlagRange ? 0 : req.size - std::min(req.size, resume ? req.offset : uint64_t(0));
  struct stat pst {};
  const std::string pname = files::partial_name(name);
  const uint64_t kept = ::fstatat(dirfd, pname.c_str(), &pst, AT_SYMLINK_NOFOLLOW) == 0 &&
                                S_ISREG(pst.st_mode) && files::partial_distrust(pst).empty()
                            ? uint64_t(pst.st_size)
                            : 0;
  if (resume && kept > req.offset) need -= std::min(need, kept - req.offset);
  const std::string short_by = files::space_shortfall(dirfd, need, true);
  if (short_by.empty()) return "";
  const std::string dir = parent_shown(shown);
  return shown + ": no space left on device on the server (" + short_by +
         (resume || !kept ? ""
                          : "; " + (dir == "." ? "" : dir + "/") + pname +
                                ", kept for send --resume, holds " + files::size_text(kept)) +
         ")";
}

// Sweeps the directory a put or probe lands in (server/sweep.h): its line, one per sweep, names
// the client whose request made it and is within that key's budget.
void sweep_for(RequestContext& ctx, const Place& dest) {
  ctx.sweeper.maybe_sweep(dest.dir.get(), parent_shown(dest.shown), [&ctx](const std::string& line) {
    if (const auto more = ctx.quiet_lines->take()) ctx.log("peer=" + ctx.c.peer() + " " + line + *more);
  });
}

void handle_put(RequestContext& ctx, const Message& req) {
  const bool ranged = req.flags & proto::kFlagRange;
  const bool resume = (req.flags & proto::kFlagResume) && !ranged;
  const bool preserve = req.flags & proto::kFlagPreserve;
  std::optional<Place> dest;
  if (req.path != "/dev/null") {
    Refusal why;
    dest = ctx.root.put_target(req.path, req.text, why, ctx.walk_names.get());
    if (!dest) return refuse_target(ctx, req, why);
    if (const std::string in = parent_shown(dest->shown); !ctx.pins.holds(in, dest->dir.get()))
      return refuse(ctx, req, dest->shown, moved_dir(in));
    sweep_for(ctx, *dest);
  }
  const std::string shown = dest ? dest->shown : req.path;
  // A file that cannot fit is refused before its data, as a get's client does (a thirty-third
  // re-attack, B-N4: the put filled the server's file system, its other services' too, and failed
  // at the end of a whole upload). A resumed put needs what is past its offset. Every put is
  // judged, parts of ranged puts and puts of unknown size (send -) for the reserve their file goes
  // into (a forty-fourth re-attack, A-F1: empty ones with long names took a file system past its
  // reserve to 0 bytes free, where sized empty puts stopped at it); their data keeps the reserve
  // as it is written.
  if (dest)
    if (std::string why = room_refusal(dest->dir.get(), dest->name, shown, req, resume); !why.empty())
      return refuse(ctx, req, shown, {Status::no_space, std::move(why)});
  if (dest)  // every put makes a file (its temporary or partial one), empty ones too
    if (const std::string why = files::inodes_short(dest->dir.get()); !why.empty())
      return refuse(ctx, req, shown,
                    {Status::no_space, shown + ": no space left on device on the server (" + why + ")"});
  Receiver r;

  if (ranged) {
    Refusal why;
    auto t = ctx.parts.join(ctx.keys.client_key, req, dest ? &*dest : nullptr, why);
    if (!t) return refuse(ctx, req, shown, why);
    if (ctx.held.size() >= proto::kMaxParts)
      ctx.held.erase(ctx.held.begin());  // oldest uncommitted gives way
    ctx.held.push_back(t);
    ctx.c.send_message(response(Status::ok));
    r.fd = t->fd();
    r.finish = [&] { t->part_finished(req.part, true); };
    r.failed = [&](const Failure&) {
      t->part_finished(req.part, false);
      return std::string("failed");
    };
    return receive(ctx, req, shown, req.length, StreamOptions{0, false, true, req.offset}, r);
  }

  if (resume && dest && put_resumed(ctx, req, *dest, shown)) return;

  std::unique_ptr<TempFile> out;
  if (dest) {
    try {
      out = std::make_unique<TempFile>(*dest);
    } catch (const Failure& f) {
      return refuse(ctx, req, shown, refusal_for(req.path, f.err));
    }
    r.fd = out->fd();
    r.finish = [&] {
      r.replaced = content_size(dest->dir.get(), dest->name);
      out->commit(stored_mode(req.mode, preserve), effective_mtime(req.mtime, preserve));
    };
    r.failed = [&](const Failure&) {
      out->discard();
      return std::string("failed");
    };
  }
  answer(ctx, req, response(Status::ok));
  StreamOptions so;
  so.unsized = req.flags & proto::kFlagUnsized;  // send -: the size comes in the end record
  receive(ctx, req, shown, req.size, so, r);
}

// The keyed digest of fd's first len bytes for a probe or a resumed get, remembered for the
// session; nullopt once the session's hashing budget is spent (logged once per session).
std::optional<files::PrefixScan> session_digest(RequestContext& ctx, const Message& req,
                                                const std::string& shown, int fd, const struct stat& st,
                                                uint64_t len, bool need_sum) {
  const uint64_t before = ctx.digests.bytes_hashed();
  auto d = ctx.digests.get(ctx.keys, fd, st, len, need_sum);
  ctx.hashed_here += ctx.digests.bytes_hashed() - before;
  if (!d && !ctx.told_budget) {
    ctx.told_budget = true;
    log_outcome(ctx, req, shown, "",
                "not hashed: " + over_budget(ctx, len) + "; answered as if nothing were kept");
  }
  return d;
}

// Why a prefix of len bytes was not hashed: the session's budget spent, or (an eighteenth
// re-attack, N10: "spent" with nothing hashed) the prefix larger than the whole budget.
std::string over_budget(const RequestContext& ctx, uint64_t len) {
  if (ctx.digests.key_spent())
    return "the client key's probe hashing allowance (" + std::to_string(ctx.limits.max_probe_hash >> 20) +
           " MiB at once, then as much every " + std::to_string(kProbeHashRefillSeconds / 60) +
           " minutes, serve --max-probe-hash) is spent";
  const std::string budget = "the session's probe hashing budget (" +
                             std::to_string(ctx.limits.max_probe_hash >> 20) +
                             " MiB, serve --max-probe-hash)";
  if (len > ctx.limits.max_probe_hash)
    return "its " + std::to_string(len >> 20) + " MiB prefix is more than " + budget;
  return budget + " is spent";
}

// ---- get --------------------------------------------------------------------------------------

// Names the version of a file that a ranged get reads (PROTOCOL.md 3.9, the Response's text): the
// same for every part read from the file as it was, another once it was replaced or written
// (files::FileVersion), hashed with a salt of this process's so that it
// says nothing else. The client compares its parts' (a thirty-second re-attack, B-N1: a file
// renamed over the source during recv --streams 4 arrived as a splice of both, "verified").
std::string file_version(const struct stat& st) {
  static const std::array<uint8_t, 16> salt = [] {
    std::array<uint8_t, 16> s{};
    if (::getrandom(s.data(), s.size(), 0) != ssize_t(s.size())) s.fill(0);  // still a version
    return s;
  }();
  const files::FileVersion v = files::FileVersion::of(st);
  const uint64_t f[] = {v.dev, v.ino, v.size, uint64_t(v.mtime_ns), uint64_t(v.ctime_ns)};
  crypto::Sha256 h;
  h.update(salt.data(), salt.size());
  h.update(f, sizeof f);
  uint8_t d[crypto::Sha256::kDigestLen];
  h.final(d);
  return crypto::to_hex(d, 16);
}

void handle_get(RequestContext& ctx, const Message& req) {
  const bool ranged = req.flags & proto::kFlagRange;
  const bool resume = (req.flags & proto::kFlagResume) && !ranged;
  Message resp = response(Status::ok);
  if (req.path == "/dev/zero") {  // zeros of the requested size
    resp.size = req.size;
    if (ranged)
      return send(ctx, req, req.path, resp, -1, req.length, StreamOptions{0, false, true, req.offset});
    return send(ctx, req, req.path, resp, -1, req.size, StreamOptions{});
  }
  Refusal why;
  auto src = ctx.root.open_source(req.path, why);
  if (!src) return refuse(ctx, req, req.path, why);
  const int fd = src->fd.get();
  resp.size = uint64_t(src->st.st_size);
  resp.mode = src->st.st_mode & 07777;
  resp.mtime = src->st.st_mtim.tv_sec;
  if (ranged) {  // one range of the file as it is now
    if (resp.size != req.size)
      return refuse(ctx, req, src->shown,
                    {Status::integrity, req.path + ": file changed size during the transfer"});
    resp.text = file_version(src->st);
    ::posix_fadvise(fd, off_t(req.offset), off_t(req.length), POSIX_FADV_SEQUENTIAL);
    StreamOptions part{0, false, true, req.offset};
    part.since = &src->st;
    return send(ctx, req, src->shown, resp, fd, req.length, part);
  }
  StreamOptions so{0, false};
  so.since = &src->st;  // as opened: before its prefix was hashed (withdrawn if it changed since)
  std::optional<files::PrefixScan> mine;
  // Resume only where the client's prefix hashes like ours (and the session's hashing budget
  // allows); otherwise from 0. The checksum starts from the scan's state: no second read.
  if (resume && req.offset > 0 && req.offset <= resp.size && req.digest.size() == proto::kPrefixMacLen) {
    try {
      mine = session_digest(ctx, req, src->shown, fd, src->st, req.offset, true);
      if (mine && crypto::ct_equal(mine->mac.data(), req.digest.data(), proto::kPrefixMacLen)) {
        so.offset = req.offset;
        so.prefix_hash = &mine->sum;
        resp.digest = mine->mac;
      }
    } catch (const Failure&) {  // shrank meanwhile: from 0
    }
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  send(ctx, req, src->shown, resp, fd, resp.size, so);
}

// ---- stat, probe, commit ----------------------------------------------------------------------

void store_le64(uint8_t* p, uint64_t v) {
  crypto::store_le32(p, uint32_t(v));
  crypto::store_le32(p + 4, uint32_t(v >> 32));
}

// The identity of the directory `m` was read from that a mkdir's or a stat's answer carries
// (docs/PROTOCOL.md 3.5): a keyed hash of its device, inode and birth time, so that a directory
// removed and made again under the same name (even on the same inode) is another, and nothing of
// the server's file system is told. Where the file system keeps no birth time (ext2/3, ext4 with
// 128-byte inodes), the inode's generation number (FS_IOC_GETVERSION) and its owner tell a reused
// inode instead: without it a retry wrote into a directory made again, over its user's file (a
// fifty-eighth re-attack, I58-2). "" without a key, or with neither.
std::string dir_identity(const RequestContext& ctx, const DirMark& m) {
  if (!ctx.dir_id_key || !m.read || !m.is_dir) return "";
  uint8_t msg[36] = {};
  store_le64(msg, m.dev);
  store_le64(msg + 8, m.ino);
  if (m.has_btime) {
    store_le64(msg + 16, uint64_t(m.btime_sec));
    crypto::store_le32(msg + 24, m.btime_nsec);
  } else {
    if (m.generation == 0) return "";
    // With the owner: the owner may set the generation (FS_IOC_SETVERSION, where the file system
    // has no metadata checksums), and another user's directory made again with the copy's inode
    // and generation was continued (a fifty-ninth re-attack, K59-3); its owner cannot be set.
    store_le64(msg + 16, m.uid);
    crypto::store_le32(msg + 28, m.generation);
    crypto::store_le32(msg + 32, 1);  // never a birth time's message, whose last 8 bytes are zero
  }
  std::string id(32, '\0');
  crypto::HmacSha256(ctx.dir_id_key->data(), 32).mac(msg, sizeof msg, reinterpret_cast<uint8_t*>(id.data()));
  return id;
}

void handle_stat(RequestContext& ctx, const Message& req) {
  Message m = response(Status::ok);
  if (req.path == "/dev/zero") {
    m.size = req.size;
  } else {
    Refusal why;
    UniqueFd dir;
    auto src = ctx.root.open_source(req.path, why, &dir);
    if (!src && why.status == Status::is_directory) {
      // The answer a send of several files asks for (is DEST a directory?), not a refusal (a
      // thirty-sixth re-attack, B7: every such send logged 'result="refused: tree: is a directory"').
      // With the directory's identity (3.5), which send -r --resume compares with its record, of
      // the directory open_source opened: a second walk of the path cost a deep stat 1.65 times
      // as much (a fifty-eighth re-attack, F58-2).
      Message d = response(why.status, why.text);
      if (dir) d.digest = dir_identity(ctx, DirMark::of(dir.get()));
      answer(ctx, req, d);
      log_quiet(ctx, req, req.path, "a directory");
      return;
    }
    if (!src) return refuse(ctx, req, req.path, why);
    m.size = uint64_t(src->st.st_size);
    m.mode = src->st.st_mode & 07777;
    m.mtime = src->st.st_mtim.tv_sec;
    log_quiet(ctx, req, src->shown, "ok", " size=" + std::to_string(m.size));  // within the key's budget
  }
  answer(ctx, req, m);
}

void handle_probe(RequestContext& ctx, const Message& req) {
  Message m = response(Status::ok);
  if (req.path != "/dev/null") {
    Refusal why;
    auto dest = ctx.root.put_target(req.path, req.text, why, ctx.walk_names.get());
    if (!dest) return refuse_target(ctx, req, why);
    sweep_for(ctx, *dest);
    std::string distrust;
    UniqueFd fd = open_kept_partial(*dest, distrust);
    // A partial file that may not be used is passed over (3.6), said in the text, logged; the
    // destination is still judged: one whole and this server's own is up to date all the same (a
    // thirty-third re-attack, B-N7: another user's planted partial file had an identical file
    // sent whole on every run).
    if (!distrust.empty()) log_quiet(ctx, req, dest->shown, distrust);
    struct stat sb {};
    bool whole = false;
    if (!fd) {  // no partial file: the destination itself, when it has the probed size
      // and is this server's own (another user's planted copy, or a second name of some file,
      // is replaced whole, never "up to date": an eighth re-attack, F1), as the client's rule.
      fd.reset(::openat(dest->dir.get(), dest->name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      whole = fd && ::fstat(fd.get(), &sb) == 0 && S_ISREG(sb.st_mode) && uint64_t(sb.st_size) == req.size &&
              files::ownership_problem(sb, 0).empty();
      if (!whole) fd.reset();
    }
    if (!distrust.empty() && !whole) {  // nothing kept that may be used: the put runs from the start
      m.text = distrust;
      return answer(ctx, req, m);
    }
    if (fd && ::fstat(fd.get(), &sb) == 0) {
      m.size = uint64_t(sb.st_size);
      try {
        auto digest = session_digest(ctx, req, dest->shown, fd.get(), sb, m.size, false);
        if (!digest) throw Failure("over the budget");  // answered as if nothing were kept
        m.digest = digest->mac;
        if (whole) m.text = proto::kProbeComplete;
      } catch (const Failure&) {  // shrank meanwhile, or over the budget
        m.size = 0;
        m.digest.clear();
      }
    }
    // Logged with what it hashed (a fifty-fourth re-attack, B54-1: a probe that hashed a whole 300
    // MiB file wrote no line): within the key's budget like every request that moves no data,
    // always when it hashed a MiB or more (A55-1).
    log_transfer(ctx, req, dest->shown, {0, 0, ctx.hashed_here},
                 " size=" + std::to_string(m.size) + " hashed=" + std::to_string(ctx.hashed_here),
                 m.digest.empty() ? "nothing kept"
                 : whole          ? "complete"
                                  : "partial file kept");
  }
  answer(ctx, req, m);
}

void handle_commit(RequestContext& ctx, const Message& req) {
  auto it =
      std::find_if(ctx.held.begin(), ctx.held.end(), [&](const auto& t) { return t->id == req.xfer_id; });
  if (it == ctx.held.end())
    return refuse(ctx, req, req.path, {Status::refused, req.path + ": no such transfer on this connection"});
  std::shared_ptr<PartsTransfer> t = *it;
  ctx.held.erase(it);
  // Named as the transfer's file, whatever path the commit carries (an eighteenth re-attack, N10).
  const uint64_t replaced = t->out ? t->out->replaced_size() : 0;  // right before its rename
  auto refused = PartsRegistry::commit(*t, t->shown, ctx.c.timeout());
  // The bytes its verified parts brought, not the size the transfer declared: a refused commit of
  // a declared 32 GiB with one empty part was logged "bytes=34359738368", outside the key's
  // budget, 200 lines in 0.09 s (a fiftieth re-attack, B50-4).
  const uint64_t arrived = t->arrived();
  std::ostringstream os;
  os << " bytes=" << arrived << " size=" << t->size << " parts=" << t->nparts
     << " cipher=" << ctx.keys.cipher->name << " mac=" << crypto::mac_label(ctx.keys.cipher, ctx.keys.mac);
  if (refused) {  // its parts' lines counted what they moved
    log_transfer(ctx, req, t->shown, {0, arrived, 0}, os.str(), "failed: " + refused->text);
    return ctx.c.send_message(response(refused->status, refused->text));
  }
  double secs = std::chrono::duration<double>(Clock::now() - t->started).count();
  os << " MB/s=" << std::fixed << std::setprecision(1) << (secs > 0 ? double(t->size) / secs / 1e6 : 0.0);
  // Worth the file it made and the one it replaced, as a put (receive()): an empty one within the
  // budget, unless it emptied a file that held something (B50-2); logged before the answer, which
  // a reset connection makes fail (B51-2).
  log_transfer(ctx, req, t->shown, {0, t->size, 0, replaced, t->size}, os.str(), "ok");
  ctx.c.send_message(response(Status::ok));
}

// ---- mkdir ------------------------------------------------------------------------------------

// mkdir's directory, made when it is not there, then opened once: every check that follows is of
// this descriptor, never of the name again (a fifty-ninth re-attack, K59-1: the owner was checked
// by name and the directory opened after, and another user's taken for the one made). An invalid
// descriptor after a refusal was answered; *made says this request made it.
UniqueFd make_directory(RequestContext& ctx, const Message& req, const Place& target, bool exists,
                        bool* made) {
  *made = false;
  timespec made_at{};
  if (!exists) {
    // A directory takes an inode and a block: both kept out of the reserve, as a put's bytes are
    // (a thirty-seventh re-attack, A2: 6,000 pipelined mkdirs took the file system to 0 bytes free).
    std::string full = files::inodes_short(target.dir.get());
    if (struct stat ds{}; full.empty() && ::fstat(target.dir.get(), &ds) == 0)
      full = files::SpaceReserve(target.dir.get()).take(uint64_t(std::max<blksize_t>(ds.st_blksize, 4096)));
    if (!full.empty()) {
      refuse(ctx, req, target.shown,
             {Status::no_space, target.shown + ": no space left on device on the server (" + full + ")"});
      return UniqueFd();
    }
    // Owner rwx while the tree is being filled; -p applies the source's mode afterwards (a second
    // mkdir of the same directory with the preserve flag), still with owner rwx.
    ::clock_gettime(CLOCK_REALTIME, &made_at);
    *made = ::mkdirat(target.dir.get(), target.name.c_str(), (req.mode | 0700) & 0777) == 0;
    if (!*made && errno != EEXIST) {
      refuse(ctx, req, target.shown, refusal_for(req.path, errno));
      return UniqueFd();
    }
  }
  UniqueFd d(target.name.empty() ? ::fcntl(target.dir.get(), F_DUPFD_CLOEXEC, 0)
                                 : ::openat(target.dir.get(), target.name.c_str(),
                                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!d || ::fstat(d.get(), &st) != 0) {
    refuse(ctx, req, target.shown, refusal_for(req.path, errno));
    return UniqueFd();
  }
  // Another directory renamed into its place as it was made is not taken for it: another user's,
  // or one of the server's user's own that holds something or was born before the mkdir (a
  // sixtieth re-attack, M60-2: another member of a shared directory's group exchanged the new
  // directory for the server user's private 0700 one, which `send -r -p` then filled and opened
  // to 0775).
  // Its path and all below it hold no directory for the rest of the session, so that nothing is
  // written there either: unpinned, the rest of a tree went into the other user's directory (a
  // sixty-first re-attack, Q61-3).
  if (*made && (st.st_uid != ::geteuid() || !freshly_made_dir(d.get(), made_at))) {
    ctx.pins.refuse_below(target.shown);
    refuse(
        ctx, req, target.shown,
        {Status::permission,
         target.shown +
             ": not the empty directory its mkdir made (another was put in its place, or written into, as it "
             "was made); nothing is written into it"});
    return UniqueFd();
  }
  return d;
}

// mkdir with the preserve flag of a directory that was there: its mode and time, if this session
// (or, still the server user's own, an earlier session of the key: a retry's) made it.
void preserve_made(RequestContext& ctx, const Message& req, const Place& target, int fd,
                   const DirMark& mark) {
  // Only a directory this session made: one that was there keeps its own mode and time (a
  // seventeenth re-attack, M1: send -r -p opened a private 0700 directory, or another user's,
  // to 0777). The server's user keeps rwx on what it serves (protocol 5): a directory sent as
  // 0000 or 0500 would otherwise be one the server can neither list, fill nor serve again.
  // The very directory made at this path (MadeDirs): not one renamed here, nor an inode given again.
  if (!target.name.empty() && ctx.key_made_dirs->has(target.shown, mark))
    apply_mode_mtime(fd, req.mode | 0700, req.mtime);
}

// Why a directory a mkdir reached is not this tree's, or "". One this session has pinned at
// another path was moved there (U62-2). One found in a directory this key made, which was empty
// when made, that the key did not make there, another user put there (a sixty-second re-attack,
// U62-1: in the group-writable directory the session had just made, another member made the
// private subdirectory's name first, and the tree's private files went into theirs).
std::string not_this_trees(RequestContext& ctx, const Place& target, bool made, const DirMark& mark) {
  if (ctx.pins.pinned_elsewhere(target.shown, mark))
    return "the directory this session has at another path (moved here meanwhile); nothing is written into "
           "it";
  if (made || target.name.empty() || ctx.key_made_dirs->has(target.shown, mark)) return "";
  if (!ctx.key_made_dirs->has(parent_shown(target.shown), DirMark::of(target.dir.get()))) return "";
  return "made by another in the directory this client made (it was not there when that was made); "
         "nothing is written into it";
}

void handle_mkdir(RequestContext& ctx, const Message& req) {
  Refusal why;
  bool exists = false;
  auto target = ctx.root.mkdir_target(req.path, req.text, &exists, why, ctx.walk_names.get());
  if (!target) return refuse(ctx, req, req.path, why);
  if (const std::string in = parent_shown(target->shown);
      !target->name.empty() && !ctx.pins.holds(in, target->dir.get()))
    return refuse(ctx, req, target->shown, moved_dir(in));
  bool made = false;
  const UniqueFd dir = make_directory(ctx, req, *target, exists, &made);
  if (!dir) return;
  // Not into a directory another user planted in a sticky directory others can write to, who could
  // read, rename or replace what it receives (a thirty-seventh re-attack, A1: send -r -p of a
  // private tree went into nobody's 0777 directory, logged "ok (it was there)").
  if (const std::string who = files::planted_dir_at(target->dir.get(), target->name); !who.empty())
    return refuse(ctx, req, target->shown,
                  {Status::permission, target->shown + ": " + who + ": a tree is not written into it"});
  // This very directory takes what goes in at its path for the rest of the session: read once, for
  // the pins and the identity.
  const DirMark mark = DirMark::of(dir.get());
  if (!mark.read) return refuse(ctx, req, target->shown, refusal_for(req.path, errno));
  if (!made && !ctx.pins.holds(target->shown, mark))
    return refuse(ctx, req, target->shown, moved_dir(target->shown));
  if (const std::string other = not_this_trees(ctx, *target, made, mark); !other.empty()) {
    ctx.pins.refuse_below(target->shown);  // nothing goes below it either (Q61-3)
    return refuse(ctx, req, target->shown, {Status::permission, target->shown + ": " + other});
  }
  if (!made && (req.flags & proto::kFlagPreserve)) {
    if (ctx.root.holds_hidden(target->shown))
      return refuse(ctx, req, target->shown,
                    {Status::permission, target->shown +
                                             ": keeps its mode and times (it holds the server's own keys or "
                                             "authorized_keys)"});
    preserve_made(ctx, req, *target, dir.get(), mark);
  }
  if (made) ctx.key_made_dirs->add(target->shown, mark);
  ctx.pins.pin(target->shown, mark);
  Message ok = response(Status::ok, target->shown);
  if (!target->name.empty()) ok.digest = dir_identity(ctx, mark);  // the root has none (3.5)
  answer(ctx, req, ok);
  // Within the key's budget, as an empty put's line (a thirty-seventh re-attack, A3: 5,000
  // pipelined mkdirs wrote 5,001 lines, 2.5 bytes of log for each byte sent).
  log_quiet(ctx, req, target->shown, made ? "ok" : "ok (it was there)");
}

// ---- list (recv -r) ---------------------------------------------------------------------------

// Walks the directory open as `top` depth first, names sorted, parents before their contents.
// Every directory is opened component by component below `top` with O_NOFOLLOW (files::DirChain,
// which keeps a bounded number of ancestors open), so neither a symlink in the tree nor one
// swapped in during the walk leads anywhere; symlinks and special files are listed as such (never
// followed), a directory below the top that cannot be read as unreadable_dir (its contents not),
// names with CR or LF are left out (no path on the wire may hold them) and counted in a left_out
// entry, and the server's own $AESXFER_HOME and temporary and partial files are left out
// silently. Throws Failure (with the
// refusal's status) past the limits.
[[noreturn]] void fail(const Refusal& r) { throw Failure(r.text, r.status); }

// The memory every listing of a server holds until its pages are sent (a client that does not
// read keeps it until the idle timeout): at most RequestLimits::max_list_memory in all
// (RequestContext::listings, server/listing_memory.h), charged as the walk goes: each entry (kEntryCost and
// its path) until the lister goes, and each name read from a directory (kItemCost and the name) while that
// directory's names are held, as readdir returns it, so that a directory too large for the bound is
// refused before it has been read whole. A listing that would pass the bound is refused as busy,
// and the others go on. Without it, 64 sessions listing 200,000 entries each held several GB (a
// third re-attack, N10); charging the entries alone left the names read before them free, 90 MB
// per listing of 200,000 long names (a fifth re-attack, F1).
// An entry's cost besides its path: its ListEntry twice (a vector grows by doubling) and the
// path's heap block. The third re-attack measured about 0.7 KB per entry of a 250-byte name.
constexpr uint64_t kEntryCost = 2 * sizeof(proto::ListEntry) + 32;

// What one directory of a listing costs the key's name budget beyond its name (TreeLister::walk).
// A directory opened, read and closed costs the server about five names' worth (12-16 us against
// 3 us for a file's name), so that a tree of empty directories buys no more CPU than one of files
// (a forty-eighth re-attack, A48-2: 20 pipelined listings of 199,990 empty directories cost 19.5 s
// of CPU, 2.9 s for as many files). With its name and the open the chain makes of it (open_at,
// which charges every open it makes), a directory costs 8 names in all.
constexpr uint64_t kDirectoryNames = 6;

class TreeLister {
 public:
  TreeLister(const RequestContext& ctx, int top, const std::string& shown)
      : root_(ctx.root),
        charge_(ctx.listings, ctx.limits.max_list_memory),
        chain_(top, [this](int at, const std::string& name,
                           const std::string& rel) { return open_at(at, name, rel); }),
        shown_(shown),
        max_entries_(std::min(ctx.limits.max_list_entries, proto::kMaxListEntries)),
        names_(ctx.listing_names.get()) {}
  TreeLister(const TreeLister&) = delete;
  // Frees what the listing holds and gives its charge back, before a refusal is sent: the client
  // may ask again the moment it reads it (RecvTree.ListingsTogetherAreBoundedInMemory was refused
  // its next, small listing under load while this session had yet to return the charge).
  void drop() noexcept {
    std::vector<proto::ListEntry>().swap(entries);
    charge_.release(~uint64_t(0));
  }
  // The walk is over: the listing holds its charge until it goes and makes no other wait.
  void walked() noexcept { charge_.walked(); }
  std::vector<proto::ListEntry> entries;
  uint64_t unlisted = 0;  // names with CR/LF

  // What walk() made of a directory: listed, or (never the top) nothing of it listed because it
  // cannot be read (its entry becomes unreadable_dir) or went since its parent was read.
  enum class Walked { listed, unreadable, gone };
  // Lists directory rel ("" the top) and everything below it.
  // `hidden`: what the root hides of rel's names (Root::hidden_in, then HiddenIn::child).
  Walked walk(const std::string& rel, const Root::HiddenIn& hidden) {
    std::vector<Item> items;
    uint64_t items_cost = 0;
    uint64_t left_out = 0;  // names with CR/LF here, or whose path would pass kMaxPath
    // The length of the directory's path from the root (the listed directory's, then rel) with its
    // '/': an entry's is dir_len + its name's.
    const size_t dir_len = (shown_ == "." ? 0 : shown_.size() + 1) + (rel.empty() ? 0 : rel.size() + 1);
    if (names_) names_->charge(kDirectoryNames);  // opened, read and closed
    try {
      // A description of its own to read (the chain's fd stays at offset 0 for openat).
      UniqueFd fd(::openat(chain_.open(rel), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!fd) fail_errno(rel, errno);
      DIR* d = ::fdopendir(fd.get());
      if (!d) fail_errno(rel, errno);
      fd.release();  // the DIR owns it now
      struct Closer {
        DIR* d;
        ~Closer() { ::closedir(d); }
      } closer{d};
      while (dirent* de = ::readdir(d)) {
        std::string name = de->d_name;
        if (name == "." || name == "..") continue;
        // Every name read counts, listed or left out (hidden, reserved shapes, CR or LF, too
        // long): 300,000 empty partial files, kept by withdrawn resumed puts, made each one-entry
        // listing under --max-list 1000 cost 0.58 s of CPU (a forty-first re-attack, A-F3).
        // Twice --max-list: the left-out names may be as many as the listed ones.
        // In steps of up to 1024 from the key's budget, which several walks in a row spend.
        if (names_read_ % name_step_ == 0 && names_ && !names_->take(name_step_))
          fail({Status::busy,
                "server busy: this key's listings have had the server read their most "
                "names lately (serve --max-list); try again in a minute"});
        if (++names_read_ > 2 * max_entries_)
          fail({Status::refused, shown_ + ": more than " + std::to_string(2 * max_entries_) +
                                     " names to read (twice the server's limit, serve --max-list)"});
        Item it{name, {}};
        if (::fstatat(::dirfd(d), de->d_name, &it.st, AT_SYMLINK_NOFOLLOW) != 0) {
          if (errno == EACCES) fail_errno(rel, errno);  // readable, not searchable: unreadable
          continue;                                     // gone meanwhile
        }
        // A name with CR or LF cannot be listed (PROTOCOL.md 3.7): counted here, before
        // hidden_in (which hides such a name too), and announced with a left_out entry.
        // So is a name whose path would pass kMaxPath, with all below it (a thirty-second
        // re-attack, B-N5: one such path anywhere made the whole listing fail, so anyone who
        // could write into a shared tree could stop every recv -r of it). The path from the root,
        // which the client's get names, not from the listed directory (a forty-third, B-F2: a
        // path of 4,060 bytes below a 100-byte directory stopped the tree before its first file).
        if (name.find_first_of("\r\n") != std::string::npos || dir_len + name.size() > proto::kMaxPath) {
          ++left_out;
          continue;
        }
        if (root_.is_hidden(it.st) || hidden.hides(name)) continue;
        // The server's own temporary and partial files: an upload in progress, a kept --resume
        // (PROTOCOL.md 3.7; a twenty-second re-attack, N2b: every recv -r of a directory others
        // upload into failed on them now and then).
        if (S_ISREG(it.st.st_mode) && files::is_reserved_name(name)) continue;
        charge_.add(kItemCost + name.size());
        items_cost += kItemCost + name.size();
        items.push_back(std::move(it));
        if (items.size() > max_entries_) too_many();
      }
    } catch (const NotListed& n) {
      charge_.release(items_cost);
      return n.why;
    }
    if (left_out) {
      proto::ListEntry e;
      e.type = proto::EntryType::left_out;
      e.path = rel.empty() ? "." : rel;
      e.size = left_out;
      add(std::move(e));
      unlisted += left_out;
    }
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.name < b.name; });
    walk_items(rel, items, hidden);
    items = {};
    charge_.release(items_cost);
    return Walked::listed;
  }

 private:
  // A name read from a directory, held until its directory's entries are made.
  struct Item {
    std::string name;
    struct stat st;
  };
  // A name's cost while its directory is read: its Item twice (the vector doubles) and the
  // name's heap block. Given back once the directory's entries are made (or with the lister).
  static constexpr uint64_t kItemCost = 2 * sizeof(Item) + 32;

  void walk_items(const std::string& rel, const std::vector<Item>& items, const Root::HiddenIn& hidden) {
    for (const auto& it : items) {
      proto::ListEntry e;
      e.path = rel.empty() ? it.name : rel + "/" + it.name;
      e.mode = it.st.st_mode & 07777;
      e.mtime = it.st.st_mtim.tv_sec;
      if (S_ISREG(it.st.st_mode)) {
        e.type = proto::EntryType::file;
        e.size = uint64_t(it.st.st_size);
      } else if (S_ISDIR(it.st.st_mode)) {
        e.type = proto::EntryType::dir;
      } else if (S_ISLNK(it.st.st_mode)) {
        e.type = proto::EntryType::symlink;
      } else {
        e.type = proto::EntryType::other;
      }
      const bool dir = e.type == proto::EntryType::dir;
      const std::string child = e.path;
      const size_t at = add(std::move(e));
      const Walked w = dir ? walk(child, hidden.child(it.name)) : Walked::listed;
      if (w == Walked::unreadable) entries[at].type = proto::EntryType::unreadable_dir;
      if (w == Walked::gone) drop_last();  // nothing below it was added
    }
  }

  // Takes back the last entry (a directory gone meanwhile) and what add() counted for it.
  void drop_last() {
    bytes_ -= entries.back().path.size();
    charge_.release(kEntryCost + entries.back().path.size());
    entries.pop_back();
  }

  // Appends e within the bounds (entries, path bytes, memory); returns its index.
  size_t add(proto::ListEntry e) {
    bytes_ += e.path.size();
    if (entries.size() >= max_entries_) too_many();
    if (bytes_ > proto::kMaxListBytes)
      fail({Status::refused, shown_ + ": listing larger than " + std::to_string(proto::kMaxListBytes >> 20) +
                                 " MiB of paths"});
    charge_.add(kEntryCost + e.path.size());
    entries.push_back(std::move(e));
    return entries.size() - 1;
  }

  const Root& root_;
  ListingMemory::Share charge_;  // held until the lister (and its entries) goes
  files::DirChain chain_;
  std::string shown_;
  uint64_t max_entries_;
  NameBudget* names_;  // the key's (RequestContext::listing_names), or none
  uint64_t name_step_ = std::clamp<uint64_t>(max_entries_, 1, 1024);
  uint64_t names_read_ = 0;  // every name of every directory read, listed or not
  uint64_t bytes_ = 0;

  [[noreturn]] void too_many() {
    fail({Status::refused, shown_ + ": more than " + std::to_string(max_entries_) +
                               " entries to list (the server's limit, serve --max-list)"});
  }
  // A directory below the top that may not be read or searched (EACCES): listed as such (type 5)
  // rather than refusing the whole listing, so that one such directory (another user's, or one
  // sent with mode 0000 under -p) does not keep a client from the rest of the tree. One that went between its
  // parent's readdir and its open, or was replaced by a symbolic link or a file: passed over, as a file gone
  // meanwhile is. Anyone who could write one directory of a shared tree could otherwise stop every recv -r of
  // it with a loop of mkdir and rmdir: the whole listing was refused (a fifty-second re-attack, A52-1).
  struct NotListed {
    Walked why;
  };
  [[noreturn]] void fail_errno(const std::string& rel, int e) {
    if (e == EACCES && !rel.empty()) throw NotListed{Walked::unreadable};
    if ((e == ENOENT || e == ENOTDIR || e == ELOOP) && !rel.empty()) throw NotListed{Walked::gone};
    std::string where = rel.empty() ? shown_ : shown_ + "/" + rel;
    if (e == ELOOP || e == ENOTDIR) fail({Status::io_error, where + ": changed while being listed"});
    fail(refusal_for(where, e));
  }
  // One component of a directory below top, never through a symlink (files::DirChain).
  // Every directory the chain opens costs the key a name too: the chain reopens from a kept level
  // what it let go (a forty-ninth re-attack, A49-1: up to 55 opens for one directory of a tree
  // shaped for it).
  UniqueFd open_at(int at, const std::string& name, const std::string& rel) {
    if (names_) names_->charge(1);
    UniqueFd next(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) fail_errno(rel, errno);
    return next;
  }
};

void send_list_pages(Conn& c, const std::vector<proto::ListEntry>& entries) {
  proto::ListPage page;
  size_t used = proto::kListPageHeader;
  std::vector<uint8_t> buf;
  auto flush = [&](bool last) {
    page.last = last;
    proto::encode_list_page(page, buf);
    std::memcpy(c.payload_buffer(), buf.data(), buf.size());
    c.send_record(proto::RecordType::control, 0, buf.size());
    page.entries.clear();
    used = proto::kListPageHeader;
  };
  for (const auto& e : entries) {
    if (used + proto::list_entry_size(e) > proto::kMaxListPage || page.entries.size() == 0xffff) flush(false);
    used += proto::list_entry_size(e);
    page.entries.push_back(e);
  }
  flush(true);
}

void handle_list(RequestContext& ctx, const Message& req) {
  Refusal why;
  auto dir = ctx.root.open_directory(req.path, why);
  if (!dir) return refuse(ctx, req, req.path, why);
  struct stat sb {};
  ::fstat(dir->dir.get(), &sb);
  TreeLister lister(ctx, dir->dir.get(), dir->shown);
  try {
    lister.walk("", ctx.root.hidden_in(dir->shown));
    lister.walked();
  } catch (const Failure& f) {
    lister.drop();
    return refuse(ctx, req, dir->shown, {f.status, f.what()});
  }
  Message ok = response(Status::ok, dir->shown);
  ok.size = lister.entries.size();
  ok.mode = sb.st_mode & 07777;
  ok.mtime = sb.st_mtim.tv_sec;
  const std::string details =
      " entries=" + std::to_string(lister.entries.size()) +
      (lister.unlisted ? " unlisted=" + std::to_string(lister.unlisted) : std::string());
  const uint64_t written_before = ctx.c.written();
  try {
    ctx.c.send_message(ok);
    send_list_pages(ctx.c, lister.entries);
  } catch (const Failure& f) {  // a listing walked and then abandoned is logged too (K4)
    log_outcome(ctx, req, dir->shown, details, std::string("failed: ") + f.what());
    throw;
  }
  // Worth the bytes its pages took: one-entry listings, each always logged, wrote 2.7 bytes of log
  // for each byte the client sent (a sixtieth re-attack, N60-6).
  log_transfer(ctx, req, dir->shown, {ctx.c.written() - written_before, 0, 0}, details, "ok");
}

// A pipelined get's line, once its data went out: the bytes sent, the time since its request.
// client_words: log_transfer's.
void log_awaited(RequestContext& ctx, const RequestContext::AwaitedResult& a, const std::string& result,
                 const std::string& client_words = "") {
  const uint64_t sent = a.bytes - a.resumed_from;
  log_transfer(
      ctx, a.req, a.shown, {sent, 0, a.hashed},
      transfer_details(ctx, a.req, sent, std::chrono::duration<double>(Clock::now() - a.started).count(),
                       a.resumed_from, a.hashed),
      result, client_words);
}

// The Result of the oldest pipelined get, which arrived between requests.
void take_result(RequestContext& ctx, const Message& res) {
  if (ctx.awaiting.empty() || !res.tagged || res.tag != ctx.awaiting.front().req.tag)
    throw Failure("protocol error: a result that answers no pipelined get in order");
  RequestContext::AwaitedResult a = std::move(ctx.awaiting.front());
  ctx.awaiting.pop_front();
  ctx.awaiting_bytes -= a.shown.size();
  // Every byte of a pipelined get left before its Result: a failure reported by the client is
  // logged with them too (a twenty-eighth re-attack, N1: "bytes=0" for a file sent whole).
  if (res.status == Status::ok) return log_awaited(ctx, a, "ok");
  log_awaited(ctx, a, "failed: ", client_reported(res).what());
}

// The pipelined gets still awaiting their Results when the session ends (a Bye, a closed or lost
// connection, a protocol error): each logged with the bytes sent for it and why it was not
// answered, never left out of the log (a twenty-eighth re-attack, N1: a client that read its files
// and closed without Results appeared in no op=get line).
//
// Past the first kUnansweredLines of a session that moved data, they are summed in one line, their
// count and bytes (a thirty-fifth re-attack, A-N5: 4,000 pipelined gets of a 1-byte file, never
// read, cost the log 3.7 bytes for each byte the client sent).
// One that moved more bytes than its line takes is always named, so the log never grows faster
// than what the client read: a client that read 60 files of 1,000 bytes and said Bye without
// their Results had 50 of them only counted (a forty-sixth re-attack, B-F5).
constexpr size_t kUnansweredLines = 10;
void log_unanswered(RequestContext& ctx, const std::string& why) {
  size_t n = 0;
  uint64_t bytes = 0, hashed = 0;
  const size_t result_cost = log_value("failed: " + why, kLoggedResult).size();
  for (const auto& a : ctx.awaiting) {  // one that moved nothing is within the key's budget already
    const uint64_t sent = a.bytes - a.resumed_from;
    const size_t line_cost = kLineFrame + result_cost + log_value(a.shown, kLoggedPath).size();
    if (sent == 0 || ctx.quiet_bytes->owed(a.shown).moved + sent > line_cost ||
        a.hashed >= kHashedWorthALine || n++ < kUnansweredLines) {
      log_awaited(ctx, a, "failed: " + why);
    } else {
      ctx.quiet_bytes->add(a.shown, sent);  // summed, it counts towards its file's next line (N60-1)
      bytes += sent;
      hashed += a.hashed;  // what the summed ones hashed is said too (a fifty-fifth re-attack, B55-3)
    }
  }
  if (n > kUnansweredLines)
    ctx.log("peer=" + ctx.c.peer() + " op=get unanswered=" + std::to_string(n - kUnansweredLines) +
            " bytes=" + std::to_string(bytes) + " hashed=" + std::to_string(hashed) +
            " result=" + log_value("failed: " + why, kLoggedResult));
  ctx.awaiting.clear();
  ctx.awaiting_bytes = 0;
}

// One handler per row of proto::kOps, in its order (the table's wire ids).
struct Handler {
  proto::Op op;
  void (*handle)(RequestContext& ctx, const Message& req);
};
constexpr Handler kHandlers[] = {
    {proto::Op::put, handle_put},     {proto::Op::get, handle_get},       {proto::Op::mkdir, handle_mkdir},
    {proto::Op::probe, handle_probe}, {proto::Op::commit, handle_commit}, {proto::Op::stat, handle_stat},
    {proto::Op::list, handle_list},
};

constexpr bool handlers_match_ops() {
  if (std::size(kHandlers) != std::size(proto::kOps)) return false;
  for (size_t i = 0; i < std::size(kHandlers); ++i)
    if (kHandlers[i].op != proto::kOps[i].op) return false;
  return true;
}
static_assert(handlers_match_ops(), "server: one handler for every row of proto::kOps, in its order");

void serve_until_bye(RequestContext& ctx) {
  for (;;) {
    Message req = ctx.c.recv_message("the session");
    if (req.type == proto::MsgType::result) {
      take_result(ctx, req);
      continue;
    }
    if (req.type == proto::MsgType::bye) return log_unanswered(ctx, "the client sent no result");
    if (!ctx.awaiting.empty() && !(req.flags & proto::kFlagAhead))
      throw Failure("protocol error: a request that waits for its answer while pipelined gets await results");
    if (req.type != proto::MsgType::request) throw Failure("protocol error: expected a request");
    // The decoder checked the op's flags against its row (proto/ops.h): a handler sees only
    // requests its op accepts.
    ctx.hashed_here = 0;
    kHandlers[uint8_t(req.op) - 1].handle(ctx, req);
  }
}

}  // namespace

void serve_requests(RequestContext& ctx) {
  // The lines the budget left out are counted in the log when the session ends, however it ends.
  struct LeftOut {
    RequestContext& ctx;
    ~LeftOut() {
      try {
        const std::string n = ctx.quiet_lines->left_out_suffix() + ctx.hashing_lines->left_out_suffix();
        if (!n.empty()) ctx.log("peer=" + ctx.c.peer() + " msg=\"requests left out of the log\"" + n);
      } catch (...) {
      }
    }
  } left_out{ctx};
  try {
    serve_until_bye(ctx);
  } catch (const Failure& f) {
    log_unanswered(ctx, "the session ended before its result: " + failure_text(ctx.stop_signal, f));
    throw;
  } catch (const std::exception& e) {
    log_unanswered(ctx, std::string("the session ended before its result: ") + e.what());
    throw;
  }
}

std::array<uint8_t, 32> dir_id_key(const proto::Identity& host) {
  std::array<uint8_t, 32> key{};
  static constexpr char kLabel[] = "aesxfer directory identity key v1";
  crypto::HmacSha256(host.sk.data(), 32).mac(kLabel, sizeof kLabel - 1, key.data());
  return key;
}

}  // namespace aesxfer::server
