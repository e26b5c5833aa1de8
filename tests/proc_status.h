// What /proc says of a process the tests started (a server's peak memory, its threads).
#pragma once
#include <sys/types.h>

#include <string>

namespace aesxfer::test {

// A field of /proc/PID/status in kB (VmHWM, VmRSS) or as a count (Threads); -1 if unreadable.
long proc_status(pid_t pid, const std::string& field);

}  // namespace aesxfer::test
