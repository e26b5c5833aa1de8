// A test helper loaded with LD_PRELOAD into the aesxfer binary: fstat(2) of a regular file whose
// name ends in ".liar" reports 4096 bytes more than the file holds, so that the sender meets, every
// time, a file that "shrank" while it was read (the race a real shrinking file only sometimes
// wins). With AESXFER_LIAR_ROOM set, fstatvfs(2) also reports a tebibyte free whatever the file
// system holds, so that a receiver's check of the free space before a file passes and its disk
// fills during the data (the failure the check now prevents, which must still end well). A pread(2)
// of a file whose name ends in ".slow" waits 100 ms first, so that a test can stop the reader in
// the middle (a copy of a destination, recv --resume). Nothing else changes. Used by
// tests/e2e/chaos_test.cpp.
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool named_with(int fd, const char* suffix) {
  char link[64];
  char target[4096];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  const size_t k = std::strlen(suffix);
  if (n <= ssize_t(k)) return false;
  target[n] = '\0';
  return std::strcmp(target + n - k, suffix) == 0;
}
bool liar(int fd) { return named_with(fd, ".liar"); }

template <class Stat>
int lie(int (*real)(int, Stat*), int fd, Stat* st) {
  const int r = real(fd, st);
  if (r == 0 && S_ISREG(st->st_mode) && liar(fd)) st->st_size += 4096;
  return r;
}

template <class Vfs>
int roomy(int (*real)(int, Vfs*), int fd, Vfs* st) {
  const int r = real(fd, st);
  if (r == 0 && std::getenv("AESXFER_LIAR_ROOM") && st->f_frsize) st->f_bavail = (1ull << 40) / st->f_frsize;
  return r;
}

}  // namespace

extern "C" int fstat(int fd, struct stat* st) {
  static auto real = reinterpret_cast<int (*)(int, struct stat*)>(::dlsym(RTLD_NEXT, "fstat"));
  return lie(real, fd, st);
}

extern "C" int fstat64(int fd, struct stat64* st) {
  static auto real = reinterpret_cast<int (*)(int, struct stat64*)>(::dlsym(RTLD_NEXT, "fstat64"));
  return lie(real, fd, st);
}

extern "C" int fstatvfs(int fd, struct statvfs* st) {
  static auto real = reinterpret_cast<int (*)(int, struct statvfs*)>(::dlsym(RTLD_NEXT, "fstatvfs"));
  return roomy(real, fd, st);
}

extern "C" int fstatvfs64(int fd, struct statvfs64* st) {
  static auto real = reinterpret_cast<int (*)(int, struct statvfs64*)>(::dlsym(RTLD_NEXT, "fstatvfs64"));
  return roomy(real, fd, st);
}

extern "C" ssize_t pread(int fd, void* buf, size_t n, off_t pos) {
  static auto real = reinterpret_cast<ssize_t (*)(int, void*, size_t, off_t)>(::dlsym(RTLD_NEXT, "pread"));
  if (named_with(fd, ".slow")) ::usleep(100000);
  return real(fd, buf, n, pos);
}

extern "C" ssize_t pread64(int fd, void* buf, size_t n, off64_t pos) {
  static auto real =
      reinterpret_cast<ssize_t (*)(int, void*, size_t, off64_t)>(::dlsym(RTLD_NEXT, "pread64"));
  if (named_with(fd, ".slow")) ::usleep(100000);
  return real(fd, buf, n, pos);
}
