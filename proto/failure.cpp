#include "proto/failure.h"

#include <cstdio>

namespace aesxfer::proto {

Failure refusal(const Message& m, const std::string& what) {
  std::string text = m.text.empty() ? status_name(m.status) : m.text;
  // The peer's text usually starts with the path it refuses ("nope.bin: no such file"), and
  // `what` ends with the path the user asked for: name it once.
  if (const size_t c = text.find(": "); c != std::string::npos && c > 0) {
    const std::string head = ":" + text.substr(0, c);
    if (what.size() >= head.size() && what.compare(what.size() - head.size(), head.size(), head) == 0)
      text = text.substr(c + 2);
  }
  const Status st = m.status == Status::ok ? Status::internal : m.status;
  return Failure(printable(what + ": " + text), st, 0, Origin::peer);
}

namespace {

// A well-formed 3-byte UTF-8 sequence that reorders or hides text: the bidi embeddings,
// overrides and isolates (U+202A..U+202E, U+2066..U+2069, the "Trojan Source" class,
// CVE-2021-42574), the zero-width and direction marks (U+200B..U+200F), the line and paragraph
// separators (U+2028, U+2029) and the byte order mark / zero-width no-break space (U+FEFF).
bool invisible_or_bidi(std::string_view u) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(u[k]); };
  if (b(0) == 0xe2 && b(1) == 0x80) return (b(2) >= 0x8b && b(2) <= 0x8f) || (b(2) >= 0xa8 && b(2) <= 0xae);
  if (b(0) == 0xe2 && b(1) == 0x81) return b(2) >= 0xa6 && b(2) <= 0xa9;
  return b(0) == 0xef && b(1) == 0xbb && b(2) == 0xbf;
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  auto esc = [&](unsigned char ch) {
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02x", ch);
    out += b;
  };
  for (size_t i = 0; i < s.size();) {
    unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch < 0x80) {
      if (ch < 0x20 || ch == 0x7f || ch == '\\')
        esc(ch);
      else
        out += char(ch);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlong form, no surrogate, at most U+10FFFF) passes as
    // it is, unless it encodes a C1 control (U+0080..U+009F: 0xc2 0x80..0x9f); any other byte
    // from 0x80 up is escaped on its own (a raw 0x9b is CSI to an 8-bit terminal).
    size_t len = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;
    bool ok = len > 0 && len <= 4 && ch <= 0xf4 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      if ((ch == 0xe0 && c1 < 0xa0) || (ch == 0xed && c1 >= 0xa0) || (ch == 0xf0 && c1 < 0x90) ||
          (ch == 0xf4 && c1 >= 0x90) || (ch == 0xc2 && c1 < 0xa0))
        ok = false;
    }
    if (!ok) {
      esc(ch);
      ++i;
      continue;
    }
    if (len == 3 && invisible_or_bidi(s.substr(i, 3))) {
      for (size_t k = 0; k < 3; ++k) esc(static_cast<unsigned char>(s[i + k]));
      i += 3;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string quoted(std::string_view s) {
  const std::string p = printable(s);
  std::string out = "\"";
  for (char ch : p) {
    if (ch == '$' || ch == '`') {  // sh would expand them inside double quotes, shlex would not
      out += ch == '$' ? "\\x24" : "\\x60";
      continue;
    }
    if (ch == '"') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace aesxfer::proto
