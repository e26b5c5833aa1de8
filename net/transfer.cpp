// The data plane. Both directions are two-stage pipelines, so that the whole-file checksum and the
// file I/O overlap with the record crypto and the socket:
//
//   sender:   [reader thread] read a batch of records' payloads, hash them
//             [caller thread] seal the batch together (CBC lanes, MACs), one gather write
//   receiver: [caller thread] read a batch of records, verify their tags together, decrypt
//             [writer thread] hash the plaintext, write it to the file
//
// Two batches circulate between the stages: 16 records each where the record crypto interleaves
// records (CBC lanes, 16-lane HMAC), 3 for GCM (2 when received), 4 otherwise
// (RecordSealer::batch_records, RecordOpener::batch_records). The buffers are
// allocated once per transfer and nothing is allocated per record. Slots are staggered so that
// the lanes of a batch do not share a 4 KiB page offset (which slows interleaved AES several
// times on this hardware).
#include "net/transfer.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "crypto/checksum.h"
#include "crypto/util.h"
#include "files/io.h"
#include "files/resume.h"
#include "files/version.h"
#include "proto/end_record.h"

namespace aesxfer::net {

using proto::Failure;

using proto::RecordType;

namespace {

constexpr size_t kSendSlots = 16;  // records sealed together: the 16 lanes of VAES CBC
constexpr size_t kRecvSlots = 16;
constexpr size_t kStagger = 576;  // 9 cache lines: 16 slots land on 16 different page offsets

// A batch of record slots in one allocation, each slot `cap` bytes (rounded up to whole pages)
// apart plus a stagger.
struct Batch {
  uint8_t* mem = nullptr;
  size_t slots = 0, stride = 0;
  size_t n = 0;                 // slots in use
  size_t len[kSendSlots] = {};  // payload length (sender) / wire length (receiver) per slot
  RecordType type[kSendSlots] = {};
  std::span<uint8_t> payload[kSendSlots];
  bool last = false;  // sender: the stream ends after this batch

  Batch(size_t nslots, size_t cap) : slots(nslots) {
    stride = (cap + 4095) / 4096 * 4096;
    size_t bytes = slots * (stride + kStagger) + 64;
    mem = static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
    if (!mem) throw Failure("out of memory for transfer buffers");
  }
  ~Batch() { std::free(mem); }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  uint8_t* slot(size_t i) const { return mem + i * (stride + kStagger); }
};

// A two-batch hand-off between two threads: `produce` fills the free batch, `consume` takes the
// full one. Either side may fail; the other sees it as stopped.
class Handoff {
 public:
  Handoff(size_t slots, size_t cap) : a_(slots, cap), b_(slots, cap) {
    free_[0] = &a_;
    free_[1] = &b_;
    nfree_ = 2;
  }
  Batch* take_free() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return nfree_ > 0 || stopped_; });
    if (stopped_) return nullptr;
    return free_[--nfree_];
  }
  void put_full(Batch* b) {
    std::lock_guard<std::mutex> g(mu_);
    full_[nfull_++] = b;
    cv_.notify_all();
  }
  Batch* take_full() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return nfull_ > 0 || stopped_; });
    if (nfull_ == 0) return nullptr;
    Batch* b = full_[0];
    full_[0] = full_[1];
    --nfull_;
    return b;
  }
  void put_free(Batch* b) {
    std::lock_guard<std::mutex> g(mu_);
    free_[nfree_++] = b;
    cv_.notify_all();
  }
  // Waits until every batch is back on the free list (the consumer has finished with all).
  bool drain() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return nfree_ == 2 || stopped_; });
    return nfree_ == 2;
  }
  void stop(std::exception_ptr e = nullptr) {
    std::lock_guard<std::mutex> g(mu_);
    if (e && !error_) error_ = e;
    stopped_ = true;
    cv_.notify_all();
  }
  void rethrow() {
    std::lock_guard<std::mutex> g(mu_);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  Batch a_, b_;
  std::mutex mu_;
  std::condition_variable cv_;
  Batch* free_[2] = {};
  Batch* full_[2] = {};
  int nfree_ = 0, nfull_ = 0;
  bool stopped_ = false;
  std::exception_ptr error_;
};

// Joins a helper thread however the caller leaves.
struct Joiner {
  Handoff& h;
  std::thread& t;
  ~Joiner() {
    h.stop();
    if (t.joinable()) t.join();
  }
};

