// A test helper loaded with LD_PRELOAD into the aesxfer binary: before each renameat(2) of a name
// ending in ".aesxfer-partial" (a resumed transfer moving into place), it opens that name again
// and tries its flock without waiting, and says on standard error whether the lock was still held
// ("rename_probe: held NAME") or free ("rename_probe: free NAME"). Free means another session could
// have locked the file, adopted it and truncated it between the close and the rename (a
// twenty-second re-attack, N2). With AESXFER_RENAME_DELAY_MS set, each rename first waits. Nothing
// else changes. Used by tests/e2e/partial_strict_test.cpp and log_terminal_test.cpp.
// With AESXFER_VANISH_DIR=NAME, the first open of a directory named NAME (openat with
// O_DIRECTORY) finds it gone: moved away to ".vanished", or with AESXFER_VANISH_AS=link replaced
// by a symbolic link, as another user's rmdir or swap between a listing's readdir and its open
// (tests/e2e/listing_test.cpp, A52-1).
// With AESXFER_EXCHANGE_MADE=NAME:OTHER, the first mkdirat(2) that makes a directory named NAME is
// followed at once by an exchange of NAME and OTHER (renameat2 RENAME_EXCHANGE, in the same
// directory), as another member of a shared directory's group can win between the mkdir and the
// open that follows it (tests/e2e/server_modes_test.cpp, M60-2).
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" int renameat(int olddirfd, const char* oldpath, int newdirfd, const char* newpath) {
  static auto real =
      reinterpret_cast<int (*)(int, const char*, int, const char*)>(::dlsym(RTLD_NEXT, "renameat"));
  const size_t n = std::strlen(oldpath);
  static const char suffix[] = ".aesxfer-partial";
  if (n >= sizeof suffix - 1 && std::strcmp(oldpath + n - (sizeof suffix - 1), suffix) == 0) {
    const int fd = ::openat(olddirfd, oldpath, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
      char line[512];
      const int len =
          std::snprintf(line, sizeof line, "rename_probe: %s %s\n", free ? "free" : "held", oldpath);
      if (len > 0) (void)!::write(2, line, size_t(len) < sizeof line ? size_t(len) : sizeof line - 1);
      ::close(fd);  // drops the probe's lock, if it got one
    }
  }
  // AESXFER_RENAME_DELAY_MS: every rename waits that long first, as one over a large file whose
  // blocks are being freed does (tests/e2e/log_terminal_test.cpp, B51-2).
  if (const char* ms = std::getenv("AESXFER_RENAME_DELAY_MS")) ::usleep(useconds_t(std::atoi(ms)) * 1000);
  return real(olddirfd, oldpath, newdirfd, newpath);
}

namespace {

void vanish_first(int dirfd, const char* path, int flags) {
  static bool done = false;
  const char* name = std::getenv("AESXFER_VANISH_DIR");
  if (done || !name || !(flags & O_DIRECTORY) || std::strcmp(path, name) != 0) return;
  done = true;
  static auto real_rename =
      reinterpret_cast<int (*)(int, const char*, int, const char*)>(::dlsym(RTLD_NEXT, "renameat"));
  real_rename(dirfd, path, dirfd, ".vanished");
  if (const char* as = std::getenv("AESXFER_VANISH_AS"); as && std::strcmp(as, "link") == 0)
    (void)!::symlinkat(".vanished", dirfd, path);
}

}  // namespace

extern "C" int openat(int dirfd, const char* path, int flags, ...) {
  static auto real = reinterpret_cast<int (*)(int, const char*, int, ...)>(::dlsym(RTLD_NEXT, "openat"));
  unsigned mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = va_arg(ap, unsigned);
    va_end(ap);
  }
  vanish_first(dirfd, path, flags);
  return real(dirfd, path, flags, mode);
}

extern "C" int __openat_2(int dirfd, const char* path, int flags) {
  static auto real = reinterpret_cast<int (*)(int, const char*, int)>(::dlsym(RTLD_NEXT, "__openat_2"));
  vanish_first(dirfd, path, flags);
  return real(dirfd, path, flags);
}

extern "C" int mkdirat(int dirfd, const char* path, mode_t mode) {
  static auto real = reinterpret_cast<int (*)(int, const char*, mode_t)>(::dlsym(RTLD_NEXT, "mkdirat"));
  const int r = real(dirfd, path, mode);
  static bool done = false;
  const char* spec = std::getenv("AESXFER_EXCHANGE_MADE");
  const char* colon = spec ? std::strchr(spec, ':') : nullptr;
  if (r == 0 && !done && colon && std::strncmp(path, spec, size_t(colon - spec)) == 0 &&
      path[colon - spec] == '\0') {
    done = true;
    (void)::renameat2(dirfd, path, dirfd, colon + 1, RENAME_EXCHANGE);
  }
  return r;
}
