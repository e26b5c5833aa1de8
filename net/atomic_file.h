// A destination file that appears only when complete: data goes to a temporary file beside the
// destination ("<dir>/.<name>.aesxfer-XXXXXX"), renamed into place by commit(); destroyed
// without commit(), the temporary file is removed and an existing destination is untouched.
#pragma once
#include <filesystem>
#include <string>

namespace aesxfer::net {

class AtomicFile {
 public:
  // Throws Failure when the temporary file cannot be created (the message says why).
  explicit AtomicFile(const std::filesystem::path& dest);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  int fd() const { return fd_; }
  const std::filesystem::path& temp_path() const { return tmp_; }
  // Sets mode (and mtime when >= 0), closes and renames over the destination.
  void commit(unsigned mode, long long mtime = -1);
  void discard() noexcept;

 private:
  std::filesystem::path dest_, tmp_;
  int fd_ = -1;
};

// "permission denied", "no such file or directory", ... for messages.
std::string errno_text(int err);

// Sets the permission bits of fd's file, and its modification (and access) time when mtime >= 0.
// Best effort, as scp -p: a file system that refuses either keeps its own.
void apply_mode_mtime(int fd, unsigned mode, long long mtime) noexcept;

}  // namespace aesxfer::net
