// A path resolved one component at a time, as the kernel resolves it, with every symbolic link on
// the way shown to the caller: the one walker behind StrictModes for authorized_keys (each link
// and the directories that hold it) and the server's hidden files (every name a file may be
// opened by).
#pragma once
#include <filesystem>
#include <functional>
#include <string>

struct stat;

namespace aesxfer::files {

struct LinkWalk {
  // A symbolic link met on the way (in the path as given or in a link's target), its lstat and the
  // resolved directory that holds it; returns why the walk must stop, or "" to follow the link.
  std::function<std::string(const std::filesystem::path& link, const struct stat& st,
                            const std::filesystem::path& dir)>
      on_link;
  // Each name the path has when its last component is reached: the path as given with its
  // directories resolved, then, while that name is a link, its target's (which may not exist).
  std::function<void(const std::filesystem::path& name)> on_name;
};

// Walks `path` (made absolute first) through at most 40 symbolic links, as the kernel does.
// Returns "" when the walk ends, else the first reason on_link gave, "too many symbolic links on
// the way to PATH" or "cannot read symbolic link LINK: ...". A component that does not exist ends
// nothing: the rest is taken as written (".." then goes up lexically).
std::string walk_links(const std::filesystem::path& path, const LinkWalk& walk);

}  // namespace aesxfer::files
