#include "app/json.h"

#include <cstdio>

namespace aesxfer::app {

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (1 to 4), or 0 when the byte there starts none.
size_t utf8_len(std::string_view s, size_t i) {
  unsigned char ch = static_cast<unsigned char>(s[i]);
  if (ch < 0x80) return 1;
  size_t len = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;
  if (len == 0 || ch > 0xf4 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
  if ((ch == 0xe0 && c1 < 0xa0) || (ch == 0xed && c1 >= 0xa0) || (ch == 0xf0 && c1 < 0x90) ||
      (ch == 0xf4 && c1 >= 0x90))
    return 0;
  return len;
}

}  // namespace

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string json_quote(std::string_view s) {
  std::string o;
  o.reserve(s.size() + 2);
  o += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x80) {
      size_t n = utf8_len(s, i);
      if (n == 0) {
        o += "\\ufffd";
        ++i;
      } else {
        o.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    switch (ch) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\r':
        o += "\\r";
        break;
      case '\t':
        o += "\\t";
        break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", ch);
          o += b;
        } else {
          o += char(ch);
        }
    }
  }
  o += '"';
  return o;
}

std::string json_name_fields(const std::string& key, std::string_view s) {
  std::string out = json_quote(key) + ":" + json_quote(s);
  if (valid_utf8(s)) return out;
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char ch : s) {
    hex += kHex[ch >> 4];
    hex += kHex[ch & 15];
  }
  return out + "," + json_quote(key + "_hex") + ":\"" + hex + "\"";
}

}  // namespace aesxfer::app
