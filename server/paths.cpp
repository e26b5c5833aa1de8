#include "server/paths.h"

namespace aesxfer::net {
namespace fs = std::filesystem;

namespace {

bool inside(const fs::path& root, const fs::path& p) {
  auto r = root.begin(), re = root.end();
  auto q = p.begin(), qe = p.end();
  for (; r != re; ++r, ++q) {
    if (r->empty()) continue;  // trailing separator
    if (q == qe || *q != *r) return false;
  }
  return true;
}

bool bad_name(const std::string& s) {
  return s.empty() || s.find('\0') != std::string::npos || s.find('\n') != std::string::npos ||
         s.find('\r') != std::string::npos;
}

}  // namespace

std::optional<Resolved> confine(const fs::path& root_real, const std::string& req, proto::Op op,
                                const std::string& basename, proto::Status& status, std::string& why) {
  status = proto::Status::bad_path;
  if (bad_name(req)) {
    why = "invalid path";
    return std::nullopt;
  }
  Resolved r;
  if (op == proto::Op::put && req == "/dev/null") {
    r.path = req;
    r.dev_null = true;
    return r;
  }
  if (op == proto::Op::get && req == "/dev/zero") {
    r.path = req;
    r.dev_zero = true;
    return r;
  }
  fs::path p(req);
  if (p.is_absolute()) {
    why = req + ": absolute paths are refused (paths are relative to the server's root; /dev/null and /dev/zero are the only exceptions)";
    return std::nullopt;
  }
  for (const auto& part : p)
    if (part == "..") {
      why = req + ": '..' is refused";
      return std::nullopt;
    }
  std::error_code ec;
  fs::path full = root_real / p;
  if (op == proto::Op::get) {
    fs::path real = fs::canonical(full, ec);
    if (ec) {
      status = ec == std::errc::permission_denied ? proto::Status::permission : proto::Status::not_found;
      why = req + ": " + (ec == std::errc::permission_denied ? "permission denied" : "no such file");
      return std::nullopt;
    }
    if (!inside(root_real, real)) {
      why = req + ": leads outside the server's root";
      return std::nullopt;
    }
    if (fs::is_directory(real, ec)) {
      why = req + ": is a directory";
      return std::nullopt;
    }
    if (!fs::is_regular_file(real, ec)) {  // a FIFO or device would block or never end
      why = req + ": not a regular file";
      return std::nullopt;
    }
    r.path = real;
    return r;
  }
  // put
  if (fs::is_directory(full, ec)) {
    if (bad_name(basename) || basename == "." || basename == ".." || basename.find('/') != std::string::npos) {
      why = "invalid file name";
      return std::nullopt;
    }
    full /= basename;
  }
  fs::path dir = full.parent_path();
  fs::path dir_real = fs::canonical(dir, ec);
  if (ec) {
    status = proto::Status::not_found;
    why = req + ": no such directory";
    return std::nullopt;
  }
  if (!inside(root_real, dir_real)) {
    why = req + ": leads outside the server's root";
    return std::nullopt;
  }
  fs::path target = dir_real / full.filename();
  auto st = fs::symlink_status(target, ec);
  if (!ec && fs::is_symlink(st)) {
    why = req + ": is a symbolic link (refused)";
    return std::nullopt;
  }
  if (!ec && fs::is_directory(st)) {
    why = req + ": is a directory";
    return std::nullopt;
  }
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    why = req + ": not a regular file";
    return std::nullopt;
  }
  r.path = target;
  return r;
}

// The rules every relative request path obeys: a valid name, not absolute, no ".." component.
// Sets why (status is bad_path) and returns false otherwise.
static bool relative_ok(const std::string& req, std::string& why) {
  if (bad_name(req)) {
    why = "invalid path";
    return false;
  }
  fs::path p(req);
  if (p.is_absolute()) {
    why = req + ": absolute paths are refused (paths are relative to the server's root)";
    return false;
  }
  for (const auto& part : p)
    if (part == "..") {
      why = req + ": '..' is refused";
      return false;
    }
  return true;
}

std::optional<fs::path> confine_mkdir(const fs::path& root_real, const std::string& req, const std::string& name,
                                      bool* exists, proto::Status& status, std::string& why) {
  status = proto::Status::bad_path;
  *exists = false;
  if (!relative_ok(req, why)) return std::nullopt;
  fs::path p(req);
  std::error_code ec;
  fs::path full = (root_real / p).lexically_normal();
  // "a/b/" and "a/." name a/b and a: drop the empty or "." last component.
  while (!full.empty() && (full.filename().empty() || full.filename() == ".") && full != full.root_path())
    full = full.parent_path();
  if (!name.empty()) {
    if (bad_name(name) || name == "." || name == ".." || name.find('/') != std::string::npos) {
      why = "invalid directory name";
      return std::nullopt;
    }
    auto st = fs::symlink_status(full, ec);
    if (!ec && fs::is_directory(st)) full /= name;
  }
  fs::path real_full = fs::canonical(full, ec);
  if (!ec && real_full == root_real) {  // the root itself
    *exists = true;
    return root_real;
  }
  fs::path dir_real = fs::canonical(full.parent_path(), ec);
  if (ec) {
    status = proto::Status::not_found;
    why = req + ": no such directory";
    return std::nullopt;
  }
  if (!inside(root_real, dir_real)) {
    why = req + ": leads outside the server's root";
    return std::nullopt;
  }
  fs::path target = dir_real / full.filename();
  auto st = fs::symlink_status(target, ec);
  if (!ec && fs::is_symlink(st)) {
    why = req + ": is a symbolic link (refused)";
    return std::nullopt;
  }
  if (!ec && fs::exists(st)) {
    if (!fs::is_directory(st)) {
      why = req + ": exists and is not a directory";
      return std::nullopt;
    }
    *exists = true;
  }
  return target;
}

std::optional<fs::path> confine_dir(const fs::path& root_real, const std::string& req, proto::Status& status,
                                    std::string& why) {
  status = proto::Status::bad_path;
  if (!relative_ok(req, why)) return std::nullopt;
  fs::path p(req);
  std::error_code ec;
  fs::path real = fs::canonical(root_real / p, ec);
  if (ec) {
    status = ec == std::errc::permission_denied ? proto::Status::permission : proto::Status::not_found;
    why = req + ": " + (ec == std::errc::permission_denied ? "permission denied" : "no such directory");
    return std::nullopt;
  }
  if (!inside(root_real, real)) {
    why = req + ": leads outside the server's root";
    return std::nullopt;
  }
  if (!fs::is_directory(real, ec)) {
    why = req + ": not a directory";
    return std::nullopt;
  }
  return real;
}

}  // namespace aesxfer::net
