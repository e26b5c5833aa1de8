#include "client/remote.h"

#include <string>
#include <vector>

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

std::string normal_request(const std::string& remote) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t slash = remote.find('/', start);
    std::string part = remote.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..")
        parts.pop_back();
      else
        parts.push_back(part);
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out.empty() ? "." : out;
}

}  // namespace aesxfer::client
