#include "client/tree_resume.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "files/atomic_file.h"
#include "files/unique_fd.h"
#include "proto/failure.h"

namespace aesxfer::client {

using files::UniqueFd;

namespace {

// What an entry of the destination stands for: a name, "" for a receiver's own file that says
// nothing (a temporary file, a partial file whose name was shortened with a hash).
std::string stands_for(const std::string& name) {
  if (files::is_partial_name(name)) {
    std::string x = name.substr(1, name.size() - 1 - std::strlen(files::kPartialSuffix));
    return x.find('~') == std::string::npos ? x : std::string();  // a shortened name: unknown
  }
  return files::is_temp_name(name) ? std::string() : name;
}

}  // namespace

bool is_copy_of(const std::vector<std::string>& there, const std::set<std::string>& source) {
  bool any = false;
  for (const auto& name : there) {
    if (name.empty()) continue;
    const std::string x = stands_for(name);
    if (x.empty()) continue;
    if (!source.count(x)) return false;
    any = true;
  }
  return any;
}

namespace {

constexpr size_t kMaxRecords = 1000;
constexpr const char* kRecordFile = "tree_copies";

// "dev ino btime source" of the directory open as dirfd, or "" when the file system does not
// keep birth times: an inode number alone is given again to the next directory made after a
// removal (a fourth re-attack made `rm -r dl; mkdir work` "the copy" that way), its birth time is
// not.
std::string record_of(int dirfd, const std::string& source) {
  struct statx sx {};
  if (::statx(dirfd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &sx) != 0 || !(sx.stx_mask & STATX_BTIME))
    return "";
  return std::to_string((uint64_t(sx.stx_dev_major) << 32) | sx.stx_dev_minor) + " " +
         std::to_string(sx.stx_ino) + " " + std::to_string(sx.stx_btime.tv_sec) + "." +
         std::to_string(sx.stx_btime.tv_nsec) + " " + source;
}

// The records of home/tree_copies (at most 1 MiB of it is read): the file of this user only.
std::vector<std::string> read_records(const std::filesystem::path& home) {
  std::vector<std::string> out;
  const UniqueFd fd(::open((home / kRecordFile).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 022))
    return out;
  std::string text(size_t(std::min<off_t>(st.st_size, 1 << 20)), '\0');
  const ssize_t n = ::pread(fd.get(), text.data(), text.size(), 0);
  text.resize(n > 0 ? size_t(n) : 0);
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;  // a line cut short is no record
    out.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return out;
}

}  // namespace

void remember_tree_copy(const std::filesystem::path& home, int dirfd, const std::string& source) {
  if (home.empty() || source.find('\n') != std::string::npos) return;
  const std::string mine = record_of(dirfd, source);
  if (mine.empty()) return;
  const std::string inode = mine.substr(0, mine.find(' ', mine.find(' ') + 1) + 1);  // "dev ino "
  // Read, changed and written whole under a lock: two recv -r ending at once each wrote what it
  // read, and one record was lost (a sixteenth re-attack, L5). Best effort: a lock not had within
  // 2 s (another user's lock file in a shared home, say) is gone without.
  files::UniqueFd lock(::open((home / (std::string(kRecordFile) + ".lock")).c_str(),
                              O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
  for (int i = 0; lock && i < 200 && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::vector<std::string> keep;
  for (auto& r : read_records(home))
    if (r.compare(0, inode.size(), inode) != 0) keep.push_back(std::move(r));  // an old directory's inode
  if (keep.size() >= kMaxRecords) keep.erase(keep.begin(), keep.end() - (kMaxRecords - 1));
  keep.push_back(mine);
  std::string text;
  for (const auto& r : keep) text += r + "\n";
  // Best effort: without the record, a later --resume of this tree nests a copy instead of
  // continuing this one, which loses nothing.
  try {
    files::AtomicFile out(home / kRecordFile);
    files::write_full(out.fd(), reinterpret_cast<const uint8_t*>(text.data()), text.size());
    out.commit(0600);
  } catch (const proto::Failure&) {
  }
}

bool is_tree_copy(const std::filesystem::path& home, int dirfd, const std::string& source) {
  if (home.empty()) return false;
  const std::string mine = record_of(dirfd, source);
  if (mine.empty()) return false;
  for (const auto& r : read_records(home))
    if (r == mine) return true;
  return false;
}

std::vector<std::string> top_names(const std::vector<std::string>& there) {
  std::vector<std::string> out;
  for (const auto& p : there)
    if (p.find('/') == std::string::npos) out.push_back(p);
  return out;
}

}  // namespace aesxfer::client
