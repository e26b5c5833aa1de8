#include "server/task_limit.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace aesxfer::server {

namespace {

std::optional<uint64_t> read_pids_max(const std::filesystem::path& file) {
  std::ifstream f(file);
  std::string word;
  if (!(f >> word) || word.empty() || word.size() > 18 ||
      word.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;  // "max", absent or unreadable: no limit here
  return std::stoull(word);
}

void tighten(std::optional<TaskLimit>& best, uint64_t max, const std::string& what) {
  if (!best || max < best->max) best = TaskLimit{max, what};
}

}  // namespace

std::optional<TaskLimit> cgroup_task_limit(const std::string& proc_self_cgroup,
                                           const std::filesystem::path& sysfs) {
  std::optional<TaskLimit> best;
  std::istringstream in(proc_self_cgroup);
  for (std::string line; std::getline(in, line);) {
    // "hierarchy-ID:controller-list:cgroup-path"; v2 is "0::/path"
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.empty() || path[0] != '/' || path.find("/..") != std::string::npos) continue;
    std::vector<std::filesystem::path> bases;
    if (controllers.empty() && line.compare(0, a, "0") == 0) {
      bases = {sysfs, sysfs / "unified"};
    } else {
      std::istringstream cs(controllers);
      for (std::string c; std::getline(cs, c, ',');)
        if (c == "pids") bases = {sysfs / "pids"};
    }
    for (const auto& base : bases) {
      // The cgroup's own limit and each ancestor's: the tightest binds.
      for (std::filesystem::path p = path;; p = p.parent_path()) {
        if (const auto m = read_pids_max(base / p.relative_path() / "pids.max"))
          tighten(best, *m, "pids.max of cgroup " + p.string());
        if (p == p.parent_path()) break;
      }
    }
  }
  return best;
}

std::optional<TaskLimit> task_limit() {
  std::optional<TaskLimit> best;
  rlimit rl{};
  // Root's tasks are not counted against RLIMIT_NPROC (the kernel exempts the root user).
  if (::getuid() != 0 && ::getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    tighten(best, uint64_t(rl.rlim_cur), "RLIMIT_NPROC, which counts every task of this user");
  std::ifstream f("/proc/self/cgroup");
  std::stringstream text;
  text << f.rdbuf();
  if (const auto c = cgroup_task_limit(text.str(), "/sys/fs/cgroup")) tighten(best, c->max, c->what);
  return best;
}

}  // namespace aesxfer::server
