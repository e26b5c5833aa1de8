// The HOST:PATH argument of send and recv, as scp reads it.
#pragma once
#include <optional>
#include <string>

namespace aesxfer::client {

struct Remote {
  std::string host;
  std::string path;
  std::string
      user;  // "user@host:path": accepted for scp users' habits, and ignored (app/cli.h, check_remote)
};

// "host:path", "[v6addr]:path", either with "user@" before it; nullopt when the argument names
// no host (a local path).
std::optional<Remote> parse_remote(const std::string& arg);

// A remote path as the server's root names it (docs/PROTOCOL.md, "Listing"): relative to the
// root, no empty or "." component, ".." taken back lexically; "." for the root itself
// ("./a//tree/" is "a/tree").
std::string normal_request(const std::string& remote);

}  // namespace aesxfer::client
