#include "files/io.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <bitset>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "files/unique_fd.h"
#include "proto/failure.h"

namespace aesxfer::files {

void write_full(int fd, const uint8_t* p, size_t n, int64_t pos) {
  while (n > 0) {
    ssize_t w = pos < 0 ? ::write(fd, p, n) : ::pwrite(fd, p, n, off_t(pos));
    if (w > 0) {
      p += w;
      n -= size_t(w);
      if (pos >= 0) pos += w;
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && (errno == ENOSPC || errno == EDQUOT)) {
      throw proto::Failure("no space left on device", proto::Status::no_space, errno);
    } else {
      const int e = errno;
      throw proto::Failure(std::string("write error: ") + std::strerror(e), proto::Status::io_error, e);
    }
  }
}

int read_small_file(int fd, std::string& out, size_t cap) {
  constexpr size_t kChunk = 4096;
  if (cap < (64u << 10)) out.reserve(cap + kChunk);  // the most the loop below appends to
  while (out.size() <= cap) {
    const size_t at = out.size();
    out.resize(at + kChunk);
    const ssize_t n = ::read(fd, out.data() + at, kChunk);
    out.resize(at + size_t(n > 0 ? n : 0));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;
  }
  return 0;
}

bool made_when_read(int fd, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return false;
  // sysfs gives its attributes the size of a page (4096) whatever they hold, so its files are
  // made when read at any size (a twentieth re-attack, N4: "file shrank" for /sys/.../mtu); the
  // same for /proc, whatever size it says.
  struct statfs fs {};
  if (::fstatfs(fd, &fs) == 0 && (fs.f_type == SYSFS_MAGIC || fs.f_type == PROC_SUPER_MAGIC)) return true;
  char c;
  return st.st_size == 0 && ::pread(fd, &c, 1, 0) == 1;
}

std::string errno_text(int err) {
  std::string s = std::strerror(err);
  if (!s.empty()) s[0] = char(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

std::string ownership_problem(const struct stat& st, unsigned forbidden) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me)
    return "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(me) +
           ")";
  if (st.st_nlink != 1)
    return "has " + std::to_string(st.st_nlink) + " links (another name would receive the data)";
  if (const unsigned bits = st.st_mode & forbidden & 0777) {
    const bool r = bits & 044, w = bits & 022;
    const char* what = r && w ? "readable and writable" : r ? "readable" : w ? "writable" : "open";
    char m[8];
    std::snprintf(m, sizeof m, "%04o", unsigned(st.st_mode & 07777));
    return std::string(what) + " by group or others (mode " + m + ")";
  }
  return "";
}

namespace {
constexpr int kNotedFds = 1024;
bool g_noted = false;
std::bitset<kNotedFds> g_inherited;
}  // namespace

void note_inherited_descriptors() noexcept {
  for (int fd = 0; fd < kNotedFds; ++fd)
    if (::fcntl(fd, F_GETFD) >= 0) g_inherited.set(size_t(fd));
  g_noted = true;
  for (int fd = 0; fd <= 2; ++fd) {
    if (g_inherited.test(size_t(fd))) continue;
    UniqueFd null(::open("/dev/null", O_RDWR));  // the lowest free number: fd itself, kept
    if (null.get() == fd)
      (void)null.release();
    else if (null)
      ::dup2(null.get(), fd);
  }
}

bool inherited_descriptor(int fd) noexcept {
  if (fd < 0) return false;
  if (!g_noted) return ::fcntl(fd, F_GETFD) >= 0;
  return fd < kNotedFds && g_inherited.test(size_t(fd));
}

namespace {
// Bytes of fd's file system free to this user (statvfs f_bavail), and its size; nullopt when
// fstatvfs fails (nothing is judged then).
std::optional<uint64_t> free_space(int fd, uint64_t* size = nullptr) {
  struct statvfs vfs {};
  if (::fstatvfs(fd, &vfs) != 0) return std::nullopt;
  if (size) *size = uint64_t(vfs.f_blocks) * vfs.f_frsize;
  return uint64_t(vfs.f_bavail) * vfs.f_frsize;
}

// The unit of a figure of `n` bytes: bytes below 10 KiB, KiB below 10 MiB, else MiB (its shift).
int unit_shift(uint64_t n) { return n < (uint64_t(10) << 10) ? 0 : n < (uint64_t(10) << 20) ? 10 : 20; }
const char* unit_name(int shift) { return shift == 0 ? " bytes" : shift == 10 ? " KiB" : " MiB"; }
// `n` of the unit of `shift`, "1 byte" for one (a thirty-sixth re-attack, B11: "1 bytes to receive").
std::string figure(uint64_t n, int shift) {
  return std::to_string(n) + (shift == 0 && n == 1 ? " byte" : unit_name(shift));
}
}  // namespace

uint64_t reserve_of(uint64_t size) { return std::min(uint64_t(64) << 20, size / 64); }

namespace {
// What this process's writers into one file system may still write before it is asked again
// (SpaceReserve): an eighth of the headroom it last reported, for at most kAllowanceLife. One per
// device, shared: nine puts writing at once each took an eighth of their own, and together went
// past the reserve to the last block (a thirty-sixth re-attack, A1 and B1); one that had asked when
// the disk was emptier kept its allowance while another program filled it (A1, C).
struct Allowance {
  uint64_t bytes = 0;
  std::chrono::steady_clock::time_point asked{};
  // Granted to writers (take) and not yet written (released): not in the free figure yet. Forty
  // puts, each granted a batch larger than the allowance on one look at the same free figure,
  // took the file system to 0 bytes free (a fortieth re-attack, A-F1).
  uint64_t pending = 0;
};
constexpr auto kAllowanceLife = std::chrono::seconds(1);
std::mutex g_allowances_mu;
std::map<dev_t, Allowance> g_allowances;  // under g_allowances_mu; one entry per file system written
}  // namespace

SpaceReserve::SpaceReserve(int fd) : fd_(fd) {
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0) {
    dev_ = st.st_dev;
    known_ = true;
  }
}

