#include "files/io.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

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

std::string errno_text(int err) {
  std::string s = std::strerror(err);
  if (!s.empty()) s[0] = char(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace aesxfer::files
