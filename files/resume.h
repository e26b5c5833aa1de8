// Resumable transfers (--resume): a partial file the receiver keeps under a deterministic
// name, and the keyed hash both ends compute over a prefix to agree on where to restart. The
// stream itself is net/transfer.cpp's with a starting offset (StreamOptions::offset); the prefix
// is fed to the file checksum so the end record still covers the whole file. See
// docs/PROTOCOL.md, "Resume".
#pragma once
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "crypto/checksum.h"
#include "files/atomic_file.h"
#include "files/unique_fd.h"
#include "files/version.h"
#include "proto/handshake.h"

namespace aesxfer::files {

// K_resume = HMAC-SHA256(key = K_c2s enc (32 bytes), "aesxfer-v1 resume" || TH2).
std::array<uint8_t, 32> resume_key(const proto::SessionKeys& keys);
// HMAC-SHA256(K_resume, u64 len || the first len bytes of fd) (read with pread); throws Failure
// when fd has fewer than len bytes. `tick`, when given, runs after every MiB (a client uses it to
// keep the session alive while it hashes a large file).
std::string prefix_mac(const proto::SessionKeys& keys, int fd, uint64_t len,
                       const std::function<void()>& tick = nullptr);

// Feeds the first len bytes of fd into h (pread). Throws Failure.
void hash_prefix(crypto::FileChecksum& h, int fd, uint64_t len);
// The lseek calls (SEEK_DATA, SEEK_HOLE) made to find a file's holes (Regions), counted for the
// tests: a pass asks once per data region or hole, never per MiB (a fifty-fourth re-attack, A54-1).
extern std::atomic<uint64_t> g_prefix_seeks;
// Where the data region at `pos` ends (SEEK_HOLE): `pos` itself when it is (now) in a hole, the
// file's end when no hole follows, UINT64_MAX when the file system cannot tell.
uint64_t hole_from(int fd, uint64_t pos);

// Where a file's data and holes lie, looked up once per region as a reader moves forward: a hole's
// bytes are zeros a reader makes in memory, never reads (reading a hole makes the kernel allocate
// and zero a page-cache page for each of its pages: A53-1 for hashing, A55-3 for a get). A
// descriptor that cannot seek is all data.
class Regions {
 public:
  // The lookups move the descriptor's offset: the caller reads with pread, and puts the offset
  // back once when it must. page: the size below which a hole is read as data (the memory page;
  // tests give others).
  explicit Regions(int fd, uint64_t page = 4096) : fd_(fd), page_(page) {}
  // How many of the n bytes at pos share pos's kind (at least 1 when n > 0), and whether they are
  // a hole. A hole shorter than a page is data here, and a region of data ends at a page's end:
  // on a file system of 1 KiB blocks, another user's file of 1 KiB pieces of data and holes cost
  // a lookup for each, ten times the CPU of a dense file (a fifty-sixth re-attack, A56-4), while a
  // page holding some data is read whole anyway.
  size_t at(uint64_t pos, size_t n, bool& hole);