// A read of the file being sent that failed (it shrank, or the read itself failed): the stream
// is withdrawn (StreamOptions::since), not the connection dropped.
struct ReadFailure : Failure {
  proto::Withdrawal why;
  ReadFailure(const std::string& what, proto::Withdrawal w) : Failure(what, proto::Status::changed), why(w) {}
};

[[noreturn]] void read_failed(uint64_t at, uint64_t size) {
  if (size == UINT64_MAX)
    throw ReadFailure("file shrank while being sent (at byte " + std::to_string(at) + ")",
                      proto::Withdrawal::shrank);
  throw ReadFailure(
      "file shrank while being sent (" + std::to_string(at) + " of " + std::to_string(size) + " bytes)",
      proto::Withdrawal::shrank);
}
[[noreturn]] void read_error() {
  throw ReadFailure(std::string("read error: ") + std::strerror(errno), proto::Withdrawal::unreadable);
}

void read_full(int fd, uint8_t* p, size_t n, uint64_t at, uint64_t size) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r > 0)
      got += size_t(r);
    else if (r == 0)
      read_failed(at + got, size);
    else if (errno != EINTR)
      read_error();
  }
}

// n bytes at pos; a file that ends first fails as read_failed says, at the stream's offset (pos -
// base) of `size` (UINT64_MAX: a part of --streams, whose offsets are the file's).
void pread_full(int fd, uint8_t* p, size_t n, uint64_t pos, uint64_t size = UINT64_MAX, uint64_t base = 0) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, p + got, n - got, off_t(pos + got));
    if (r > 0)
      got += size_t(r);
    else if (r == 0)
      read_failed(pos + got - (size == UINT64_MAX ? 0 : base), size);
    else if (errno != EINTR)
      read_error();
  }
}

// An unsized stream's next record: up to cap bytes of fd as they come (StreamOptions::unsized).
// Returns the bytes read, and sets eof once fd has ended; 0 bytes without eof: kKeepAlive passed
// without input.
size_t read_available(int fd, uint8_t* p, size_t cap, bool& eof) {
  using Clock = std::chrono::steady_clock;
  size_t got = 0;
  Clock::time_point deadline{};
  while (got < cap) {
    auto wait = kKeepAlive;
    if (got > 0) {
      wait = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (wait.count() <= 0) break;
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, int(wait.count()));
    if (ready == 0) break;  // nothing more for now: send what is here
    ssize_t r = ready < 0 ? -1 : ::read(fd, p + got, cap - got);
    if (r > 0) {
      if (got == 0) deadline = Clock::now() + kGatherWindow;
      got += size_t(r);
    } else if (r == 0) {
      eof = true;
      break;
    } else if (errno != EINTR && errno != EAGAIN) {
      throw Failure(std::string("read error: ") + std::strerror(errno));
    }
  }
  return got;
}

// Resume: the checksum takes in the first opt.offset bytes (hashed here, or the caller's hash of
// them), and the file position moves past them.
void skip_prefix(crypto::FileChecksum& hash, int fd, const StreamOptions& opt) {
  if (opt.prefix_hash)
    hash = *opt.prefix_hash;
  else
    files::hash_prefix(hash, fd, opt.offset);
  if (::lseek(fd, off_t(opt.offset), SEEK_SET) < 0)
    throw Failure(std::string("seek error: ") + std::strerror(errno));
}

// The sender's reading stage: fills a batch with payloads of the file (or of an unsized stream, as
// its input comes) and hashes them before they are encrypted in place. `at`: bytes so far.
struct BatchFiller {
  int fd;
  uint64_t size;
  size_t rec_size, per_batch;
  const StreamOptions& opt;
  crypto::FileChecksum& hash;
  uint64_t at;
  files::Regions regions{fd};  // read with pread, the position set once at the end

