#include "files/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>

#include "crypto/sha256.h"
#include "crypto/util.h"
#include "files/guarded_path.h"
#include "files/io.h"
#include "files/resume.h"
#include "proto/failure.h"

namespace aesxfer::files {

using proto::Failure;
using proto::printable;

std::string hidden_name(const std::string& name, const std::string& suffix) {
  std::string out = "." + name + suffix;
  if (out.size() <= NAME_MAX) return out;
  // The first 128 bits of SHA-256 of the whole name: the same name always gives the same
  // partial file, and no two names share one. The names come from the peer or from whoever writes
  // in a served tree: a 32-bit FNV-1a tag was matched in under a second, and one file's transfer
  // took or removed another's partial file, offering its prefix to another server (a fifty-sixth
  // re-attack, C56-1).
  uint8_t d[32];
  crypto::Sha256::digest(name.data(), name.size(), d);
  const std::string tag = "~" + crypto::to_hex(d, 16);
  const size_t keep = NAME_MAX - 1 - tag.size() - suffix.size();
  return "." + name.substr(0, keep) + tag + suffix;
}

std::string random_temp_name(const std::string& name) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint8_t r[kTempRandom];
  if (::getrandom(r, sizeof r, 0) != ssize_t(sizeof r))
    throw Failure("getrandom failed: " + errno_text(errno), proto::Status::io_error, errno);
  std::string suffix = kTempInfix;
  for (uint8_t b : r) suffix += kAlphabet[b % 62];
  return hidden_name(name, suffix);
}

bool is_temp_name(const std::string& n) {
  const size_t infix = std::strlen(kTempInfix);
  if (n.size() < 2 + infix + kTempRandom || n[0] != '.') return false;
  const size_t at = n.size() - kTempRandom - infix;
  if (n.compare(at, infix, kTempInfix) != 0) return false;
  for (size_t i = at + infix; i < n.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(n[i]))) return false;
  return true;
}

std::string partial_name(const std::string& name) { return hidden_name(name, kPartialSuffix); }

bool is_partial_name(const std::string& n) {
  const size_t suffix = std::strlen(kPartialSuffix);
  return n.size() > 1 + suffix && n[0] == '.' && n.compare(n.size() - suffix, suffix, kPartialSuffix) == 0;
}

// ---- signal cleanup ------------------------------------------------------------------------

// `shown` as a slot keeps it: whole when it fits, else "..." and its tail, so that the name, at its
// end, is still said (a thirty-eighth re-attack, B-F6: a path of about 1,000 bytes was cut at
// 1023, and the Ctrl-C line named a file that does not exist). A quoted path keeps its opening
// quote before the "...". The cut never splits a UTF-8 character or an escape (\xNN, \"): the
// text is printable()'s or quoted()'s (proto::escaped_piece).

// The first piece boundary at or after `from` where the text is inside a quote (`inside`) or
// outside one, or shown.size() when there is none.
static size_t boundary(const std::string& shown, size_t from, bool inside) {
  bool in = false;
  size_t i = 0;
  for (; i < shown.size() && (i < from || in != inside); i += proto::escaped_piece(shown, i))
    if (shown[i] == '"') in = !in;
  return i;
}

std::string fitted(const std::string& shown, size_t cap) {
  if (shown.size() < cap) return shown;
  // Up to the first quote (a quoted path's, "what arrived of \"F\" in \"HOST:PATH\"" included),
  // then "..." and a tail that starts inside a quote, so that the quotes stay paired (a
  // forty-sixth re-attack, B-F2: the server-kept slot was cut to "...TAIL" and its path's
  // opening quote went, so that a sent tree's names read as clauses of the line).
  if (const size_t q = shown.find('"'); q != std::string::npos && q + 8 < cap / 2) {
    const std::string head = shown.substr(0, q + 1) + "...";
    const size_t i = boundary(shown, std::max(q + 1, shown.size() - (cap - 1 - head.size())), true);
    if (i < shown.size()) return head + shown.substr(i);
  }
  return "..." + shown.substr(boundary(shown, shown.size() - (cap - 4), false));
}

