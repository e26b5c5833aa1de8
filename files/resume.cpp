#include "files/resume.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "crypto/util.h"
#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/io.h"
#include "proto/failure.h"

namespace aesxfer::files {

using proto::Failure;

std::atomic<uint64_t> g_prefix_seeks{0};

using proto::RecordType;

std::array<uint8_t, 32> resume_key(const proto::SessionKeys& keys) {
  static const char label[] = "aesxfer-v1 resume";
  crypto::HmacSha256 h(keys.c2s.enc, 32);
  h.begin();
  h.update(label, sizeof label - 1);
  h.update(keys.transcript_hash.data(), keys.transcript_hash.size());
  std::array<uint8_t, 32> k;
  h.finish(k.data());
  return k;
}

namespace {

// Where the data at or after `pos` begins (SEEK_DATA): `pos` when it is data or the file system
// cannot tell, the file's end when only a hole follows. The end is the kernel's (SEEK_END), not
// fstat's: past it the reader reads, and meets the end (a file that shrank while it was sent is
// said to have shrunk, never padded with zeros). The descriptor's offset is the caller's to restore.
uint64_t data_from(int fd, uint64_t pos) {
  ++g_prefix_seeks;
  const off_t d = ::lseek(fd, off_t(pos), SEEK_DATA);
  if (d >= 0) return uint64_t(d);
  if (errno != ENXIO) return pos;  // no SEEK_DATA here
  const off_t end = ::lseek(fd, 0, SEEK_END);
  return end > off_t(pos) ? uint64_t(end) : pos;
}

// Calls f(p, n) over the first len bytes of fd. A hole's zeros come from memory, not from reads:
// reading a hole makes the kernel allocate and zero page-cache pages, 3.9 s of CPU for a GiB of a
// never-read sparse file (0.83 s for cached data), each hashed GiB also pushed into the page cache
// (a fifty-third re-attack, A53-1: another user's `truncate -s 1T` in a shared directory, then a
// resumed get of it at 64 GiB, cost a core about four minutes). Each region's end is looked up
// once: on tmpfs SEEK_HOLE walks the page cache a page at a time to the next hole, and asking
// again every MiB made one pass cost the square of the file's size (a fifty-fourth re-attack,
// A54-1: 1 GiB took 5 to 12 s of CPU, 2 GiB 44 s, against 0.85 s on ext4). Every file is asked,
// however dense fstat says it is: blocks preallocated past the end (fallocate -n) made a sparse
// file look dense, and were freed as soon as the server had looked (a fifty-fifth re-attack,
// A55-2: 3.2 to 4.7 s a GiB and the page cache filled again). One SEEK_HOLE over a dense GiB on
// tmpfs costs about 11 ms. The descriptor's offset is kept.
template <class F>
void read_prefix(int fd, uint64_t len, F&& f) {
  struct KeepOffset {  // put back once, not around each lookup
    int fd;
    off_t at;
    ~KeepOffset() {
      if (at >= 0) ::lseek(fd, at, SEEK_SET);
    }
  } keep{fd, ::lseek(fd, 0, SEEK_CUR)};
  std::vector<uint8_t> buf(size_t(1) << 20);
  std::vector<uint8_t> zeros;  // a hole's bytes, made at the first hole
  Regions regions(fd);
  uint64_t pos = 0;
  while (pos < len) {
    bool hole = false;
    const size_t n = regions.at(pos, size_t(std::min<uint64_t>(buf.size(), len - pos)), hole);
    if (hole) {
      if (zeros.empty()) zeros.assign(buf.size(), 0);
      f(zeros.data(), n);
      pos += n;
      continue;
    }
    ssize_t r = ::pread(fd, buf.data(), n, off_t(pos));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Failure(std::string("read error: ") + std::strerror(errno));
    if (r == 0)
      throw Failure("file shorter than the resume point (" + std::to_string(pos) + " of " +
                    std::to_string(len) + " bytes)");
    f(buf.data(), size_t(r));
    pos += uint64_t(r);
  }
}

}  // namespace

uint64_t hole_from(int fd, uint64_t pos) {
  ++g_prefix_seeks;
  const off_t hole = ::lseek(fd, off_t(pos), SEEK_HOLE);
  // `pos` itself: it became a hole since the data was found there (another process punched it):
  // the region is empty, not "cannot tell", which made the reader read every byte after it, holes
  // and all (a fifty-seventh re-attack, E57-1: 4 KiB punched again and again in a 1 GiB file made
  // one get in twenty read the whole GiB).
  return hole >= 0 ? uint64_t(hole) : UINT64_MAX;
}

size_t Regions::at(uint64_t pos, size_t n, bool& hole) {
  const uint64_t kPage = page_;
  if (pos >= end_) {
    if (seekable_ < 0) seekable_ = ::lseek(fd_, 0, SEEK_CUR) >= 0;
    if (!seekable_) {  // a pipe: all data
      hole_ = false;
      end_ = UINT64_MAX;
    } else {
      const uint64_t data = data_from(fd_, pos);
      hole_ = data - pos >= kPage;
      if (!hole_) {  // data from pos (a hole shorter than a page before it): to the next hole's page,
        // and on through holes shorter than a page, so that the n bytes are one read
        const auto page_end = [&](uint64_t h) {
          return h >= UINT64_MAX - kPage ? h : std::max(pos + 1, (h + kPage - 1) / kPage * kPage);
        };
        end_ = page_end(hole_from(fd_, std::max(pos, data)));
        while (end_ < pos + n) {
          const uint64_t d = data_from(fd_, end_);
          if (d - end_ >= kPage) break;
          const uint64_t next = page_end(hole_from(fd_, std::max(end_, d)));
          if (next <= end_) break;  // punched meanwhile: the next lookup sees it
          end_ = next;
        }
      } else {
        end_ = data;
      }
    }
  }
  hole = hole_;
  return size_t(std::min<uint64_t>(n, end_ - pos));
}

namespace {

// HMAC-SHA256(K_resume, u64 len || ...), fed by the caller.
class PrefixMac {
 public:
  PrefixMac(const proto::SessionKeys& keys, uint64_t len) : h_(key(keys).data(), 32) {
    crypto::secure_zero(k_.data(), k_.size());
    h_.begin();
    uint8_t be[8];
    crypto::store_be64(be, len);
    h_.update(be, 8);
  }
  void update(const uint8_t* p, size_t n) noexcept { h_.update(p, n); }
  std::string finish() {
    uint8_t tag[32];
    h_.finish(tag);
    return std::string(reinterpret_cast<const char*>(tag), 32);
  }

