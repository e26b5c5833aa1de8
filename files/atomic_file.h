// A destination file that appears only when complete: data goes to a temporary file beside the
// destination ("<dir>/.<name>.aesxfer-tmp-XXXXXXXXXX", the name part shortened so that the whole stays
// within NAME_MAX), renamed into place by commit(); destroyed without commit(), the temporary
// file is removed and an existing destination is untouched. While it exists, a client stopped by
// SIGINT, SIGTERM, SIGHUP or SIGPIPE removes it (install_cleanup_on_signals).
#pragma once
#include <climits>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "files/io.h"
#include "files/unique_fd.h"

namespace aesxfer::files {

// "Leave the file's own time": no modification time to apply (every other value is one, before
// 1970 too).
constexpr long long kNoMtime = LLONG_MIN;

// The permission bits a receiver gives a file it writes (docs/PROTOCOL.md 3.4): `bits`, or,
// with keep_existing, the mode of the regular file the new one replaces, when there is one and it
// belongs to this user (without -p an overwritten destination keeps its mode, as with scp, cp and
// rsync; a new file, or one another user owned, gets `bits`; one of this user's with more than one
// link, the bits both modes allow). Resolved at the rename, from the directory's fd, without
// following a symlink.
struct FileMode {
  unsigned bits = 0644;
  bool keep_existing = false;
  FileMode(unsigned b) : bits(b) {}  // NOLINT(google-explicit-constructor): exactly these bits
  FileMode(unsigned b, bool keep) : bits(b), keep_existing(keep) {}
  // What to apply to `name` in dirfd before it is replaced.
  unsigned resolve(int dirfd, const std::string& name) const;
};

class AtomicFile {
 public:
  // A file of the tool's own (`yes`: $AESXFER_HOME/tree_copies), which a signal's line never
  // names: its temporary file is removed without a word. Named, it read as the transfer's file
  // ("the file written as .../tree_copies had arrived complete") before any file of the tree had
  // moved (a fifty-fourth re-attack, B54-2).
  enum class Bookkeeping { no, yes };
  // Throws Failure when the temporary file cannot be created (the message says why).
  explicit AtomicFile(const std::filesystem::path& dest, Bookkeeping own = Bookkeeping::no);
  // The destination `name` (one component) inside the directory open as `dirfd`: the temporary
  // file is created there with openat (O_EXCL | O_NOFOLLOW) and renamed with renameat, so no
  // symbolic link on the way is followed. `shown` names the destination in messages.
  AtomicFile(int dirfd, const std::string& name, const std::filesystem::path& shown);
  // Writes straight into fd (taken over): a destination that is a FIFO, a character device or a
  // socket is written through, as cp does, never replaced. commit() only closes it.
  static std::unique_ptr<AtomicFile> write_through(int fd, const std::filesystem::path& shown);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  int fd() const { return fd_.get(); }
  bool through() const { return !dirfd_; }
  // The destination as messages name it (printable already).
  const std::filesystem::path& shown() const { return shown_; }
  // Sets mode (and mtime unless kNoMtime), closes and renames over the destination.
  void commit(FileMode mode, long long mtime = kNoMtime);
  void discard() noexcept;

