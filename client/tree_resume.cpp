#include "client/tree_resume.h"

namespace aesxfer::client {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What an entry of the destination stands for: a name, "" for a receiver's own file that says
// nothing (a temporary file, a partial file whose name was shortened with a hash).
std::string stands_for(const std::string& name) {
  static const std::string partial = ".aesxfer-partial";
  if (name.size() > 1 + partial.size() && name[0] == '.' && ends_with(name, partial)) {
    std::string x = name.substr(1, name.size() - 1 - partial.size());
    return x.find('~') == std::string::npos ? x : std::string();  // a shortened name: unknown
  }
  const size_t infix = name.rfind(".aesxfer-");
  if (name[0] == '.' && infix != std::string::npos && name.size() == infix + 9 + 6) return "";
  return name;
}

}  // namespace

bool is_copy_of(const std::vector<std::string>& there, const std::set<std::string>& source) {
  bool any = false;
  for (const auto& name : there) {
    if (name.empty()) continue;
    const std::string x = stands_for(name);
    if (x.empty()) continue;
    if (!source.count(x)) return false;
    any = true;
  }
  return any;
}

std::vector<std::string> top_names(const std::vector<std::string>& there) {
  std::vector<std::string> out;
  for (const auto& p : there)
    if (p.find('/') == std::string::npos) out.push_back(p);
  return out;
}

}  // namespace aesxfer::client
