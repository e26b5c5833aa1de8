#include "server/sweep.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <vector>

#include "files/atomic_file.h"
#include "files/io.h"
#include "files/unique_fd.h"
#include "proto/failure.h"
#include "server/log_value.h"

namespace aesxfer::server {

namespace fs = std::filesystem;

namespace {
constexpr auto kInterval = std::chrono::minutes(10);
// About 5 MiB at most. When it is full, the entries past the interval go, else the oldest: a client
// that probed into 4,096 other directories emptied the whole memory, and its next probe read a
// directory of 200,000 names again 3 s after the last time (a thirty-third re-attack, A-N1). Now
// it must make and probe 65,536 directories for one extra sweep of another.
constexpr size_t kMaxRemembered = 65536;

}  // namespace

void Sweeper::maybe_sweep(int dirfd, const std::string& shown,
                          const std::function<void(const std::string&)>& log) {
  struct stat st {};
  if (::fstat(dirfd, &st) != 0) return;
  const Key key(st.st_dev, st.st_ino);
  Span span;
  {
    std::lock_guard<std::mutex> g(mu_);
    const auto now = std::chrono::steady_clock::now();  // under the lock: order_ stays in time order
    auto it = last_.find(key);
    if (it != last_.end() && !it->second.next && now - it->second.when < kInterval) return;
    span.max = names_.take_up_to(chunk_);
    if (span.max == 0) return;  // the allowance is spent: a later request sweeps
    if (it != last_.end()) {
      span.start = it->second.next;
      order_.erase(it->second.at);
      last_.erase(it);
    }
    // Forgets what is past the interval, and past kMaxRemembered the least recently swept.
    while (!order_.empty() &&
           (last_.size() >= kMaxRemembered || now - last_.at(order_.front()).when >= kInterval)) {
      last_.erase(order_.front());
      order_.pop_front();
    }
    order_.push_back(key);
    last_[key] = {now, std::prev(order_.end()), std::nullopt};
  }
  sweep(dirfd, shown, log, &span);
  names_.give_back(span.max - std::min(span.max, span.read));
  if (!span.next) return;
  std::lock_guard<std::mutex> g(mu_);
  if (auto it = last_.find(key); it != last_.end()) it->second.next = span.next;
}

size_t Sweeper::sweep(const fs::path& dir, const std::function<void(const std::string&)>& log) {
  const files::UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  return dfd ? sweep(dfd.get(), dir.string(), log) : 0;
}

size_t Sweeper::sweep(int dirfd, const std::string& shown, const std::function<void(const std::string&)>& log,
                      Span* span) {
  files::UniqueFd owned(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!owned) return 0;
  DIR* d = ::fdopendir(owned.get());
  if (!d) return 0;
  const int dfd = owned.release();  // the DIR owns it now: closedir closes it
  if (span && span->start) ::seekdir(d, *span->start);
  std::vector<std::string> names;
  for (uint64_t read = 0;; ++read) {
    if (span && read >= span->max) {
      span->next = ::telldir(d);
      break;
    }
    const dirent* e = ::readdir(d);
    if (!e) break;
    if (span) span->read = read + 1;
    std::string n = e->d_name;
    if (files::is_reserved_name(n)) names.push_back(n);
  }
  const std::time_t now = std::time(nullptr);
  size_t removed = 0, partials = 0;
  std::string first;  // the first name removed, for the line
  for (const auto& n : names) {
    bool partial = files::is_partial_name(n);
    auto max_age = partial ? partial_max_age_ : temp_max_age_;
    if (max_age.count() <= 0) continue;
    struct stat st {};
    if (::fstatat(dfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (now - st.st_mtim.tv_sec < max_age.count()) continue;
    // Only a file this server could have left: its own, one link, no group or other permission
    // (temporary and partial files are 0600 until committed). A user's ".db.aesxfer-backup"
    // (0644, or another user's) has the shape of a temporary name, not its marks.
    if (!files::ownership_problem(st, 077).empty()) continue;
    const files::UniqueFd fd(::openat(dfd, n.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd) continue;
    // A file a session holds (a partial file being resumed, a temporary file being written): leave it.
    bool in_use = ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0;
    if (!in_use && ::unlinkat(dfd, n.c_str(), 0) == 0) {
      if (removed++ == 0) first = n;
      partials += partial;
    }
  }
  ::closedir(d);
  // One line per sweep, however many files went: a client that had left 2,000 empty partial
  // files (withdrawn resumed puts, each logged within its key's budget) had the sweep a week
  // later write a line for each, 4.5 KB apiece for a deep path (a forty-second re-attack, A-F3).
  if (removed && log)
    log("msg=\"expired partial and temporary files removed\" dir=" + log_value(shown, kLoggedPath) +
        " partial=" + std::to_string(partials) + " temporary=" + std::to_string(removed - partials) +
        " first=" + log_value(first, kLoggedPath));
  return removed;
}

}  // namespace aesxfer::server
