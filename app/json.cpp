#include "app/json.h"

#include <cstdio>

namespace aesxfer::app {

std::string json_quote(std::string_view s) {
  std::string o;
  o.reserve(s.size() + 2);
  o += '"';
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (ch < 0x20) {
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

}  // namespace aesxfer::app
