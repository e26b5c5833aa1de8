#include "app/json.h"

#include <cmath>
#include <cstdio>

#include "crypto/util.h"
#include "proto/failure.h"

namespace aesxfer::app {

using proto::utf8_sequence;  // the rules printable() applies, in one place

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_or_replacement(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      o += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    } else {
      o.append(s.substr(i, n));
      i += n;
    }
  }
  return o;
}

void set_name(Json& j, const std::string& key, std::string_view name) {
  j[key] = utf8_or_replacement(name);
  if (valid_utf8(name)) return;
  j[key + "_hex"] = crypto::to_hex(name.data(), name.size());
}

double rounded(double v, int decimals) {
  if (!std::isfinite(v)) return v;
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

// The dump, with every code point that printable() would escape on a terminal (C1 controls, bidi
// controls, invisible and format characters, space look-alikes) written as \uXXXX: the value
// stays exact for a JSON reader, and a terminal or log showing the line sees no control (a
// server-chosen name with U+202E cannot reorder the line). Such a code point occurs only inside
// JSON strings, where the escape is valid. When the locale does not read UTF-8
// (proto::utf8_output() false) every code point from U+0080 up is written so: an 8-bit terminal
// takes the 0x9b of "\xc3\x9b" for CSI (an eighth re-attack, F2), and the line is then ASCII.
std::string json_line(const Json& j) {
  const bool utf8 = proto::utf8_output();
  const std::string raw = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size() + 1);
  auto u16 = [&out](uint32_t v) {
    char b[16];
    std::snprintf(b, sizeof b, "\\u%04x", unsigned(v));
    out += b;
  };
  for (size_t i = 0; i < raw.size();) {
    const size_t n = utf8_sequence(raw, i);
    if (n <= 1) {          // ASCII (the dump holds nothing else than well-formed UTF-8); DEL, which
      if (raw[i] == 0x7f)  // printable() escapes, as \u007f
        u16(0x7f);
      else
        out += raw[i];
      ++i;
      continue;
    }
    const uint32_t cp = proto::utf8_code_point(std::string_view(raw).substr(i, n), n);
    if (utf8 && !proto::escaped_code_point(cp)) {
      out.append(raw, i, n);
    } else if (cp < 0x10000) {
      u16(cp);
    } else {  // a surrogate pair
      u16(0xd800 + ((cp - 0x10000) >> 10));
      u16(0xdc00 + ((cp - 0x10000) & 0x3ff));
    }
    i += n;
  }
  return out + "\n";
}

}  // namespace aesxfer::app
