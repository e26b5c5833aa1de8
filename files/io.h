// Plain file I/O both ends share: whole writes that say why they failed, errno as a message.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

struct stat;

namespace aesxfer::files {

// Writes all n bytes (pos < 0: at the file position; else pwrite at pos). Throws proto::Failure
// (status no_space when the disk is full, else io_error; origin local).
void write_full(int fd, const uint8_t* p, size_t n, int64_t pos = -1);

// Appends what is left of the small file open as fd to `out`, stopping at its end or once `out`
// holds more than `cap` bytes (the caller tells a file too long by out.size() > cap). Returns 0,
// or the errno of a failed read. With cap under 64 KiB, out never reallocates, so a secret read
// this way leaves no copy behind in freed memory (the caller wipes out).
int read_small_file(int fd, std::string& out, size_t cap);

// A regular file whose size says nothing of what reading it yields: every file of /proc and sysfs
// (made as they are read; sysfs says 4096 for a 6-byte attribute), and any other that says it is
// empty but yields bytes (a copy sized by st_size, as scp makes, is empty or fails). Reads at most
// one byte with pread: the file position stays where it was.
bool made_when_read(int fd, const struct stat& st);

// "permission denied", "no such file or directory", ... for messages.
std::string errno_text(int err);

// Start-up, before anything is opened (app/main.cpp): records which descriptors below 1024 the
// process was given open, then opens /dev/null on each of 0, 1 and 2 that was closed, as ssh's
// sanitise_stdfd does. Otherwise the first socket becomes descriptor 1, and `recv host:f -`
// with standard output closed wrote the decrypted file into the connection in clear, exit 0
// (a twentieth re-attack, N1).
void note_inherited_descriptors() noexcept;
// Descriptor fd was open when the process started (without note_inherited_descriptors, as in the
// unit tests: whether it is open now). A destination or source that names a descriptor
// (/dev/fd/N, -) is used only then: another is one of this process's own files or sockets.
bool inherited_descriptor(int fd) noexcept;

// Why an existing file that another local user may have put where it was found (a partial file, a
// resume base, a key log, a temporary file to sweep) is not this user's own, or "" when it is:
// owned by the effective user, with exactly one link (a second one would carry the data to a name
// somebody else chose) and none of the mode bits `forbidden` set (S_IWGRP | S_IWOTH, or 077 for
// a file nobody else may read). The one rule behind files::partial_distrust, the client's resume
// base and key log, the kept modes of FileMode and the server's sweeper.
std::string ownership_problem(const struct stat& st, unsigned forbidden);

// "N MiB to receive, M MiB free" when `need` bytes are more than the free space of the file
// system fd is on (statvfs), else "": what a receiver says, before the first byte, of a file
// that cannot fit (the client's gets, the server's puts). In bytes below 10 KiB and in KiB below
// 10 MiB of need; the need rounded up, the free space down. With keep_reserve (the server's puts)
// the need must leave the reserve (reserve_of) free as well, and the text says how much of the
// free space that is: ", R KiB of it kept in reserve" (a thirty-sixth re-attack, B2: a put that
// fit the free space but not the reserve streamed 9 MB before it failed, and a resumed one was
// refused at byte 0 with figures that read as if it fit).
// `copied`: the first bytes of `need` are a copy of a destination made here (recv --resume onto a
// shorter destination), said apart: "N KiB to write, a copy of the C KiB here and R KiB to receive".
std::string space_shortfall(int fd, uint64_t need, bool keep_reserve = false, uint64_t copied = 0);
// The reserve a receiver keeps free on a file system of `size` bytes: 1/64 of it, at most 64 MiB.
uint64_t reserve_of(uint64_t size);
// The writes of one receiver (the server's puts, net/transfer.cpp) into fd's file system, kept out
// of its reserve: take(n) before writing n bytes says why they may not be written ("only N KiB
// left free: ..."), or "". All receivers of the process writing into one file system share one
// allowance, an eighth of the headroom (free space less the reserve) it last reported and at most
// 1/64 of the reserve (other processes writing there have allowances of their own), asked again
// once that is spent or a second has passed: for what no check before the data can judge, a put of
// unknown size (send -), puts that each fit alone and not together, the parts of a ranged put (a
// thirty-fifth re-attack, A-N1 and A-N4: the server's file system filled to its last block; a
// thirty-sixth, A1 and B1: nine puts, each with an eighth of its own, filled it all the same).
// What take() grants is counted as pending until release() (or the destructor) says it is written,
// and every look at the free space subtracts the pending bytes of all writers of the process, so
// that writers granted batches on one look at the same free figure cannot together pass it (a
// fortieth re-attack, A-F1: forty puts did, to 0 bytes free). Writers of other processes are seen
// only through the free figure: each may overshoot by its batch in flight and 1/64 of the reserve.
class SpaceReserve {
 public:
  explicit SpaceReserve(int fd);
  ~SpaceReserve();
  SpaceReserve(const SpaceReserve&) = delete;
  SpaceReserve& operator=(const SpaceReserve&) = delete;
  std::string take(uint64_t n);
  void release();  // what take() granted is written now (or never will be)

 private:
  int fd_;
  dev_t dev_ = 0;
  bool known_ = false;  // fd's device is known (else nothing is judged)
  uint64_t taken_ = 0;  // granted and not yet released
};
// Why nothing more may be made in fd's file system (a file or a directory), or "": its free inodes
// are down to 1/64 of them (at most 65,536), so that no client uses up the last ones with empty
// files (a thirty-sixth re-attack, A3: one send -r of empty files took every inode).
std::string inodes_short(int fd);
// `n` bytes as space_shortfall() writes a figure ("3072 KiB"), rounded down.
std::string size_text(uint64_t n);

}  // namespace aesxfer::files
