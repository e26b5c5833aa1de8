#include "files/link_walk.h"

#include <sys/stat.h>

#include <vector>

namespace fs = std::filesystem;

namespace aesxfer::files {

std::string walk_links(const fs::path& path, const LinkWalk& walk) {
  std::vector<std::string> todo;  // components still to resolve, the next one last
  auto push = [&todo](const fs::path& p) {
    std::vector<std::string> parts;
    for (const auto& c : p.relative_path()) parts.push_back(c.string());
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  std::error_code ec;
  push(fs::absolute(path, ec));
  fs::path at = "/";
  if (todo.empty() && walk.on_name) walk.on_name(at);
  for (int links = 0; !todo.empty();) {
    const std::string c = todo.back();
    todo.pop_back();
    const bool last = todo.empty();
    if (c.empty() || c == "." || c == "..") {
      if (c == "..") at = at.parent_path();
      if (last && walk.on_name) walk.on_name(at);
      continue;
    }
    const fs::path next = at / c;
    if (last && walk.on_name) walk.on_name(next);
    struct stat ls {};
    if (::lstat(next.c_str(), &ls) != 0 || !S_ISLNK(ls.st_mode)) {
      at = next;
      continue;
    }
    if (++links > 40) return "too many symbolic links on the way to " + path.string();
    if (walk.on_link)
      if (std::string why = walk.on_link(next, ls, at); !why.empty()) return why;
    const fs::path target = fs::read_symlink(next, ec);
    if (ec) return "cannot read symbolic link " + next.string() + ": " + ec.message();
    if (target.is_absolute()) at = "/";
    push(target);
  }
  return "";
}

}  // namespace aesxfer::files
