#include "client/tree_resume.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "crypto/util.h"
#include "files/atomic_file.h"
#include "files/unique_fd.h"
#include "proto/failure.h"

namespace aesxfer::client {

using files::UniqueFd;

namespace {

constexpr size_t kMaxRecords = 1000;
constexpr size_t kMaxRecordBytes = size_t(1) << 20;  // what read_records reads of the file
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
  std::string text(size_t(std::min<off_t>(st.st_size, off_t(kMaxRecordBytes))), '\0');
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

// Stores the record `mine` in home/tree_copies in place of every record that starts with `key`.
void store_record(const std::filesystem::path& home, const std::string& mine, const std::string& key) {
  // Read, changed and written whole under a lock: two recv -r ending at once each wrote what it
  // read, and one record was lost (a sixteenth re-attack, L5). Best effort: a lock not had within
  // 2 s (another user's lock file in a shared home, say) is gone without.
  files::UniqueFd lock(::open((home / (std::string(kRecordFile) + ".lock")).c_str(),
                              O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600));
  for (int i = 0; lock && i < 200 && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::vector<std::string> keep;
  for (auto& r : read_records(home))
    if (r.compare(0, key.size(), key) != 0) keep.push_back(std::move(r));  // an old record of the same key
  if (keep.size() >= kMaxRecords) keep.erase(keep.begin(), keep.end() - (kMaxRecords - 1));
  // The oldest go first too when the file would hold more than is read back: records of long
  // paths (about 8 KB each) filled the first MiB, and the newest were written past it, where no
  // --resume found them (a fifty-sixth re-attack, B56-5).
  size_t bytes = mine.size() + 1, drop = 0;
  for (const auto& r : keep) bytes += r.size() + 1;
  while (bytes > kMaxRecordBytes && drop < keep.size()) bytes -= keep[drop++].size() + 1;
  keep.erase(keep.begin(), keep.begin() + long(drop));
  keep.push_back(mine);
  std::string text;
  for (const auto& r : keep) text += r + "\n";
  // Best effort: without the record, a later --resume of this tree nests a copy instead of
  // continuing this one, which loses nothing.
  try {
    files::AtomicFile out(home / kRecordFile, files::AtomicFile::Bookkeeping::yes);
    files::write_full(out.fd(), reinterpret_cast<const uint8_t*>(text.data()), text.size());
    out.commit(0600);
  } catch (const proto::Failure&) {
  }
}

bool has_record(const std::filesystem::path& home, const std::string& mine) {
  if (home.empty() || mine.empty()) return false;
  for (const auto& r : read_records(home))
    if (r == mine) return true;
  return false;
}

// send -r: "sent FINGERPRINT:DEST\tID\tLOCAL" (ID the directory's identity in hex), or "" for a
// name that cannot be one line of it or no identity. A record of recv -r starts with a digit, so
// the two never match; one of 0.6.0 (no ID) matches none.
std::string sent_record(const std::string& fingerprint, const std::string& dest, const std::string& dir_id,
                        const std::string& local) {
  if (dest.find_first_of("\t\n") != std::string::npos || local.find('\n') != std::string::npos ||
      dir_id.empty())
    return "";
  return "sent " + fingerprint + ":" + dest + "\t" + crypto::to_hex(dir_id.data(), dir_id.size()) + "\t" +
         local;
}

}  // namespace

void remember_tree_copy(const std::filesystem::path& home, int dirfd, const std::string& source) {
  if (home.empty() || source.find('\n') != std::string::npos) return;
  const std::string mine = record_of(dirfd, source);
  if (mine.empty()) return;
  store_record(home, mine, mine.substr(0, mine.find(' ', mine.find(' ') + 1) + 1));  // "dev ino "
}

bool is_tree_copy(const std::filesystem::path& home, int dirfd, const std::string& source) {
  return has_record(home, record_of(dirfd, source));
}

void remember_sent_copy(const std::filesystem::path& home, const std::string& fingerprint,
                        const std::string& dest, const std::string& dir_id, const std::string& local) {
  const std::string mine = sent_record(fingerprint, dest, dir_id, local);
  if (home.empty() || mine.empty()) return;
  store_record(home, mine, mine.substr(0, mine.find('\t') + 1));
}

bool is_sent_copy(const std::filesystem::path& home, const std::string& fingerprint, const std::string& dest,
                  const std::string& dir_id, const std::string& local) {
  return has_record(home, sent_record(fingerprint, dest, dir_id, local));
}

}  // namespace aesxfer::client
