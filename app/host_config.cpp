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
  // No home yet (a first run makes it): no config file, as when the file alone is missing (a
  // twenty-ninth re-attack, N1: the walk's "no such file" for the directory became exit 2).
  struct stat dir_st {};
  if (!required &&
      ::stat((path.parent_path().empty() ? fs::path(".") : path.parent_path()).c_str(), &dir_st) != 0 &&
      errno == ENOENT)
    return false;
  // Reached by the rules for links, owners and modes of every file aesxfer trusts (a twenty-eighth
  // re-attack, N7: another user's link in /tmp was followed).
  using P = files::TrustedText::Problem;
  files::TrustedText t = files::read_trusted_text(path, kMaxConfigBytes);
  switch (t.problem) {
    case P::none:
      text = std::move(t.text);
      return true;
    case P::missing:
      if (t.error == ENOENT && !required) return false;
      throw client::ConfigError("cannot read config file " + name + ": " + t.detail);
    case P::unreachable:
      throw client::ConfigError("cannot read config file: " + t.detail);
    case P::not_regular:
      throw client::ConfigError("config file " + name + " is not a regular file");
    case P::owner:  // the owner is the problem, not the mode (N7)
      throw client::ConfigError("bad owner of config file " + name + ": it belongs to uid " +
                                std::to_string(t.st.st_uid) + "; it must be yours (or root's)");
    case P::writable: {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", unsigned(t.st.st_mode & 07777));
      throw client::ConfigError("bad owner or permissions on config file " + name + " (mode " + mode +
                                "): it must belong to you and be writable by you only (chmod go-w it)");
    }
    case P::too_large:
      throw client::ConfigError("config file " + name + " is larger than 1 MiB");
  }
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