namespace {

// Removed; kept here; kept by the server; removed, a copy of the destination still being made;
// a temporary file's name claimed before it is made (removed if it was, else not named); kept
// by the server unless its end record put the file in place.
enum class Kind { temporary, kept, remote, copying, creating, remote_ended };

struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 active, 3 lingering (still kept, no transfer)
  std::atomic<Kind> kind{Kind::temporary};  // a kept slot turns copying and back (mark_copying)
  std::atomic<bool> discarding{false};      // a failed transfer's file being removed (mark_discarding)
  bool quiet = false;                       // the tool's own file: removed, never named
  int dirfd = -1;
  char name[NAME_MAX + 1];
  char shown[1024];
};
constexpr int kSlots = 32;
Slot g_slots[kSlots];
std::atomic<int> g_awaiting{0};           // files sent whole and not answered (AwaitingAnswer)
std::atomic<int> g_unanswered_before{0};  // the same, of a session lost (set_unanswered_before)

// Claims are made under g_claim, so that a lingering slot's name is read only while no other
// claim may refill it. The signal handler takes no lock: it reads only slots in state 2 or 3.
std::mutex g_claim;

// Frees the lingering slots of `shown` (a retry of the same file takes their place), or every
// lingering slot (nullptr: all the others are taken).
void drop_lingering(const std::string* shown) {
  for (auto& s : g_slots) {
    int expect = 3;
    if (s.state.load() != 3 || (shown && fitted(*shown, sizeof s.shown) != s.shown)) continue;
    s.state.compare_exchange_strong(expect, 0);
  }
}

int claim(int dirfd, const std::string& name, const std::string& shown, Kind kind, bool quiet = false) {
  const std::lock_guard<std::mutex> lock(g_claim);
  drop_lingering(&shown);
  for (int round = 0; round < 2; ++round) {
    if (round == 1) drop_lingering(nullptr);  // full: what only lingers gives way
    for (int i = 0; i < kSlots; ++i) {
      int expect = 0;
      if (!g_slots[i].state.compare_exchange_strong(expect, 1)) continue;
      Slot& s = g_slots[i];
      s.kind = kind;
      s.discarding = false;
      s.quiet = quiet;
      s.dirfd = dirfd;
      std::snprintf(s.name, sizeof s.name, "%s", name.c_str());
      std::snprintf(s.shown, sizeof s.shown, "%s",
                    fitted(shown, sizeof s.shown).c_str());  // printable already
      s.state.store(2);
      return i;
    }
  }
  return -1;
}

void set_kind(int slot, Kind kind) noexcept {
  if (slot >= 0) g_slots[slot].kind.store(kind);
}

void release(int slot, bool lingers = false) noexcept {
  if (slot >= 0) g_slots[slot].state.store(lingers ? 3 : 0);
}

void put(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= size_t(w);
  }
}

// n in decimal, async-signal-safe.
void put_count(int n) {
  char buf[16];
  int i = sizeof buf;
  buf[--i] = 0;
  do buf[--i] = char('0' + n % 10);
  while ((n /= 10) > 0 && i > 0);
  put(buf + i);
}

bool is_fault(int sig) {
  for (int f : kFaultSignals)
    if (sig == f) return true;
  return false;
}

// The signal line names files while it stays within kSignalLineBytes (the first always); the rest
// are counted: 32 withdrawn gets of a hostile server's names of ~1,000 bytes made a line of 29,972
// bytes whose "aesxfer:" head scrolled off, leaving the server's text (a fiftieth re-attack, B50-3).
constexpr size_t kSignalLineBytes = 1536;
// The most a file's clause writes around its name ("; the server may keep ", " for --resume" and
// " (written whole to the connection ...)", 139 bytes): counted for every named file, so that the
// bound holds (a fifty-second re-attack, B52-1's note: 40 were counted, and 32 short names made a
// line of 3,305 bytes).
constexpr size_t kClauseBytes = 144;