SpaceReserve::~SpaceReserve() { release(); }

std::string SpaceReserve::take(uint64_t n) {
  if (!known_) return "";
  const auto now = std::chrono::steady_clock::now();
  const std::lock_guard<std::mutex> lock(g_allowances_mu);
  Allowance& a = g_allowances[dev_];
  if (n <= a.bytes && now - a.asked < kAllowanceLife) {
    a.bytes -= n;
    a.pending += n;
    taken_ += n;
    return "";
  }
  a.bytes = 0;
  a.asked = now;
  uint64_t size = 0;
  const std::optional<uint64_t> free = free_space(fd_, &size);
  if (!free) return "";
  const uint64_t reserve = reserve_of(size);
  const uint64_t room = *free - std::min(*free, a.pending);  // less what is granted and not yet written
  if (room < reserve + n)
    return "only " + size_text(*free) + " left free" +
           (a.pending ? ", " + size_text(*free - room) + " of it taken by writes in progress"
                      : std::string()) +
           ": a transfer stops before the file system is full";
  // At most 1/64 of the reserve between two asks: other processes (servers of other trust
  // domains, sharing the file system) take their own allowances, which no lock here can see; ten
  // servers with an eighth each went 700 KiB into an 875 KiB reserve (a thirty-ninth re-attack,
  // A-F2). Each writer now overshoots by 1/64 of the reserve at most: 64 writing at once to
  // spend it.
  a.bytes = std::min((room - reserve - n) / 8, reserve / 64);
  a.pending += n;
  taken_ += n;
  return "";
}

void SpaceReserve::release() {
  if (!taken_) return;
  const std::lock_guard<std::mutex> lock(g_allowances_mu);
  Allowance& a = g_allowances[dev_];
  a.pending -= std::min(a.pending, taken_);
  taken_ = 0;
}

std::string inodes_short(int fd) {
  struct statvfs vfs {};
  if (::fstatvfs(fd, &vfs) != 0 || vfs.f_files == 0) return "";  // no inode count (btrfs, ...)
  const uint64_t reserve = std::min<uint64_t>(65536, (uint64_t(vfs.f_files) + 63) / 64);
  if (uint64_t(vfs.f_favail) > reserve) return "";
  return "only " + std::to_string(vfs.f_favail) + " of " + std::to_string(vfs.f_files) +
         " inodes left free: no file or directory is made in the last 1/64 of them";
}

std::string size_text(uint64_t n) {
  const int shift = unit_shift(n);
  return figure(n >> shift, shift);
}

std::string space_shortfall(int fd, uint64_t need, bool keep_reserve, uint64_t copied) {
  uint64_t size = 0;
  const uint64_t free = free_space(fd, &size).value_or(UINT64_MAX);
  const uint64_t reserve = keep_reserve && free != UINT64_MAX ? reserve_of(size) : 0;
  if (need <= free && free - need >= reserve) return "";
  // One unit for both, chosen by the need; the need rounded up and the free space down, so that
  // the figures never read as if the file fit (a thirty-fourth re-attack, A-N5: "1 MiB to
  // receive, 1 MiB free" for 2,000,000 bytes).
  const int shift = unit_shift(need);
  const uint64_t up = (need >> shift) + ((need & ((uint64_t(1) << shift) - 1)) != 0);
  // A copy of the destination made here comes first: said apart from what is to receive (a
  // thirty-fifth re-attack, B-N8: "3072 KiB to receive" where 977 KiB were to come).
  std::string text = figure(up, shift) +
                     (copied ? " to write, a copy of the " + size_text(copied) + " here and " +
                                   size_text(need - std::min(need, copied)) + " to receive, "
                             : std::string(" to receive, ")) +
                     figure(free >> shift, shift) + " free";
  // The reserve stated, in the same unit (a thirty-sixth re-attack, B2); all the free space when
  // it is below the reserve, which "0 bytes of it" hid (a thirty-seventh).
  const std::string kept = figure((reserve + (uint64_t(1) << shift) - 1) >> shift, shift);
  if (reserve && reserve <= free) text += ", " + kept + " of it kept in reserve";
  if (reserve > free) text += ", below the " + kept + " kept in reserve";
  return text;
}

}  // namespace aesxfer::files