 private:
  int fd_;
  uint64_t page_;
  int seekable_ = -1;  // unknown, no (a pipe: all data), yes
  uint64_t end_ = 0;   // where the region of the last lookup ends
  bool hole_ = false;
};

// One pass over the first len bytes of fd: the keyed prefix digest (prefix_mac) and the file
// checksum's state after them (the session's algorithm) (StreamOptions::prefix_hash), so that nothing is left
// to read once the server has answered. copy_to >= 0 also receives the bytes (pwrite, same offsets). tick as
// for prefix_mac. Throws Failure.
struct PrefixScan {
  std::string mac;
  crypto::FileChecksum sum;
};
PrefixScan scan_prefix(const proto::SessionKeys& keys, int fd, uint64_t len, int copy_to,
                       const std::function<void()>& tick);

// Copies the first len bytes of `from` to the same offsets of `to`. Throws Failure (the source
// shorter than len, or a write error). With `hashed` (the source's state before its prefix was
// hashed), also when the source changed since: the copy would not be the bytes the digest and
// the checksum were computed over, and a destination changed between the scan and the copy
// arrived as a mix of both, "verified" (a fifty-first re-attack, A51-1).
void copy_prefix(int from, int to, uint64_t len, const FileVersion* hashed = nullptr);

// StrictModes for a kept partial file (docs/SECURITY.md, "Partial files"): why an existing
// ".NAME.aesxfer-partial" must not be adopted, or "" when it may be. Adopted only when owned by
// the effective user, with one link, and not writable by group or others: another local user
// could have planted such a file (and would read or rewrite what is written into it), and a
// second link would carry the data to a name somebody else chose.
std::string partial_distrust(const struct stat& st);
// After NAME in dirfd was completed by a transfer that did not resume (both ends call it once the
// new NAME is in place): removes ".NAME.aesxfer-partial" when it is this user's adoptable file
// (partial_distrust) and nobody holds its lock. It is a prefix of some earlier NAME, and a later
// --resume would start from it and move the rest where a whole copy already stands (a nineteenth
// re-attack, N6). Another user's file, a file being resumed now, or anything else is left.
void drop_stale_partial(int dirfd, const std::string& name) noexcept;
// The one adoption rule of both ends (the client's PartialFile, the server's KeptPartial and its
// probe): why the partial file `pname` in directory `dirfd` is passed over, given how opening it
// (O_NOFOLLOW) went: `fd` the descriptor it gave, or -1 with `open_errno`. Either what stands there
// and is not a file ("a directory", "a FIFO", "a symbolic link", "a socket", "not a regular file"),
// partial_distrust()'s reason, or "permission denied" for a file this user may not open. "" when
// it may be adopted, or when the open failed for a reason that says nothing of a file there (no
// such file; the caller reports that error).
std::string partial_unfit(int dirfd, const std::string& pname, int fd, int open_errno);

// How taking a partial file's lock went (lock_partial).
enum class PartialLock { held, busy, moved };
// Takes the lock of `fd`, opened as `pname` in dirfd, without waiting: busy when another transfer
// holds it; moved when it was taken but `pname` no longer names that file (the transfer it was
// taken from renamed it into place, or drop_stale_partial removed it, between this open and the
// lock): the caller opens the name again, never writes the file it holds (a twenty-second
// re-attack, N2: two sessions wrote one inode, and an ok put left an empty destination).
PartialLock lock_partial(int dirfd, const std::string& pname, int fd) noexcept;
// The one way both ends open a partial file to write it (the client's PartialFile, the server's
// KeptPartial): `pname` in dirfd, created 0600 without following a link, adopted only when
// partial_unfit() finds nothing against it, and locked by lock_partial(), opened again when its
// name moved on. Exactly one outcome: fd (locked), unfit (why it is passed over), busy (another
// transfer holds it), or err (the errno of a failed open).
struct OpenedPartial {
  UniqueFd fd;
  std::string unfit;
  bool busy = false;
  int err = 0;
};
OpenedPartial open_partial(int dirfd, const std::string& pname, int extra_flags = 0);
// Closes fd (reporting what close reports: write errors surface there on NFS) while a duplicate
// still holds its flock, then renames `from` over `to` in dirfd and lets the lock go: the name is
// never free for another transfer to lock and truncate between the close and the rename. Returns
// 0, or the errno of the close (nothing renamed) or of the rename, with *closed saying which.
int close_and_rename_locked(UniqueFd& fd, int dirfd, const std::string& from, const std::string& to,
                            bool* closed);

// "<dir>/.<name>.aesxfer-partial" (hidden_name: never over NAME_MAX): the receiver's file for a put with the
// resume flag. Kept when the transfer breaks (the destructor closes it without removing it); renamed into
// place by commit(). Opened without following symlinks and locked (flock) so two sessions cannot write the
// same partial file; an existing one that partial_distrust() rejects is refused, never written.
class PartialFile {
 public:
  // Throws Failure (busy when another session holds it; permission when partial_distrust refuses it).
  explicit PartialFile(const std::filesystem::path& dest);
  // `name` inside the directory open as `dirfd` (openat, O_NOFOLLOW); `shown` for messages.
  PartialFile(int dirfd, const std::string& name, const std::filesystem::path& shown);
  ~PartialFile();
  PartialFile(const PartialFile&) = delete;
  PartialFile& operator=(const PartialFile&) = delete;

  static std::filesystem::path partial_path(const std::filesystem::path& dest);
  int fd() const { return fd_.get(); }
  uint64_t length() const;
  // Keeps the first n bytes and positions the descriptor there for appending.
  void truncate_to(uint64_t n);
  void commit(FileMode mode, long long mtime);
  void discard() noexcept;  // removes the partial file (its contents are known bad)
  // It holds only a copy of the destination being made: removed, not kept, on a signal (mark_copying).
  void copying(bool on) noexcept { mark_copying(slot_, on); }

 private:
  void open(const std::string& name);
  std::filesystem::path dest_, path_;  // as messages name them: made printable once, here
  std::string said_;                   // the partial file as the Ctrl-C line names it: proto::quoted
  std::string name_, pname_;           // inside dirfd_
  UniqueFd dirfd_;
  UniqueFd fd_;
  int slot_ = -1;  // signal handler registration (kept, named)
};

// Process umask, read from /proc/self/status (umask(2) cannot be read without changing it).
unsigned current_umask();
// The mode and mtime a receiver applies: with preserve, exactly what the sender said; without,
// the mode of the file it replaces, or for a new file mode & ~umask, and the time of arrival
// (-1), as scp does. The setuid and setgid bits are never applied, in either direction.
FileMode effective_mode(unsigned mode, bool preserve);
// What a server stores (protocol 5): effective_mode with the owner's read bit added, so that a file
// sent as 0000 (or 0200) stays one the server can serve and hash for a resume (a twelfth
// re-attack, G9). A file it replaces without -p still keeps that file's mode.
FileMode stored_mode(unsigned mode, bool preserve);
// mtime with -p, else kNoMtime (files/atomic_file.h).
long long effective_mtime(long long mtime, bool preserve);

}  // namespace aesxfer::files
