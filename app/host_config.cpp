#include "app/host_config.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/unique_fd.h"
#include "net/conn.h"

namespace aesxfer::app {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

// The text of a config file; false when it does not exist and !required. Throws ConfigError.
bool read_config(const fs::path& path, bool required, std::string& text) {
  const std::string name = net::printable(path.string());
  if (path == "/dev/null") return true;  // ssh -F /dev/null: an empty configuration
  // Reached by the rule for links in sticky directories, as every file the user names (a
  // twenty-eighth re-attack, N7: another user's link in /tmp was followed).
  files::UniqueFd fd;
  // No home yet (a first run makes it): no config file, as when the file alone is missing (a
  // twenty-ninth re-attack, N1: the walk's "no such file" for the directory became exit 2).
  struct stat dir_st {};
  if (!required &&
      ::stat((path.parent_path().empty() ? fs::path(".") : path.parent_path()).c_str(), &dir_st) != 0 &&
      errno == ENOENT)
    return false;
  try {
    const files::GuardedEntry g = files::resolve_guarded(path);
    fd.reset(g.magic ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)
                     : ::openat(g.dir.get(), g.name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  } catch (const proto::Failure& f) {
    throw client::ConfigError(std::string("cannot read config file: ") + f.what());
  }
  if (!fd) {
    if (errno == ENOENT && !required) return false;
    throw client::ConfigError("cannot read config file " + name + ": " + files::errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw client::ConfigError("config file " + name + " is not a regular file");
  }
  if (st.st_uid != 0 && st.st_uid != ::getuid())  // the owner is the problem, not the mode (N7)
    throw client::ConfigError("bad owner of config file " + name + ": it belongs to uid " +
                              std::to_string(st.st_uid) + "; it must be yours (or root's)");
  if (st.st_mode & 022) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    throw client::ConfigError("bad owner or permissions on config file " + name + " (mode " + mode +
                              "): it must belong to you and be writable by you only (chmod go-w it)");
  }
  if (uint64_t(st.st_size) > kMaxConfigBytes) {
    throw client::ConfigError("config file " + name + " is larger than 1 MiB");
  }
  text.assign(size_t(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  text.resize(got);
  return true;
}

}  // namespace

std::string user_home() {
  if (const char* h = std::getenv("HOME"); h && *h) return h;
  const passwd* pw = ::getpwuid(::getuid());
  return pw && pw->pw_dir ? pw->pw_dir : "/";
}

client::HostConfig load_host_config(const std::string& file, const fs::path& home,
                                    const std::vector<std::string>& options, const std::string& alias,
                                    std::string* read_from) {
  client::HostConfig c;
  for (const auto& o : options) client::apply_option(o, c);
  if (read_from) read_from->clear();
  if (file == "none") return c;
  const fs::path path = file.empty() ? home / "config" : fs::path(file);
  std::string text;
  if (!read_config(path, !file.empty(), text)) return c;
  if (read_from) *read_from = path.string();
  c.fill_from(client::parse_config(text, net::printable(path.string()), alias));
  return c;
}

}  // namespace aesxfer::app
