// A read-only window of a file mapped into memory, for a sender that seals records straight from
// the page cache instead of read()ing them into its record buffer (one copy less per byte).
//
// A mapped file that shrinks under the mapping raises SIGBUS when the missing pages are touched,
// which would kill the whole process (the server, with every session). So this thread's window is
// registered with a SIGBUS handler (installed once): a fault inside it replaces the rest of the
// window by zero pages and sets shrank(), and the faulting instruction resumes on those zeros. The
// caller checks shrank() after it has used the bytes and before anything made from them leaves
// the process, and fails the transfer ("file shrank while being sent"), as read() at end of file
// does. A fault outside any window goes to the handler that was there before (by default the
// process dies, as it would have).
#pragma once
#include <cstddef>
#include <cstdint>

namespace aesxfer::files {

class FileWindow {
 public:
  FileWindow();
  ~FileWindow();
  FileWindow(const FileWindow&) = delete;
  FileWindow& operator=(const FileWindow&) = delete;

  // Whether fd is a regular file this can map (else the caller reads it).
  static bool mappable(int fd);

  // Bytes [pos, pos + len) of fd, mapped when the current window does not hold them: the new
  // window starts at pos rounded down to a page and spans at least `span` bytes (cut at the file's
  // end). The file must hold pos + len bytes now (else Failure "file shrank"). Only the thread
  // that called at() may read the result, and only until the next at() or the destructor.
  const uint8_t* at(int fd, uint64_t pos, size_t len, size_t span);

  // Whether a page of this thread's window was missing (the file shrank) when it was read.
  bool shrank() const;

 private:
  uint8_t* base_ = nullptr;
  uint64_t off_ = 0;  // file offset of base_
  size_t len_ = 0;
  void unmap();
};

}  // namespace aesxfer::files