// What the handler does with one slot (removes what is not kept) and says of it, or counts it in
// `more` (removed, kept here, kept by the server) once the line is full.
void settle_slot(Slot& s, size_t& written, bool& any, int (&more)[3]) {
  const Kind kind = s.kind.load();
  if (s.quiet) {  // a temporary file of the tool's own: gone, whether or not it was renamed
    if (kind == Kind::temporary || kind == Kind::creating) ::unlinkat(s.dirfd, s.name, 0);
    return;
  }
  // A file that a failed transfer is removing went, or goes now, for that failure: it never
  // "arrived", though it is gone (a fifty-second re-attack, B52-1: the unlink of a large file
  // takes a while, and a signal in it said the file had arrived complete and was in place).
  const bool dropping = s.discarding.load();
  // A kept partial file that holds nothing (a server that said "from 0" emptied it) is no
  // partial file (a forty-eighth re-attack, B48-3: "kept" of an empty file). One that is gone
  // was renamed into place as the signal came (a fifty-first re-attack, B51-1: "kept" of a file
  // that had arrived). fstatat is async-signal-safe.
  struct stat st {};
  const bool local = kind == Kind::kept;
  const bool there = local && ::fstatat(s.dirfd, s.name, &st, AT_SYMLINK_NOFOLLOW) == 0;
  // Only an active slot's directory is still open: a lingering one's (between retries) is not.
  const bool gone = local && !there && errno == ENOENT && s.state.load() == 2 && !dropping;
  const bool empty = there && S_ISREG(st.st_mode) && st.st_size == 0;
  const bool unlinked = kind == Kind::temporary || kind == Kind::copying || kind == Kind::creating || empty ||
                        (local && dropping);
  // What unlinkat says is what happened: a temporary file already renamed into place (B51-1), or
  // one whose name was claimed and not yet made (A51-3), is not there to remove.
  const bool removed = unlinked && ::unlinkat(s.dirfd, s.name, 0) == 0;
  const bool absent = unlinked && !removed && errno == ENOENT;
  if (kind == Kind::creating && !removed) return;  // nothing was made
  const bool arrived = ((absent && kind == Kind::temporary) || gone) && !dropping;
  const size_t len = std::strlen(s.shown);
  if (any && written + len + kClauseBytes > kSignalLineBytes) {
    ++more[unlinked ? 0 : local ? 1 : 2];
    return;
  }
  put(any ? "; " : ": ");
  if (arrived)
    put(local ? "the file kept in " : "the file written as ");
  else if (unlinked)
    put(kind == Kind::temporary || kind == Kind::creating ? "removed the temporary file of "
        : empty                                           ? "removed the empty partial file "
                                                          : "removed ");
  else
    put(local ? "kept " : kind == Kind::remote_ended ? "the server may keep " : "the server keeps ");
  put(s.shown);
  if (arrived) put(" had arrived complete and was in place");
  if (!unlinked && !arrived) put(" for --resume");
  // What was written to the socket may sit there unacknowledged, the link stalled: L59-1's words,
  // never "its end was sent" (a sixtieth re-attack, O60-3).
  if (kind == Kind::remote_ended)
    put(" (written whole to the connection and not yet answered: whether the server put it in place is not "
        "known)");
  if (kind == Kind::copying)
    put(", where a copy of the destination was being made (the destination is as it was)");
  written += len + kClauseBytes;
  any = true;
}

extern "C" void on_stop_signal(int sig) {
  if (::isatty(STDERR_FILENO)) put("\n");
  put(sig == SIGPIPE  ? "aesxfer: stopped: the reader of its output went away"
      : is_fault(sig) ? "aesxfer: stopped by a fatal signal"
                      : "aesxfer: interrupted");
  bool any = false;
  size_t written = 0;
  int more[3] = {0, 0, 0};
  for (auto& s : g_slots)
    if (const int st = s.state.load(); st == 2 || st == 3) settle_slot(s, written, any, more);
  if (const int n = g_awaiting.load() + g_unanswered_before.load(); n > 0) {
    put(any ? "; " : ": ");
    put_count(n);
    put(n == 1 ? " file was written whole to the connection and not yet answered: whether the server put it "
                 "in place is not known"
               : " files were written whole to the connection and not yet answered: whether the server put "
                 "them in place is not "
                 "known");
    any = true;
  }
  if (!any) put(": no partial or temporary file was left behind");  // what arrived whole stays
  if (more[0] + more[1] + more[2] > 0) {
    put("; and ");
    put_count(more[0] + more[1] + more[2]);
    put(" more files (");
    const char* what[3] = {" removed", " kept for --resume", " kept by the server for --resume"};
    bool first = true;
    for (int k = 0; k < 3; ++k) {
      if (more[k] == 0) continue;
      if (!first) put(", ");
      put_count(more[k]);
      put(what[k]);
      first = false;
    }
    put(")");
  }
  put("\n");
  if (is_fault(sig)) {  // reset to its default on entry (SA_RESETHAND): dies of it when unblocked
    ::raise(sig);
    return;
  }
  ::_exit(128 + sig);
}

}  // namespace

const std::vector<int>& stop_signals() {
  static const std::vector<int> list = [] {
    std::vector<int> v = {SIGINT,    SIGTERM, SIGHUP, SIGPIPE, SIGQUIT,   SIGXCPU, SIGALRM, SIGUSR1, SIGUSR2,
                          SIGVTALRM, SIGPROF, SIGIO,  SIGPWR,  SIGSTKFLT, SIGABRT, SIGSYS,  SIGTRAP};
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) v.push_back(sig);
    return v;
  }();
  return list;
}

