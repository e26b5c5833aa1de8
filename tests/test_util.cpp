#include "tests/test_util.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>

namespace aesxfer::test {

Bytes hex(const std::string& s) {
  Bytes out;
  int hi = -1;
  for (char c : s) {
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else if (c == ' ' || c == '\t' || c == ':')
      continue;
    else
      throw std::runtime_error("bad hex character in: " + s);
    if (hi < 0)
      hi = v;
    else {
      out.push_back(uint8_t(hi << 4 | v));
      hi = -1;
    }
  }
  if (hi >= 0) throw std::runtime_error("odd hex length: " + s);
  return out;
}

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

static std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

std::vector<Record> load_vectors(const std::string& file_name) {
  std::string path = std::string(AESXFER_VECTORS_DIR) + "/" + file_name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<Record> out;
  Record cur;
  std::string section, line;
  int n = 0;
  auto flush = [&] {
    if (cur.size() > 0) {
      cur["section"] = section;
      out.push_back(cur);
      cur.clear();
    }
  };
  while (std::getline(in, line)) {
    ++n;
    std::string t = trim(line);
    if (t.empty()) {
      flush();
      continue;
    }
    if (t[0] == '#') continue;
    if (t[0] == '[') {
      flush();
      section = t.substr(1, t.find(']') - 1);
      continue;
    }
    size_t eq = t.find('=');
    if (eq == std::string::npos) throw std::runtime_error(path + ":" + std::to_string(n) + ": no '='");
    if (cur.empty()) cur["line"] = std::to_string(n);
    cur[trim(t.substr(0, eq))] = trim(t.substr(eq + 1));
  }
  flush();
  return out;
}

Bytes random_bytes(std::mt19937_64& rng, size_t n) {
  Bytes b(n);
  for (auto& x : b) x = uint8_t(rng());
  return b;
}

namespace {

// nlohmann's tree into the tests' Json; strings stay UTF-8 as nlohmann decoded them.
void convert(const nlohmann::json& in, Json& out) {
  using V = nlohmann::json::value_t;
  switch (in.type()) {
    case V::object:
      out.kind = Json::Obj;
      for (const auto& [k, v] : in.items()) convert(v, out.obj[k]);
      break;
    case V::array:
      out.kind = Json::Arr;
      out.arr.resize(in.size());
      for (size_t i = 0; i < in.size(); ++i) convert(in[i], out.arr[i]);
      break;
    case V::string:
      out.kind = Json::Str;
      out.str = in.get<std::string>();
      break;
    case V::boolean:
      out.kind = Json::Bool;
      out.b = in.get<bool>();
      break;
    case V::number_integer:
    case V::number_unsigned:
    case V::number_float:
      out.kind = Json::Num;
      out.num = in.get<double>();
      break;
    default:
      out.kind = Json::Null;
  }
}

}  // namespace

std::optional<nlohmann::json> parse_json_strict(const std::string& text) {
  // nlohmann keeps the last of two equal keys; a tool that printed one twice is wrong, so the
  // parser's callback records the keys of each open object and refuses a repeated one.
  std::vector<std::set<std::string>> open;
  bool duplicate = false;
  auto check = [&](int /*depth*/, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start) open.emplace_back();
    if (ev == E::object_end && !open.empty()) open.pop_back();
    if (ev == E::key && !open.empty() && !open.back().insert(parsed.get<std::string>()).second)
      duplicate = true;
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text, check, /*allow_exceptions=*/false);
  if (j.is_discarded() || duplicate) return std::nullopt;
  return j;
}

bool JsonParser::parse(Json& out) {
  auto j = parse_json_strict(s_);
  if (!j) return false;
  out = Json{};
  convert(*j, out);
  return true;
}

}  // namespace aesxfer::test
