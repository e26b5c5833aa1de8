#include "client/remote.h"

namespace aesxfer::client {

std::optional<Remote> parse_remote(const std::string& arg) {
  std::string s = arg, user;
  const size_t at = s.find('@'), colon0 = s.find(':'), slash0 = s.find('/');
  if (at != std::string::npos && at > 0 && colon0 != std::string::npos && at < colon0 &&
      (slash0 == std::string::npos || at < slash0)) {
    user = s.substr(0, at);
    s = s.substr(at + 1);
  }
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close == 1 || close + 1 >= s.size() || s[close + 1] != ':')
      return std::nullopt;  // "[]:x" names no host: a local path, as any other without one
    Remote r{s.substr(1, close - 1), s.substr(close + 2), user};
    if (r.path.empty()) r.path = ".";
    return r;
  }
  size_t colon = s.find(':');
  size_t slash = s.find('/');
  if (colon == std::string::npos || colon == 0 || (slash != std::string::npos && slash < colon))
    return std::nullopt;
  Remote r{s.substr(0, colon), s.substr(colon + 1), user};
  if (r.path.empty()) r.path = ".";  // "host:" is the server's root, as scp's is the home directory
  return r;
}

}  // namespace aesxfer::client
