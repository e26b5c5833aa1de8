// Confines client-supplied paths to the server's root.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "proto/messages.h"

namespace aesxfer::net {

struct Resolved {
  std::filesystem::path path;  // absolute, inside the root (or the sink/source device)
  bool dev_null = false;       // put to /dev/null: discard
  bool dev_zero = false;       // get from /dev/zero: zeros of the requested size
};

// Rules: no empty paths, NUL or newline bytes; absolute paths only for the sink /dev/null (put)
// and the source /dev/zero (get); no ".." components; the real path of the target (get) or of its
// directory (put) must lie inside the root, so symlinks cannot lead out. For put, an existing
// directory receives the file under `basename`. On refusal returns nullopt and sets status/why.
std::optional<Resolved> confine(const std::filesystem::path& root_real, const std::string& req, proto::Op op,
                                const std::string& basename, proto::Status& status, std::string& why);

// mkdir (issue 7, -r): the directory to create or reuse. Same rules as put (relative, no '..',
// no NUL/newline, the real path of the parent inside the root, the target not a symlink); when
// `req` names an existing directory and `name` is not empty, the target is req/name (like a put
// into a directory). The target may exist already only as a directory; *exists says so.
std::optional<std::filesystem::path> confine_mkdir(const std::filesystem::path& root_real, const std::string& req,
                                                   const std::string& name, bool* exists, proto::Status& status,
                                                   std::string& why);

// list (issue 7, recv -r): the directory to list, real path. Same rules as get (relative, no
// '..', no NUL/newline, its real path inside the root: a symlink given as the path itself is
// followed when it stays inside); "." is the root. Refused unless it is a directory.
std::optional<std::filesystem::path> confine_dir(const std::filesystem::path& root_real, const std::string& req,
                                                 proto::Status& status, std::string& why);

}  // namespace aesxfer::net
