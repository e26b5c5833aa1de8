// The mapped window and its SIGBUS handler (see file_window.h).
#include "files/file_window.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <string>

#include "files/io.h"
#include "proto/failure.h"

namespace aesxfer::files {

namespace {

// This thread's window, as the SIGBUS handler sees it (written only by the thread itself).
struct Registered {
  uint8_t* base;
  size_t len;
  volatile sig_atomic_t shrank;
};
thread_local Registered t_window{nullptr, 0, 0};

struct sigaction g_previous;
std::once_flag g_installed;
uintptr_t g_page = 4096;

void on_sigbus(int sig, siginfo_t* si, void* ctx) {
  const int saved = errno;
  Registered& w = t_window;
  const auto a = reinterpret_cast<uintptr_t>(si->si_addr);
  const auto lo = reinterpret_cast<uintptr_t>(w.base);
  if (w.base && a >= lo && a < lo + w.len) {
    // The file ended before the window did: zeros from the faulting page to the window's end.
    const uintptr_t page = a & ~(g_page - 1);
    if (::mmap(reinterpret_cast<void*>(page), lo + w.len - page, PROT_READ,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      w.shrank = 1;
      errno = saved;
      return;
    }
  }
  // Not a window's fault: what would have happened without this handler.
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(sig, si, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    ::signal(sig, SIG_DFL);              // a fault recurs on return and kills the process
    if (si->si_code <= 0) ::raise(sig);  // sent by kill(): deliver it again
  }
  errno = saved;
}

void install() {
  g_page = uintptr_t(::sysconf(_SC_PAGESIZE));
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGBUS, &sa, &g_previous) != 0)
    throw proto::Failure(std::string("cannot install the SIGBUS handler: ") + errno_text(errno));
}

}  // namespace

FileWindow::FileWindow() {
  std::call_once(g_installed, install);
  t_window.shrank = 0;
}

FileWindow::~FileWindow() { unmap(); }

bool FileWindow::mappable(int fd) {
  struct stat st {};
  return fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

void FileWindow::unmap() {
  if (!base_) return;
  t_window.base = nullptr;
  t_window.len = 0;
  ::munmap(base_, len_);
  base_ = nullptr;
  len_ = 0;
}

const uint8_t* FileWindow::at(int fd, uint64_t pos, size_t len, size_t span) {
  if (base_ && pos >= off_ && pos + len <= off_ + len_) return base_ + (pos - off_);
  unmap();
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw proto::Failure(std::string("read error: ") + errno_text(errno));
  if (uint64_t(st.st_size) < pos + len)
    throw proto::Failure("file shrank while being sent (" + std::to_string(st.st_size) + " bytes left, " +
                         std::to_string(pos + len) + " needed)");
  const uint64_t off = pos & ~uint64_t(g_page - 1);
  const size_t want =
      size_t(std::min<uint64_t>(uint64_t(st.st_size) - off, std::max<uint64_t>(span, pos + len - off)));
  void* p = ::mmap(nullptr, want, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, off_t(off));
  if (p == MAP_FAILED) throw proto::Failure(std::string("cannot map the file: ") + errno_text(errno));
  base_ = static_cast<uint8_t*>(p);
  off_ = off;
  len_ = want;
  t_window.base = base_;
  t_window.len = len_;
  return base_ + (pos - off_);
}

bool FileWindow::shrank() const { return t_window.shrank != 0; }

}  // namespace aesxfer::files