  void operator()(Batch* b) {
    b->n = 0;
    if (opt.unsized) return fill_unsized(b);
    while (b->n < per_batch && at < size) {
      size_t n = size_t(std::min<uint64_t>(rec_size, size - at));
      uint8_t* p = b->slot(b->n) + proto::kHeaderLen;
      if (fd < 0)
        std::memset(p, 0, n);
      else
        fill_file(p, n);
      add(b, p, n);
    }
    b->last = at >= size;
    // Where a reader of the whole file leaves its position (a descriptor shared with the caller,
    // /dev/fd/N, goes on from there).
    if (b->last && fd >= 0 && !opt.ranged && origin >= 0)
      ::lseek(fd, off_t(uint64_t(origin) + size), SEEK_SET);
  }
  // n bytes of the file from `at`: a hole's as zeros made here, never read (a fifty-fifth
  // re-attack, A55-3: a get of another user's `truncate -s 1T` file read its holes, 2.5 to 4.2 s
  // of server CPU a GiB and a GiB of page cache for each, against 0.3 s for the client).
  void fill_file(uint8_t* p, size_t n) {
    if (!opt.ranged && origin == kUnknown) {  // where `at` is in the file (read goes on from there)
      const off_t cur = ::lseek(fd, 0, SEEK_CUR);
      origin = cur < 0 ? kNotSeekable : cur - int64_t(at);
    }
    if (!opt.ranged && origin == kNotSeekable) return read_full(fd, p, n, at, size);
    const uint64_t base = opt.ranged ? opt.base : uint64_t(origin);
    for (size_t done = 0; done < n;) {
      bool hole = false;
      const size_t k = regions.at(base + at + done, n - done, hole);
      if (hole)
        std::memset(p + done, 0, k);
      else
        pread_full(fd, p + done, k, base + at + done, opt.ranged ? UINT64_MAX : size, base);
      done += k;
    }
  }
  static constexpr int64_t kUnknown = -2, kNotSeekable = -1;
  int64_t origin = kUnknown;
  // A short record (the input paused, or ended) closes the batch, so that it is sent now.
  void fill_unsized(Batch* b) {
    bool eof = false;
    for (size_t n = rec_size; b->n < per_batch && n == rec_size && !eof;) {
      uint8_t* p = b->slot(b->n) + proto::kHeaderLen;
      n = read_available(fd, p, rec_size, eof);
      if (n == 0 && eof) break;
      add(b, p, n);  // n == 0: an empty record, the keep-alive
    }
    b->last = eof;
  }
  void add(Batch* b, const uint8_t* p, size_t n) {
    hash.update(p, n);
    b->len[b->n++] = n;
    at += n;
  }
};

}  // namespace

bool pipeline_threads(const Conn& c, StreamOptions::Pipeline p) {
  if (p != StreamOptions::Pipeline::auto_choice) return p == StreamOptions::Pipeline::threads;
  // AESXFER_PIPELINE=threads|inline overrides the choice (tests run both paths on any machine).
  static const int forced = [] {
    const char* e = std::getenv("AESXFER_PIPELINE");
    if (!e) return -1;
    return std::string_view(e) == "threads" ? 1 : std::string_view(e) == "inline" ? 0 : -1;
  }();
  if (forced >= 0) return forced == 1;
  // Read once: every stream (each file of a tree) asks, and the library reads
  // /sys/devices/system/cpu/online each time.
  static const unsigned cores = std::thread::hardware_concurrency();
  return !(c.loopback_peer() && cores < 4);
}