 private:
  AtomicFile() = default;
  void create(const std::string& shown_dir);
  std::filesystem::path shown_;  // the destination as messages name it: made printable once, here
  std::string said_;             // as the Ctrl-C line names it: proto::quoted (see claim)
  std::string name_, tmp_;       // inside dirfd_
  bool bookkeeping_ = false;     // never named by the signal line
  UniqueFd dirfd_;
  UniqueFd fd_;
  int slot_ = -1;  // signal cleanup registration
};

// ".<name><suffix>" for a name of any length, never longer than NAME_MAX (255) bytes: a name
// too long keeps its first bytes and gains "~" and 32 hex digits of SHA-256 of the whole name, so
// the result stays the same for the same name (a kept partial file is found again).
std::string hidden_name(const std::string& name, const std::string& suffix);

// Temporary files beside a destination NAME, on both ends: hidden_name(NAME, kTempInfix + kTempRandom
// characters of [A-Za-z0-9]). The server's sweeper (server/sweep.h) and recv -r --resume
// (client/tree_resume.h) know them by this shape alone, so it is one nobody picks by chance: a
// user's ".db.aesxfer-backup" had the shape of the old ".aesxfer-XXXXXX" (six letters) and was
// swept as debris.
inline constexpr char kTempInfix[] = ".aesxfer-tmp-";
constexpr size_t kTempRandom = 10;
// A fresh temporary name for NAME (getrandom(2); throws Failure when it fails).
std::string random_temp_name(const std::string& name);
// `n` has the shape of a temporary file's name.
bool is_temp_name(const std::string& n);

// What a resumable transfer keeps beside NAME, on both ends: hidden_name(NAME, kPartialSuffix),
// the same name for the same NAME, so that a later --resume finds it (PROTOCOL.md 3.6).
inline constexpr char kPartialSuffix[] = ".aesxfer-partial";
std::string partial_name(const std::string& name);
// `n` has the shape of a partial file's name (hidden, the suffix after at least one character).
bool is_partial_name(const std::string& n);
// `n` has one of the two shapes above: a name aesxfer keeps for its own files, never a user's.
inline bool is_reserved_name(const std::string& n) { return is_temp_name(n) || is_partial_name(n); }
// The shapes themselves, as both ends state them (the server's refusal of such a path too).
inline constexpr char kReservedShapes[] =
    "(.NAME.aesxfer-tmp- and ten letters or digits, .NAME.aesxfer-partial)";
// Why such a name is never a source or a destination of a transfer (the client's words; the
// server's refusal says the same of its own files).
inline const std::string kReservedShape =
    std::string("a name of the shape aesxfer keeps for its own temporary and partial files ") +
    kReservedShapes + "; no transfer may name one";

// Sets the permission bits of fd's file, and its modification (and access) time unless mtime is
// kNoMtime (a time before 1970 is negative, and kept: a nineteenth re-attack, N3).
// Best effort, as scp -p: a file system that refuses either keeps its own.
void apply_mode_mtime(int fd, unsigned mode, long long mtime) noexcept;
// After a temporary file `tmp` in dirfd failed to be renamed into place: removes it, or, when it
// cannot be (an append-only directory, chattr +a), makes it private again (0600, the sweep's and
// a user's sign of a receiver's leftover) and returns the clause that says it stays:
// "; its temporary file TMP stays beside it (it cannot be removed: REASON)". A fifty-sixth
// re-attack (A56-5): a full-size copy stayed, 0644, with only "cannot rename into place".
std::string remove_failed_temp(int dirfd, const std::string& tmp) noexcept;

// The signals that end a client or a bench run from outside and get their clean-up: every one
// whose default action ends the process but SIGKILL (not caught), SIGXFSZ (ignored: the write
// past `ulimit -f` fails instead) and the faults below. ^C, kill, a closed terminal, a reader gone
// (SIGPIPE), ^\, SIGXCPU of a CPU-time limit, SIGALRM, SIGUSR1 (a forty-ninth re-attack, C49-2),
// and SIGABRT of a watchdog, SIGSYS, SIGTRAP and the real-time signals SIGRTMIN..SIGRTMAX (a
// fiftieth, A50-2: each left the temporary file, or the destination's copy as a partial file,
// without a word). Not glibc's own two below SIGRTMIN.
const std::vector<int>& stop_signals();
// The faults: a handler that returns runs the faulting instruction again. The client's clean-up
// on them removes and says as for the others, then dies of the signal (its core kept).
inline constexpr int kFaultSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};

