#include "tests/test_util.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

bool JsonParser::parse(Json& out) {
  if (!value(out)) return false;
  ws();
  return i_ == s_.size();
}

void JsonParser::ws() {
  while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
}

bool JsonParser::lit(const char* w) {
  size_t n = std::strlen(w);
  if (s_.compare(i_, n, w) != 0) return false;
  i_ += n;
  return true;
}

bool JsonParser::string(std::string& out) {
  if (i_ >= s_.size() || s_[i_] != '"') return false;
  ++i_;
  while (i_ < s_.size() && s_[i_] != '"') {
    const char c = s_[i_++];
    if (static_cast<unsigned char>(c) < 0x20) return false;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i_ >= s_.size()) return false;
    const char e = s_[i_++];
    if (e == 'u') {
      if (i_ + 4 > s_.size()) return false;
      for (size_t k = 0; k < 4; ++k)
        if (!std::isxdigit(static_cast<unsigned char>(s_[i_ + k]))) return false;
      long cp = std::strtol(s_.substr(i_, 4).c_str(), nullptr, 16);
      out += cp < 0x80 ? char(cp) : '?';
      i_ += 4;
      continue;
    }
    const std::string from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
    const size_t k = from.find(e);
    if (k == std::string::npos) return false;
    out += to[k];
  }
  if (i_ >= s_.size()) return false;
  ++i_;
  return true;
}

bool JsonParser::value(Json& v) {
  ws();
  if (i_ >= s_.size()) return false;
  const char c = s_[i_];
  if (c == '{') {
    v.kind = Json::Obj;
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
    for (;;) {
      ws();
      std::string k;
      if (!string(k)) return false;
      ws();
      if (i_ >= s_.size() || s_[i_++] != ':') return false;
      if (v.obj.count(k)) return false;  // duplicate key
      if (!value(v.obj[k])) return false;
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == '}') return ++i_, true;
      return false;
    }
  }
  if (c == '[') {
    v.kind = Json::Arr;
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
    for (;;) {
      v.arr.emplace_back();
      if (!value(v.arr.back())) return false;
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == ']') return ++i_, true;
      return false;
    }
  }
  if (c == '"') {
    v.kind = Json::Str;
    return string(v.str);
  }
  if (lit("true")) return v.kind = Json::Bool, v.b = true, true;
  if (lit("false")) return v.kind = Json::Bool, v.b = false, true;
  if (lit("null")) return v.kind = Json::Null, true;
  const char* start = s_.c_str() + i_;
  char* end = nullptr;
  v.num = std::strtod(start, &end);
  if (end == start) return false;
  v.kind = Json::Num;
  i_ += size_t(end - start);
  return true;
}

}  // namespace aesxfer::test