void install_cleanup_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigfillset(&sa.sa_mask);
  // SIGPIPE too: `recv --json-progress ... | head -1` killed the process and left the temporary
  // file for good (a thirty-second re-attack, B-N4). SIGXFSZ (a file past `ulimit -f`) is
  // ignored: the write then fails with EFBIG, "file too large", and the failure cleans up. SIGQUIT
  // (Ctrl-\) as SIGINT: it left the temporary file without a word and dumped no core worth more
  // (a forty-eighth re-attack, B48-2).
  for (int sig : stop_signals()) take_signal(sig, sa);
  // A fault only when nobody handles it already (a sanitizer does).
  struct sigaction fault = sa;
  fault.sa_flags = SA_RESETHAND;
  for (int sig : kFaultSignals)
    if (struct sigaction old{};
        ::sigaction(sig, nullptr, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
      ::sigaction(sig, &fault, nullptr);
  ::signal(SIGXFSZ, SIG_IGN);
}

bool take_signal(int sig, const struct sigaction& with, struct sigaction* was) {
  struct sigaction old {};
  if (::sigaction(sig, nullptr, &old) != 0) return false;
  if (was) *was = old;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) return false;  // nohup's: it stays so
  return ::sigaction(sig, &with, nullptr) == 0;
}

int register_kept(int dirfd, const std::string& name, const std::string& shown) {
  return claim(dirfd, name, shown, Kind::kept);
}

int register_server_kept(const std::string& shown) { return claim(-1, "", shown, Kind::remote); }

void unregister_kept(int slot, bool lingers) noexcept { release(slot, lingers); }

void mark_copying(int slot, bool copying) noexcept { set_kind(slot, copying ? Kind::copying : Kind::kept); }

void mark_sent_whole(int slot) noexcept { set_kind(slot, Kind::remote_ended); }

void mark_discarding(int slot) noexcept {
  if (slot >= 0) g_slots[slot].discarding.store(true);
}

void (*g_discard_hook)() noexcept = nullptr;

void set_unanswered_before(int n) noexcept { g_unanswered_before.store(n); }

AwaitingAnswer::AwaitingAnswer(bool counted) noexcept : counted_(counted) {
  if (counted_) g_awaiting.fetch_add(1);
}

AwaitingAnswer& AwaitingAnswer::operator=(AwaitingAnswer&& o) noexcept {
  if (this != &o) {
    release();
    counted_ = o.counted_;
    o.counted_ = false;
  }
  return *this;
}

void AwaitingAnswer::release() noexcept {
  if (counted_) g_awaiting.fetch_sub(1);
  counted_ = false;
}

// ---- AtomicFile ------------------------------------------------------------------------------

AtomicFile::AtomicFile(const std::filesystem::path& dest, Bookkeeping own)
    : shown_(printable(dest.string())),
      said_(proto::quoted(dest.string())),
      name_(dest.filename().string()),
      bookkeeping_(own == Bookkeeping::yes) {
  std::filesystem::path dir = dest.parent_path();
  if (dir.empty()) dir = ".";
  dirfd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const std::string shown_dir = printable(dir.string());
  if (!dirfd_) throw Failure("cannot create a file in " + shown_dir + ": " + errno_text(errno));
  create(shown_dir);
}

