// How many tasks (processes and threads) this server may have: the one limit that --max-sessions
// cannot raise by itself. A session is a thread, so a service with a low task limit turns
// connections away long before --max-sessions; serve says so at start, as it does for the
// open-file limit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace aesxfer::server {

struct TaskLimit {
  uint64_t max = 0;
  std::string what;  // "RLIMIT_NPROC", "pids.max of cgroup /system.slice/x.service"
};

// The smallest pids.max of the cgroups in `proc_self_cgroup` (the text of /proc/self/cgroup,
// cgroup v1 "pids" controller or v2) and of their ancestors, read under `sysfs` (/sys/fs/cgroup).
std::optional<TaskLimit> cgroup_task_limit(const std::string& proc_self_cgroup,
                                           const std::filesystem::path& sysfs);

// The tighter of RLIMIT_NPROC (which binds every user but root, and counts all of the user's
// tasks) and this process's cgroups' pids.max; nullopt when neither binds.
std::optional<TaskLimit> task_limit();

}  // namespace aesxfer::server
