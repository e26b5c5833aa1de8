#include "net/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "net/conn.h"

namespace aesxfer::net {

std::string errno_text(int err) {
  std::string s = std::strerror(err);
  if (!s.empty()) s[0] = char(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

AtomicFile::AtomicFile(const std::filesystem::path& dest) : dest_(dest) {
  std::filesystem::path dir = dest.parent_path();
  if (dir.empty()) dir = ".";
  std::string tmpl = (dir / ("." + dest.filename().string() + ".aesxfer-XXXXXX")).string();
  fd_ = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd_ < 0) throw Failure("cannot create a file in " + dir.string() + ": " + errno_text(errno));
  tmp_ = tmpl;
}

AtomicFile::~AtomicFile() { discard(); }

void apply_mode_mtime(int fd, unsigned mode, long long mtime) noexcept {
  ::fchmod(fd, mode & 07777);
  if (mtime >= 0) {
    timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = mtime;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    ::futimens(fd, ts);
  }
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

void AtomicFile::commit(unsigned mode, long long mtime) {
  apply_mode_mtime(fd_, mode, mtime);
  if (::close(fd_) != 0) {
    int e = errno;
    fd_ = -1;
    throw Failure("cannot finish writing " + dest_.string() + ": " + errno_text(e));
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), dest_.c_str()) != 0)
    throw Failure("cannot rename into " + dest_.string() + ": " + errno_text(errno));
  tmp_.clear();
}

}  // namespace aesxfer::net