AtomicFile::AtomicFile(int dirfd, const std::string& name, const std::filesystem::path& shown)
    : shown_(printable(shown.string())),
      said_(proto::quoted(shown.string())),
      name_(name) {  // a name from a listing: the peer's
  dirfd_.reset(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (!dirfd_) throw Failure("cannot create " + shown_.string() + ": " + errno_text(errno));
  const std::filesystem::path dir = shown_.parent_path();
  create(dir.empty() ? std::string(".") : dir.string());
}

void AtomicFile::create(const std::string& shown_dir) {
  if (std::string why = unreplaceable(dirfd_.get(), name_); !why.empty()) {
    dirfd_.reset();
    throw Failure(shown_.string() + ": " + why, proto::Status::permission, EPERM);
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string tmp = random_temp_name(name_);
    // The name claimed before the file is made: a signal as openat returned found no slot, and
    // left the file behind with "nothing was left behind" (a fifty-first re-attack, A51-3).
    slot_ = claim(dirfd_.get(), tmp, said_, Kind::creating, bookkeeping_);
    fd_.reset(::openat(dirfd_.get(), tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    const int made_errno = errno;
    if (fd_) {
      tmp_ = tmp;
      set_kind(slot_, Kind::temporary);
      return;
    }
    release(slot_);
    slot_ = -1;
    if (made_errno != EEXIST) {
      errno = made_errno;
      break;
    }
  }
  int e = errno;
  // A destination that is writable in a directory that is not: say why that is not enough (a
  // twenty-seventh re-attack, N9: "permission denied" alone, where scp would write the file).
  const bool dest_writable =
      e == EACCES && ::faccessat(dirfd_.get(), name_.c_str(), W_OK, AT_SYMLINK_NOFOLLOW) == 0;
  dirfd_.reset();
  // The file named first: in a tree, one line per file said only the directory (a thirty-fifth
  // re-attack, B-N10: "cannot create a file in DIR: no space left on device", once per file).
  throw Failure(
      shown_.string() + ": cannot create a file in " + shown_dir + ": " + errno_text(e) +
          (dest_writable ? " (" + shown_.filename().string() +
                               " itself is writable, but it is replaced by a file written beside it "
                               "and renamed, never rewritten in place)"
                         : std::string()),
      e == ENOSPC ? proto::Status::no_space : proto::Status::io_error, e);
}

std::unique_ptr<AtomicFile> AtomicFile::write_through(int fd, const std::filesystem::path& shown) {
  std::unique_ptr<AtomicFile> f(new AtomicFile());
  f->fd_.reset(fd);
  f->shown_ = printable(shown.string());
  return f;
}

AtomicFile::~AtomicFile() { discard(); }

unsigned FileMode::resolve(int dirfd, const std::string& name) const {
  struct stat st {};
  // Only a file of this user's own with one link: the mode of one another user planted (0666 in
  // a shared directory, or a hard link to some 0666 file of this user's) would let them read or
  // rewrite the data once it is renamed into place.
  if (!keep_existing || ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
    return bits;
  if (ownership_problem(st, 0).empty()) return st.st_mode & 07777;
  // This user's file with more links (a hard-linked snapshot, cp -al): the bits both allow, never
  // wider than either, so that a 0600 file stays private and a planted link to a 0666 one still
  // opens nothing (a thirty-second re-attack, B-N3: such a file became 0644).
  if (st.st_uid == ::geteuid()) return st.st_mode & bits & 07777;
  return bits;
}

void apply_mode_mtime(int fd, unsigned mode, long long mtime) noexcept {
  // Never the set-user-ID or set-group-ID bit a peer sent (docs/SECURITY.md): on a file it would
  // run the peer's program as this user, on a directory it would choose the group of what is
  // created in it. The sticky bit stays.
  ::fchmod(fd, mode & 01777);
  if (mtime != kNoMtime) {
    timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = mtime;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    ::futimens(fd, ts);
  }
}

std::string remove_failed_temp(int dirfd, const std::string& tmp) noexcept {
  if (tmp.empty() || ::unlinkat(dirfd, tmp.c_str(), 0) == 0 || errno == ENOENT) return "";
  const int e = errno;
  if (::fchmodat(dirfd, tmp.c_str(), 0600, 0) != 0) {  // best effort: the clause says it stays
  }
  try {
    return "; its temporary file " + printable(tmp) +
           " stays beside it (it cannot be removed: " + errno_text(e) + ")";
  } catch (...) {
    return "";
  }
}

void AtomicFile::discard() noexcept {
  mark_discarding(slot_);
  fd_.reset();
  if (!tmp_.empty()) ::unlinkat(dirfd_.get(), tmp_.c_str(), 0);
  if (g_discard_hook && !tmp_.empty()) g_discard_hook();
  tmp_.clear();
  release(slot_);
  slot_ = -1;
}

void AtomicFile::commit(FileMode mode, long long mtime) {
  if (dirfd_) apply_mode_mtime(fd_.get(), mode.resolve(dirfd_.get(), name_), mtime);
  if (fd_.close() != 0) {
    int e = errno;
    throw Failure("cannot finish writing " + shown_.string() + ": " + errno_text(e));
  }
  if (!dirfd_) return;  // written through
  if (::renameat(dirfd_.get(), tmp_.c_str(), dirfd_.get(), name_.c_str()) != 0) {
    const std::string why = "cannot rename into " + shown_.string() + ": " + errno_text(errno);
    const std::string left = remove_failed_temp(dirfd_.get(), tmp_);
    if (!left.empty()) tmp_.clear();  // said: not removed again, in vain, nor said removed
    throw Failure(why + left);
  }
  drop_stale_partial(dirfd_.get(), name_);
  tmp_.clear();
  release(slot_);
  slot_ = -1;
}

}  // namespace aesxfer::files
