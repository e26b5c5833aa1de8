// A logfmt reader with go-logfmt's rules (github.com/go-logfmt/logfmt, the Decoder behind Loki's
// and Grafana's `| logfmt`), written here from its documented behaviour so that a test can read
// the server's log as those tools do. Where go-logfmt reports a syntax error (and such a tool
// drops the whole line) it returns nullopt.
//   - pairs are separated by bytes <= ' '; a key runs to '=' or a blank, and may not hold '"';
//   - an unquoted value runs to the next blank and may hold neither '=' nor '"';
//   - a quoted value ends at the first '"' not escaped; if it has a backslash it is unquoted as a
//     JSON string is: only \" \\ \/ \' \b \f \n \r \t and \uXXXX are escapes, any other (\x, \$)
//     is an error, and so is a raw byte below ' '.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace aesxfer::test {

using LogfmtPairs = std::vector<std::pair<std::string, std::string>>;

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xc0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += char(0xe0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  } else {
    out += char(0xf0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3f));
    out += char(0x80 | ((cp >> 6) & 0x3f));
    out += char(0x80 | (cp & 0x3f));
  }
}

// The body of a quoted value that holds a backslash, unquoted as JSON's rules (and go-logfmt's
// additions \' ) read it.
inline std::optional<std::string> logfmt_unquote(const std::string& body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(body[i]);
    if (c < ' ' || c == '"') return std::nullopt;
    if (c != '\\') {
      out += char(c);
      continue;
    }
    if (++i >= body.size()) return std::nullopt;
    switch (body[i]) {
      case '"':
      case '\\':
      case '/':
      case '\'':
        out += body[i];
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        if (i + 4 >= body.size()) return std::nullopt;  // fewer than four hex digits
        uint32_t cp = 0;
        for (size_t k = 1; k <= 4; ++k) {
          const char h = body[i + k];
          const int v = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
          if (v < 0) return std::nullopt;
          cp = cp * 16 + uint32_t(v);
        }
        i += 4;
        if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;  // pairs are not needed by these tests
        append_utf8(out, cp);
        break;
      }
      default:
        return std::nullopt;
    }
  }
  return out;
}

inline std::optional<LogfmtPairs> go_logfmt(const std::string& line) {
  LogfmtPairs pairs;
  size_t i = 0;
  auto blank = [&](size_t p) { return static_cast<unsigned char>(line[p]) <= ' '; };
  for (;;) {
    while (i < line.size() && blank(i)) ++i;
    if (i >= line.size()) return pairs;
    const size_t key_start = i;
    while (i < line.size() && line[i] != '=' && !blank(i)) {
      if (line[i] == '"') return std::nullopt;
      ++i;
    }
    if (i == key_start) return std::nullopt;  // '=' with no key
    std::string key = line.substr(key_start, i - key_start);
    if (i >= line.size() || line[i] != '=') {  // a key alone
      pairs.emplace_back(key, "");
      continue;
    }
    ++i;
    std::string value;
    if (i < line.size() && line[i] == '"') {
      size_t j = i + 1;
      bool esc = false, has_esc = false;
      for (; j < line.size(); ++j) {
        if (esc) {
          esc = false;
        } else if (line[j] == '\\') {
          esc = has_esc = true;
        } else if (line[j] == '"') {
          break;
        }
      }
      if (j >= line.size()) return std::nullopt;  // unterminated
      const std::string body = line.substr(i + 1, j - i - 1);
      if (has_esc) {
        auto u = logfmt_unquote(body);
        if (!u) return std::nullopt;
        value = *u;
      } else {
        value = body;
      }
      i = j + 1;
    } else {
      const size_t v0 = i;
      while (i < line.size() && !blank(i)) {
        if (line[i] == '=' || line[i] == '"') return std::nullopt;
        ++i;
      }
      value = line.substr(v0, i - v0);
    }
    pairs.emplace_back(key, value);
  }
}

}  // namespace aesxfer::test