// Client side (send and recv call it once): on any of stop_signals(), remove every
// AtomicFile's temporary file, keep every registered partial file, print one line on stderr
// saying what was left here and on the server ("aesxfer: interrupted: ..."), and exit with
// 128 + the signal number; on kFaultSignals the same, then die of the signal. A signal ignored
// when the client starts stays ignored (`nohup aesxfer send ...` goes on when its terminal
// closes, as scp does), and a fault already handled (a sanitizer's handler) keeps its handler.
void install_cleanup_on_signals();
// Installs `with` for sig (the old action in *was), unless sig is ignored: a signal ignored by
// whoever started the process (nohup) stays ignored. False when it was not installed.
bool take_signal(int sig, const struct sigaction& with, struct sigaction* was = nullptr);
// Registers a file the signal handler leaves in place and names ("kept ... for --resume");
// returns a slot for unregister_kept (-1 when none is free). Used by PartialFile. `shown`, here and
// below, is printed as it is: it must be printable already, and every path in it quoted
// (proto::quoted), so that no name can pass for a clause of the line ("...; kept /root/.ssh/...":
// a forty-fifth re-attack, B-F2).
int register_kept(int dirfd, const std::string& name, const std::string& shown);
// `shown` as a registration keeps it in its slot of `cap` bytes (with the NUL): whole when it fits,
// else cut to its tail after "...", at an escape or character, its quotes still paired.
std::string fitted(const std::string& shown, size_t cap);
// The same for what the server keeps of a resumable put (send --resume): the handler names it
// ("the server keeps <shown> for --resume") instead of saying nothing was left behind. Released
// with unregister_kept.
int register_server_kept(const std::string& shown);
// `lingers`: the transfer ended and the file stays kept (it broke): the handler still names it,
// while a retry waits, until a registration of the same `shown` (that retry) takes its place (a
// thirty-fifth re-attack, B-N2: a Ctrl-C between retries said "nothing was left behind").
void unregister_kept(int slot, bool lingers = false) noexcept;
// While `copying`, a kept slot's file holds only a copy of the destination being made (recv
// --resume onto a shorter destination): a signal removes it and says the destination is as it was
// (a thirty-sixth re-attack, B9: Ctrl-C kept a partial file of 115 MB of copied bytes beside the
// 250 MB destination, "kept ... for --resume").
void mark_copying(int slot, bool copying) noexcept;
// A server-kept slot whose transfer sent its end record: the server may have put the file in
// place, and the line says it cannot tell ("the server may keep ..."), not that it keeps it (a
// fifty-first re-attack, B51-1: the file was stored whole and the line said its partial was kept).
void mark_sent_whole(int slot) noexcept;
// The slot's file is being removed because its transfer failed (AtomicFile::discard,
// PartialFile::discard): a signal from then on says it was removed, never that it arrived, though
// the unlink may already have taken it (a fifty-second re-attack, B52-1: over a large file the
// unlink takes a while, and a signal in it said the file had arrived complete and was in place).
void mark_discarding(int slot) noexcept;
// Counts, while it is held, one file whose whole data and end record (or a parallel put's commit)
// were sent and whose answer has not been read: the server may already have put it in place, so
// a signal meanwhile says how many such files there are and that it cannot tell, never "nothing
// was left behind" (a fifty-second re-attack's note: a plain send interrupted after its end
// record). Movable, so that a pipelined put's queue entry can hold it.
class AwaitingAnswer {
 public:
  AwaitingAnswer() = default;
  explicit AwaitingAnswer(bool counted) noexcept;
  AwaitingAnswer(AwaitingAnswer&& o) noexcept : counted_(o.counted_) { o.counted_ = false; }
  AwaitingAnswer& operator=(AwaitingAnswer&& o) noexcept;
  AwaitingAnswer(const AwaitingAnswer&) = delete;
  AwaitingAnswer& operator=(const AwaitingAnswer&) = delete;
  ~AwaitingAnswer() { release(); }
  void release() noexcept;  // the answer came (or the file failed)
  bool counted() const { return counted_; }

 private:
  bool counted_ = false;
};

// Files an earlier session sent whole whose answers the lost connection took, counted while a
// --retries wait and the next login run: a signal then says so, as it does for files awaiting an
// answer (AwaitingAnswer), never "no partial or temporary file was left behind" (the previous
// session's note: a Ctrl-C during the retry wait after lost pipelined answers said so). Lowered as
// the next session has its own word on each (its probe answered, its put under way) or reports
// it, not at its login (a sixtieth re-attack, O60-3).
void set_unanswered_before(int n) noexcept;

// Tests only: called by a discard right after its unlink, while the slot is still registered
// (null in the product).
extern void (*g_discard_hook)() noexcept;

}  // namespace aesxfer::files