namespace {

// The source as it was opened (StreamOptions::since) or is now, when it is a regular file read
// whole or in a range: what send_stream compares it with once read.
std::optional<struct stat> source_version(int fd, const StreamOptions& opt) {
  struct stat st {};
  if (fd < 0 || opt.unsized) return std::nullopt;
  if (opt.since)
    st = *opt.since;
  else if (::fstat(fd, &st) != 0)
    return std::nullopt;
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  return st;
}

// Whether the file changed since `before` (files::FileVersion: its size, modification or change
// time; a write, a truncate, a chmod or a new link all count).
bool changed_since(int fd, const struct stat& before) {
  struct stat now {};
  if (::fstat(fd, &now) != 0) return true;
  return files::FileVersion::of(now) != files::FileVersion::of(before);
}

// Starts t running f, or leaves it empty when the process may start no more threads (its task
// limit: RLIMIT_NPROC, a cgroup's pids.max): the stream then runs inline, as on a small machine,
// rather than failing (a forty-second re-attack, A-F1: a server at its task limit ended the
// session with "Resource temporarily unavailable" and the client read a closed connection).
template <class F>
bool start_stage(std::thread& t, F&& f) {
  try {
    t = std::thread(std::forward<F>(f));
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

// The sender's reading stage on a thread of its own: batches filled and handed over until the last.
bool start_reader(std::thread& t, Handoff& h, BatchFiller& fill) {
  return start_stage(t, [&h, &fill] {
    try {
      for (bool last = false; !last;) {
        Batch* b = h.take_free();
        if (!b) return;
        fill(b);
        last = b->last;
        h.put_full(b);
      }
    } catch (...) {
      h.stop(std::current_exception());
    }
  });
}

}  // namespace

crypto::Checksum send_stream(Conn& c, int fd, uint64_t size, const ProgressFn& progress,
                             const StreamOptions& opt) {
  const size_t overhead = c.sealer().max_overhead();
  const size_t rec_size = c.record_size();
  const BufferBudget::Lease lease(c.buffer_budget(), 2 * (rec_size + overhead),
                                  opt.per_record ? 1 : std::min(kSendSlots, c.sealer().batch_records()));
  const size_t per_batch = lease.records();
  if (opt.complete) *opt.complete = false;
  Handoff h(per_batch, rec_size + overhead);
  crypto::FileChecksum hash(c.checksum());
  if (opt.offset > size) throw Failure("resume offset beyond the end of the file");
  if (opt.ranged && opt.offset) throw Failure("internal error: a ranged stream cannot resume");
  if (opt.unsized && (opt.ranged || opt.offset || fd < 0))
    throw Failure("internal error: an unsized stream reads a descriptor from its start");
  const std::optional<struct stat> version = source_version(fd, opt);
  if (opt.offset && fd >= 0) skip_prefix(hash, fd, opt);

  BatchFiller fill{fd, size, rec_size, per_batch, opt, hash, opt.offset};
  std::thread reader;
  const bool threaded = pipeline_threads(c, opt.pipeline) && start_reader(reader, h, fill);
  Joiner joiner{h, reader};

  uint64_t done = opt.offset;
  proto::RecordSealer::Job jobs[kSendSlots];
  struct iovec iov[kSendSlots];
  proto::EndRecord end;
  std::string why;  // a withdrawn stream's reason
  try {
    for (;;) {
      Batch* b = threaded ? h.take_full() : h.take_free();
      if (!b) {
        h.rethrow();
        throw Failure("internal error: the file reader stopped");
      }
      if (!threaded) fill(b);
      for (size_t i = 0; i < b->n; ++i) jobs[i] = {RecordType::data, 0, b->slot(i), b->len[i], 0};
      c.sealer().seal_batch(jobs, b->n);
      for (size_t i = 0; i < b->n; ++i) {
        iov[i].iov_base = b->slot(i);
        iov[i].iov_len = jobs[i].wire_len;
        done += b->len[i];
      }
      c.writev_all(iov, int(b->n));
      bool last = b->last;
      h.put_free(b);
      if (progress) progress(done);
      if (last) break;
    }
    if (threaded) reader.join();
    h.rethrow();
    if (version && changed_since(fd, *version)) {
      end.withdrawn = proto::Withdrawal::changed;
      why = "changed while it was read (its size, modification or change time moved)";
    }
  } catch (const ReadFailure& e) {
    end.withdrawn = e.why;
    why = e.what();
  }
  if (end.withdrawn != proto::Withdrawal::none) {
    end.length = done;  // all the receiver counted
  } else {
    end.length = opt.unsized ? fill.at : size;
    end.checksum = hash.final();
  }
  c.send_record(RecordType::end, proto::kFlagFinal, proto::encode_end(c.payload_buffer(), end));
  if (opt.complete) *opt.complete = true;
  // Withdrawn: the receiver drops what arrived (docs/PROTOCOL.md 3.1), and the connection stays at
  // a file boundary.
  if (end.withdrawn != proto::Withdrawal::none)
    throw Failure(why + ": not sent, run again once it is still", proto::Status::changed, 0,
                  proto::Origin::local);
  if (opt.length) *opt.length = end.length;
  return end.checksum;
}

namespace {

// Room for one record of a stream: the agreed record size, or what is left of the stream when
// that is less (RecordOrder refuses a data record past either), and at least kMinRoom for the end
// record. A receive buffer is then 2 x 16 slots of this, not of proto::kMaxRecord: a tree of small
// files no longer maps (and, under the sanitizers, poisons) 33 MiB per file. A longer record is
// refused before its body is read, with the words RecordOrder would have used.
struct RecordRoom {
  size_t bytes;
  proto::RecordOrder::Verdict too_long;
};

RecordRoom record_room(const Conn& c, uint64_t size, const StreamOptions& opt) {
  constexpr size_t kMinRoom = 4096;
  using V = proto::RecordOrder::Verdict;
  size_t payload = std::min(c.record_size(), proto::kMaxPayload);
  V verdict = V::over_record_size;
  if (!opt.unsized && size - opt.offset < payload) {
    payload = size_t(size - opt.offset);
    verdict = V::over_announced;
  }
  return {proto::kHeaderLen + std::max(payload, kMinRoom) + 16 + proto::kMaxTag, verdict};
}

// The receiving side of one stream: up to a batch of records read into a batch's slots, their
// tags verified together, their order checked by the connection's RecordOrder.
class BatchReader {
 public:
  BatchReader(Conn& c, size_t per_batch, const RecordRoom& room)
      : c_(c), order_(c.in_order()), per_batch_(per_batch), room_(room) {}

  // Reads up to a batch of whole records into b's slots (an end or control record closes the
  // batch early), opens them together and queues the data payloads in b. Returns true once the
  // end record is in. When the connection fails mid-batch, the records that did arrive whole
  // and verify go to `keep` first (a kept partial file, --resume, holds every verified byte).
  template <class Keep>
  bool fill(Batch* b, const Keep& keep) {
    b->n = 0;
    size_t nrec = 0;
    try {
      for (proto::RecordHeader hdr{}; nrec < per_batch_;) {
        uint8_t* rec = b->slot(nrec);
        const size_t wire = c_.read_record(rec, hdr, "the transfer", room_.bytes, room_.too_long);
        jobs_[nrec++] = {rec, wire, {}, {}};
        if (hdr.type != RecordType::data) break;
      }
    } catch (const Failure&) {
      if (nrec > 0 && !c_.opener().open_batch(jobs_, nrec)) {
        for (size_t i = 0; i < nrec && jobs_[i].hdr.type == RecordType::data; ++i) {
          if (order_.on_record(RecordType::data, jobs_[i].payload) != proto::RecordOrder::Verdict::ok) break;
          b->payload[b->n++] = jobs_[i].payload;
        }
        if (b->n > 0) keep(b);
      }
      throw;
    }
    std::error_code ec = c_.opener().open_batch(jobs_, nrec);
    if (ec) throw Failure::link("from " + c_.peer() + ": " + ec.message(), proto::Status::integrity);
    for (size_t i = 0; i < nrec; ++i) {
      const auto v = order_.on_record(jobs_[i].hdr.type, jobs_[i].payload);
      if (v != proto::RecordOrder::Verdict::ok) throw Failure(order_.describe(v), proto::Status::integrity);
      if (jobs_[i].hdr.type == RecordType::data) b->payload[b->n++] = jobs_[i].payload;
    }
    return order_.ended();
  }

 private:
  Conn& c_;
  proto::RecordOrder& order_;
  size_t per_batch_;
  const RecordRoom& room_;
  proto::RecordOpener::Job jobs_[kRecvSlots];
};

// Leaves the connection's record order between streams however the receive ends (a failed
// stream's remaining records are then refused as out of order).
// Hashes a batch's verified plaintext and writes it to fd (fd < 0: nowhere) at wpos (-1: at the
// file position). With keep_error (StreamOptions::read_to_end) the first write error is kept in
// `failed` and nothing more is written, instead of thrown.
struct BatchStore {
  int fd;
  int64_t wpos;
  bool keep_error;
  bool keep_reserve;
  crypto::FileChecksum& hash;
  std::optional<Failure> failed;
  // With keep_reserve: the file system's reserve, shared with every other receiver writing into it.
  std::optional<files::SpaceReserve> reserve;
  void judge_reserve(uint64_t n) {
    if (!reserve) reserve.emplace(fd);
    if (const std::string why = reserve->take(n); !why.empty())
      throw Failure("no space left on device (" + why + ")", proto::Status::no_space, ENOSPC);
  }
  void operator()(Batch* b) {
    // The reserve is judged once for the batch's bytes (one lock, and now and then an fstatvfs),
    // not once per record.
    if (keep_reserve && fd >= 0 && !failed) {
      uint64_t bytes = 0;
      for (size_t i = 0; i < b->n; ++i) bytes += b->payload[i].size();
      try {
        judge_reserve(bytes);
      } catch (const Failure& f) {
        if (!keep_error) throw;
        failed = f;
      }
    }
    // What the reserve granted is released once written, or once the writes failed.
    struct Released {
      std::optional<files::SpaceReserve>& r;
      ~Released() {
        if (r) r->release();
      }
    } released{reserve};
    for (size_t i = 0; i < b->n; ++i) {
      hash.update(b->payload[i].data(), b->payload[i].size());
      if (fd >= 0 && !failed) {
        try {
          files::write_full(fd, b->payload[i].data(), b->payload[i].size(), wpos);
        } catch (const Failure& f) {
          if (!keep_error) throw;
          failed = f;
        }
      }
      if (wpos >= 0) wpos += int64_t(b->payload[i].size());
    }
  }
};

// The end record's verdict on the stream: its checksum, or the sender's withdrawal.
crypto::Checksum close_stream(proto::RecordOrder& order, crypto::FileChecksum& hash,
                              const StreamOptions& opt) {
  crypto::Checksum mine = hash.final();
  const auto v = order.close(mine);
  if (v == proto::RecordOrder::Verdict::withdrawn)
    throw Failure(order.describe(v), proto::Status::changed, 0, proto::Origin::peer);
  if (v != proto::RecordOrder::Verdict::ok) throw Failure(order.describe(v), proto::Status::integrity);
  if (opt.length) *opt.length = order.end().length;
  return mine;
}

struct StreamScope {
  proto::RecordOrder& order;
  ~StreamScope() { order.abandon(); }
};

}  // namespace

crypto::Checksum recv_stream(Conn& c, int fd, uint64_t size, const ProgressFn& progress,
                             const StreamOptions& opt) {
  crypto::FileChecksum hash(c.checksum());
  if (opt.offset > size) throw Failure("resume offset beyond the announced size", proto::Status::integrity);
  const RecordRoom room = record_room(c, size, opt);
  const BufferBudget::Lease lease(c.buffer_budget(), 2 * uint64_t(room.bytes),
                                  opt.per_record ? 1 : std::min(kRecvSlots, c.opener().batch_records()));
  const size_t per_batch = lease.records();
  Handoff h(per_batch, room.bytes);
  if (opt.ranged && opt.offset) throw Failure("internal error: a ranged stream cannot resume");
  if (opt.unsized && (opt.ranged || opt.offset))
    throw Failure("internal error: an unsized stream starts at 0");
  if (opt.offset && opt.prefix_hash)
    hash = *opt.prefix_hash;
  else if (opt.offset && fd >= 0)
    files::hash_prefix(hash, fd, opt.offset);
  proto::RecordOrder& order = c.in_order();
  if (opt.unsized)
    order.begin_unsized();
  else
    order.begin_stream(size, opt.offset);
  StreamScope scope{order};

  if (opt.complete) *opt.complete = false;
  BatchStore store{fd, opt.ranged ? int64_t(opt.base) : -1, opt.read_to_end, opt.keep_reserve, hash, {}, {}};
  std::thread writer;
  const bool threaded = pipeline_threads(c, opt.pipeline) && start_stage(writer, [&] {
                          try {
                            for (Batch* b; (b = h.take_full());) {
                              store(b);
                              h.put_free(b);
                            }
                          } catch (...) {
                            h.stop(std::current_exception());
                          }
                        });
  // Hands a batch over to be stored: to the writer thread, or stored here.
  auto hand_over = [&](Batch* b) {
    if (!threaded) {
      store(b);
      h.put_free(b);
    } else {
      h.put_full(b);
    }
  };
  Joiner joiner{h, writer};

  BatchReader reader(c, per_batch, room);
  for (bool ended = false; !ended;) {
    Batch* b = h.take_free();
    if (!b) {
      h.rethrow();
      throw Failure("internal error: the file writer stopped");
    }
    ended = reader.fill(b, [&](Batch* kept) {
      hand_over(kept);
      h.drain();
      // What a failure keeps counts too (a re-attack, N4: the log said a batch less than was kept).
      if (progress) progress(order.received());
    });
    if (b->n > 0)
      hand_over(b);
    else
      h.put_free(b);
    if (progress) progress(order.received());
    if (!ended) h.rethrow();
  }
  if (!h.drain()) {
    h.rethrow();
    throw Failure("internal error: the file writer stopped");
  }
  h.rethrow();
  if (opt.complete) *opt.complete = true;
  if (store.failed) throw *store.failed;
  return close_stream(order, hash, opt);
}

}  // namespace aesxfer::net