 private:
  std::array<uint8_t, 32> k_{};  // before h_: h_ is keyed from it, then it is wiped
  crypto::HmacSha256 h_;
  const std::array<uint8_t, 32>& key(const proto::SessionKeys& keys) { return k_ = resume_key(keys); }
};

}  // namespace

std::string prefix_mac(const proto::SessionKeys& keys, int fd, uint64_t len,
                       const std::function<void()>& tick) {
  PrefixMac h(keys, len);
  read_prefix(fd, len, [&](const uint8_t* p, size_t n) {
    h.update(p, n);
    if (tick) tick();
  });
  return h.finish();
}

void copy_prefix(int from, int to, uint64_t len, const FileVersion* hashed) {
  uint64_t at = 0;
  read_prefix(from, len, [&](const uint8_t* p, size_t n) {
    write_full(to, p, n, int64_t(at));
    at += n;
  });
  struct stat st {};
  if (hashed && (::fstat(from, &st) != 0 || FileVersion::of(st) != *hashed))
    throw Failure("the destination changed while its prefix was read for --resume; nothing of it is kept",
                  proto::Status::io_error);
}

void hash_prefix(crypto::FileChecksum& hash, int fd, uint64_t len) {
  read_prefix(fd, len, [&](const uint8_t* p, size_t n) { hash.update(p, n); });
}

PrefixScan scan_prefix(const proto::SessionKeys& keys, int fd, uint64_t len, int copy_to,
                       const std::function<void()>& tick) {
  PrefixScan out{{}, crypto::FileChecksum(keys.checksum)};
  PrefixMac h(keys, len);
  uint64_t at = 0;
  read_prefix(fd, len, [&](const uint8_t* p, size_t n) {
    h.update(p, n);
    out.sum.update(p, n);
    if (copy_to >= 0) write_full(copy_to, p, n, int64_t(at));
    at += n;
    if (tick) tick();
  });
  out.mac = h.finish();
  return out;
}

namespace {
std::string file_kind(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}
}  // namespace

std::string partial_distrust(const struct stat& st) { return ownership_problem(st, S_IWGRP | S_IWOTH); }

std::string partial_unfit(int dirfd, const std::string& pname, int fd, int open_errno) {
  struct stat st {};
  if (fd >= 0) {
    if (::fstat(fd, &st) != 0) return "cannot be examined: " + errno_text(errno);
    return S_ISREG(st.st_mode) ? partial_distrust(st) : file_kind(st);
  }
  // ELOOP: a link (O_NOFOLLOW); EISDIR: a directory; ENXIO: a socket; EACCES: a file this user may
  // not open (another user's 0600 one) or a directory that refused to create one; EWOULDBLOCK
  // (O_NONBLOCK): a file under another process's lease (F_SETLEASE), which its owner alone may
  // take: another user's planted file held that way made root's recv --resume wait 45 s per open
  // and its send --resume fail as "another transfer is writing this file" (a fifty-fifth
  // re-attack, A55-4). It is passed over as any planted file is.
  if (open_errno != ELOOP && open_errno != EISDIR && open_errno != ENXIO && open_errno != EACCES &&
      open_errno != EWOULDBLOCK)
    return "";
  if (::fstatat(dirfd, pname.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return "";
  if (!S_ISREG(st.st_mode)) return file_kind(st);
  std::string why = partial_distrust(st);
  if (why.empty() && open_errno == EWOULDBLOCK) return "it is held under a lease by another process";
  return why.empty() ? "permission denied" : why;
}

void drop_stale_partial(int dirfd, const std::string& name) noexcept {
  const std::string pname = partial_name(name);
  UniqueFd fd(::openat(dirfd, pname.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {
  }, there{};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !partial_distrust(st).empty()) return;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return;  // a --resume writes it now
  // Still the file examined (not one renamed over it since).
  if (::fstatat(dirfd, pname.c_str(), &there, AT_SYMLINK_NOFOLLOW) != 0 || there.st_dev != st.st_dev ||
      there.st_ino != st.st_ino)
    return;
  ::unlinkat(dirfd, pname.c_str(), 0);
}

PartialLock lock_partial(int dirfd, const std::string& pname, int fd) noexcept {
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return PartialLock::busy;
  struct stat mine {
  }, there{};
  if (::fstat(fd, &mine) != 0 || ::fstatat(dirfd, pname.c_str(), &there, AT_SYMLINK_NOFOLLOW) != 0 ||
      there.st_dev != mine.st_dev || there.st_ino != mine.st_ino)
    return PartialLock::moved;
  return PartialLock::held;
}

OpenedPartial open_partial(int dirfd, const std::string& pname, int extra_flags) {
  OpenedPartial out;
  for (int attempt = 0;; ++attempt) {
    out.fd.reset(
        ::openat(dirfd, pname.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | extra_flags, 0600));
    out.err = errno;
    if (out.unfit = partial_unfit(dirfd, pname, out.fd.get(), out.err); !out.unfit.empty()) {
      out.fd.reset();
      return out;
    }
    if (!out.fd) return out;
    out.err = 0;
    const PartialLock got = lock_partial(dirfd, pname, out.fd.get());
    if (got == PartialLock::held) return out;
    out.fd.reset();
    if (got == PartialLock::busy || attempt == 3) {
      out.busy = true;
      return out;
    }
  }
}

int close_and_rename_locked(UniqueFd& fd, int dirfd, const std::string& from, const std::string& to,
                            bool* closed) {
  *closed = false;
  const UniqueFd lock(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));  // the same open file: its flock
  if (!lock) return errno;
  if (fd.close() != 0) return errno;
  *closed = true;
  return ::renameat(dirfd, from.c_str(), dirfd, to.c_str()) != 0 ? errno : 0;
}

std::filesystem::path PartialFile::partial_path(const std::filesystem::path& dest) {
  std::filesystem::path dir = dest.parent_path();
  if (dir.empty()) dir = ".";
  return dir / partial_name(dest.filename().string());
}

PartialFile::PartialFile(const std::filesystem::path& dest)
    : dest_(proto::printable(dest.string())),
      path_(proto::printable(partial_path(dest).string())),
      said_(proto::quoted(partial_path(dest).string())) {
  std::filesystem::path dir = dest.parent_path();
  if (dir.empty()) dir = ".";
  dirfd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirfd_) throw Failure("cannot open " + path_.string() + ": " + errno_text(errno));
  open(dest.filename().string());
}

PartialFile::PartialFile(int dirfd, const std::string& name, const std::filesystem::path& shown)
    : dest_(proto::printable(shown.string())),
      path_(proto::printable(partial_path(shown).string())),
      said_(proto::quoted(partial_path(shown).string())) {
  dirfd_.reset(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (!dirfd_) throw Failure("cannot open " + path_.string() + ": " + errno_text(errno));
  open(name);
}

void PartialFile::open(const std::string& name) {
  name_ = name;
  pname_ = partial_name(name);
  // Not adopted: thrown with Status::permission and EPERM, on which the caller receives the file
  // from the start without a partial file and says why (Client::fetch).
  const auto passed_over = [&](const std::string& why) {
    fd_.reset();
    return Failure(path_.string() + ": not resuming from this partial file: " + why,
                   proto::Status::permission, EPERM);
  };
  // A destination the final rename could not replace: said now, not after the transfer (a
  // twenty-ninth re-attack, N4). EACCES, not EPERM: no fallback to a plain get, which meets the same.
  if (std::string why = unreplaceable(dirfd_.get(), name); !why.empty())
    throw Failure(dest_.string() + ": " + why, proto::Status::permission, EACCES);
  OpenedPartial p = open_partial(dirfd_.get(), pname_, O_NONBLOCK);  // never waits on a lease (A55-4)
  if (!p.unfit.empty()) throw passed_over(p.unfit);
  if (p.busy)  // named as typed, not by its last component alone (a twenty-ninth re-attack, N6)
    throw Failure(dest_.string() + ": another transfer is writing this file", proto::Status::busy,
                  EWOULDBLOCK);
  if (!p.fd) throw Failure("cannot open " + path_.string() + ": " + errno_text(p.err));
  fd_ = std::move(p.fd);
  slot_ = register_kept(dirfd_.get(), pname_, said_);
}

PartialFile::~PartialFile() {
  // Kept when the transfer broke, unless it holds nothing: an empty one resumes nothing and only
  // litters the directory (a refused get with --resume left one). Removed while still ours (open,
  // locked); after commit() the descriptor is closed and the name is the destination's.
  const bool kept = fd_ && length() > 0;
  if (fd_ && !kept) {
    mark_discarding(slot_);
    ::unlinkat(dirfd_.get(), pname_.c_str(), 0);
  }
  unregister_kept(slot_, kept);
}

uint64_t PartialFile::length() const {
  struct stat st {};
  ::fstat(fd_.get(), &st);
  return uint64_t(st.st_size);
}

void PartialFile::truncate_to(uint64_t n) {
  if (::ftruncate(fd_.get(), off_t(n)) != 0 || ::lseek(fd_.get(), off_t(n), SEEK_SET) < 0)
    throw Failure("cannot prepare " + path_.filename().string() + ": " + errno_text(errno));
}

void PartialFile::commit(FileMode mode, long long mtime) {
  apply_mode_mtime(fd_.get(), mode.resolve(dirfd_.get(), name_), mtime);
  bool closed = false;
  if (int e = close_and_rename_locked(fd_, dirfd_.get(), pname_, name_, &closed); e != 0)
    throw Failure((closed ? "cannot rename into " : "cannot finish writing ") + dest_.string() + ": " +
                  errno_text(e));
  unregister_kept(slot_);
  slot_ = -1;
}

void PartialFile::discard() noexcept {
  mark_discarding(slot_);  // a signal from here on says the file was removed (B52-1)
  if (fd_) ::unlinkat(dirfd_.get(), pname_.c_str(), 0);  // while locked: nobody else's file yet
  if (g_discard_hook && fd_) g_discard_hook();
  fd_.reset();
  unregister_kept(slot_);
  slot_ = -1;
}

unsigned current_umask() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Umask:", 0) == 0) return unsigned(std::stoul(line.substr(6), nullptr, 8)) & 0777;
  return 022;
}

FileMode effective_mode(unsigned mode, bool preserve) {
  // Never setuid or setgid: a peer's bits would hand its choice of program the receiver's
  // identity (docs/SECURITY.md). The sticky bit stays with -p.
  if (preserve) return FileMode(mode & 01777);
  static const unsigned um = current_umask();
  return FileMode(mode & 0777 & ~um, true);
}

FileMode stored_mode(unsigned mode, bool preserve) {
  FileMode m = effective_mode(mode, preserve);
  m.bits |= 0400;
  return m;
}

long long effective_mtime(long long mtime, bool preserve) { return preserve ? mtime : kNoMtime; }

}  // namespace aesxfer::files
