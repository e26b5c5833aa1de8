#include "client/config.h"

#include <cctype>
#include <cstdlib>
#include <functional>

#include "crypto/checksum.h"
#include "crypto/suite.h"
#include "proto/failure.h"
#include "proto/handshake.h"

namespace aesxfer::client {

using proto::printable;  // proto/failure.h (the config parser needs nothing else of net/)

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// One line split as ssh_config reads it: the keyword (up to whitespace or '='), then arguments
// separated by whitespace, a double-quoted argument kept whole, a word starting with '#' ending
// the line. Empty and comment lines give an empty keyword. Throws std::string on a bad quote.
struct Line {
  std::string keyword;
  std::vector<std::string> args;
};

Line split_line(std::string_view s) {
  Line l;
  size_t i = 0;
  while (i < s.size() && space(s[i])) ++i;
  if (i == s.size() || s[i] == '#') return l;
  size_t k = i;
  while (i < s.size() && !space(s[i]) && s[i] != '=') ++i;
  l.keyword = std::string(s.substr(k, i - k));
  while (i < s.size() && space(s[i])) ++i;
  if (i < s.size() && s[i] == '=') ++i;  // "Keyword = value", "Keyword=value": one '=' at most
  for (;;) {
    while (i < s.size() && space(s[i])) ++i;
    if (i == s.size() || s[i] == '#') break;
    std::string arg;
    if (s[i] == '"') {
      size_t end = s.find('"', i + 1);
      if (end == std::string_view::npos) throw std::string("unterminated quote");
      arg = std::string(s.substr(i + 1, end - i - 1));
      i = end + 1;
      if (i < s.size() && !space(s[i])) throw std::string("text right after a closing quote");
    } else {
      size_t st = i;
      while (i < s.size() && !space(s[i])) {
        if (s[i] == '"') throw std::string("a quote inside a word");
        ++i;
      }
      arg = std::string(s.substr(st, i - st));
    }
    l.args.push_back(arg);
  }
  return l;
}

bool parse_uint(const std::string& v, uint64_t max, uint64_t& out) {
  if (v.empty() || v.size() > 12) return false;
  out = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + uint64_t(c - '0');
  }
  return out <= max;
}

// "256K", "1M", "65536": binary K and M, an optional trailing B ("256KB", "256KiB" too).
bool parse_size(const std::string& v_in, uint64_t& out) {
  std::string v = lower(v_in);
  uint64_t mul = 1;
  if (v.size() > 3 && v.compare(v.size() - 3, 3, "kib") == 0) v.resize(v.size() - 2), v.back() = 'k';
  if (v.size() > 3 && v.compare(v.size() - 3, 3, "mib") == 0) v.resize(v.size() - 2), v.back() = 'm';
  if (v.size() > 2 && v.back() == 'b' && (v[v.size() - 2] == 'k' || v[v.size() - 2] == 'm')) v.pop_back();
  if (!v.empty() && v.back() == 'k')
    mul = 1024, v.pop_back();
  else if (!v.empty() && v.back() == 'm')
    mul = 1024 * 1024, v.pop_back();
  uint64_t n = 0;
  if (!parse_uint(v, uint64_t(1) << 30, n)) return false;
  out = n * mul;
  return true;
}

struct Keyword {
  const char* name;
  // Validates `v` and sets it into c when not set yet (set = false: validate only). Returns an
  // error text, or "" when the value is good.
  std::function<std::string(const std::string& v, HostConfig& c, bool set)> apply;
};

template <class T>
void first(std::optional<T>& slot, const T& v, bool set) {
  if (set && !slot) slot = v;
}

std::string host_name(const std::string& v, HostConfig& c, bool set) {
  for (char ch : v)
    if (static_cast<unsigned char>(ch) < 0x21 || ch == 0x7f || ch == '/') return "bad host name";
  // "h:2222": no host name has one colon (an IPv6 address has several): the port was written into
  // it (a nineteenth re-attack, N5), refused here rather than looked up.
  const size_t colon = v.find(':');
  if (colon != std::string::npos && colon > 0 && colon + 1 < v.size() &&
      v.find(':', colon + 1) == std::string::npos &&
      v.find_first_not_of("0123456789", colon + 1) == std::string::npos)
    return "the port goes on a line of its own: Port " + v.substr(colon + 1);
  first(c.hostname, v, set);
  return "";
}

std::string congestion_control(const std::string& v, HostConfig& c, bool set) {
  if (v.empty() || v.size() > 15 ||
      v.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)
    return "bad congestion control (auto, system or a name such as bbr)";
  first(c.congestion, v, set);
  return "";
}

std::string streams(const std::string& v, HostConfig& c, bool set) {
  uint64_t n = 0;
  if (!parse_uint(v, 16, n)) return "bad number of streams (0 = auto, 1 to 16)";
  first(c.streams, int(n), set);
  return "";
}

std::string retries(const std::string& v, HostConfig& c, bool set) {
  uint64_t n = 0;
  if (!parse_uint(v, 100, n)) return "bad number of retries (0 to 100; 0 = end at the first lost connection)";
  first(c.retries, int(n), set);
  return "";
}

const std::vector<Keyword>& keywords() {
  static const std::vector<Keyword> k = {
      {"HostName", host_name},
      {"Port",
       [](const std::string& v, HostConfig& c, bool set) -> std::string {
         uint64_t n = 0;
         if (!parse_uint(v, 65535, n) || n == 0) return "bad port (1 to 65535)";
         first(c.port, uint16_t(n), set);
         return "";
       }},
      {"Cipher",
       [](const std::string& v, HostConfig& c, bool set) -> std::string {
         if (!crypto::find_cipher(v)) return "unknown cipher (known: " + crypto::cipher_names() + ")";
         first(c.cipher, v, set);
         return "";
       }},
      {"MAC",
       [](const std::string& v, HostConfig& c, bool set) -> std::string {
         if (!crypto::find_mac(v)) return "unknown MAC (known: " + crypto::mac_names() + ")";
         first(c.mac, v, set);
         return "";
       }},
      {"IdentityFile",
       [](const std::string& v, HostConfig& c, bool set) -> std::string {
         if (v.size() > 1 && v[0] == '~' && v[1] != '/') return "~user is not supported (write ~/ or a path)";
         first(c.identity_file, v, set);
         return "";
       }},
      {"CongestionControl", congestion_control},
      {"Streams", streams},
      {"Retries", retries},
      {"Checksum",
       [](const std::string& v, HostConfig& c, bool set) -> std::string {
         crypto::ChecksumAlg a;
         if (!crypto::find_checksum(v, a))
           return "unknown checksum (known: " + crypto::checksum_names() + ")";
         first(c.checksum, v, set);
         return "";
       }},
      {"RecordSize",
       [](const std::string& v, HostConfig& c, bool set) -> std::string {
         uint64_t n = 0;
         if (!parse_size(v, n) || n < proto::kMinRecordSize || n > proto::kMaxRecordSize)
           return "bad record size (4K to 1M)";
         first(c.record_size, uint32_t(n), set);
         return "";
       }},
      {"Timeout",
       [](const std::string& v, HostConfig& c, bool set) -> std::string {
         char* end = nullptr;
         const double d = std::strtod(v.c_str(), &end);
         if (v.empty() || *end != '\0' || !(d > 0 && d <= 31536000))
           return "bad timeout (seconds, more than 0 and at most a year)";
         first(c.timeout, d, set);
         return "";
       }},
      {"StrictHostKeyChecking",
       [](const std::string& v, HostConfig& c, bool set) -> std::string {
         const std::string l = lower(v);
         if (l == "yes")
           first(c.strict_host_keys, true, set);
         else if (l == "accept-new")
           first(c.strict_host_keys, false, set);
         else
           return "must be yes or accept-new (a changed host key is always refused)";
         return "";
       }},
  };
  return k;
}

// Checks (and with `set`, applies) one keyword line. Returns an error text, or "".
std::string apply_line(const Line& l, HostConfig& c, bool set) {
  for (const auto& k : keywords()) {
    if (lower(k.name) != lower(l.keyword)) continue;
    if (l.args.empty()) return std::string(k.name) + ": missing value";
    if (l.args.size() > 1)
      return std::string(k.name) + ": one value expected, got " + std::to_string(l.args.size());
    if (l.args[0].empty()) return std::string(k.name) + ": empty value";
    std::string e = k.apply(l.args[0], c, set);
    return e.empty() ? "" : std::string(k.name) + " '" + printable(l.args[0]) + "': " + e;
  }
  return "unknown keyword '" + printable(l.keyword) + "' (known: Host, " + config_keywords() + ")";
}

}  // namespace

void HostConfig::fill_from(const HostConfig& o) {
  if (!hostname) hostname = o.hostname;
  if (!port) port = o.port;
  if (!cipher) cipher = o.cipher;
  if (!mac) mac = o.mac;
  if (!identity_file) identity_file = o.identity_file;
  if (!streams) streams = o.streams;
  if (!checksum) checksum = o.checksum;
  if (!record_size) record_size = o.record_size;
  if (!timeout) timeout = o.timeout;
  if (!strict_host_keys) strict_host_keys = o.strict_host_keys;
  if (!congestion) congestion = o.congestion;
  if (!retries) retries = o.retries;
  applied.insert(applied.end(), o.applied.begin(), o.applied.end());
}

std::string config_keywords() {
  std::string s;
  for (const auto& k : keywords()) s += std::string(s.empty() ? "" : ", ") + k.name;
  return s;
}

bool match_pattern(std::string_view name, std::string_view pat) {
  // Iterative glob with one backtrack point (the last '*'), as ssh's match_pattern.
  size_t n = 0, p = 0, star = std::string_view::npos, back = 0;
  auto eq = [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  };
  while (n < name.size()) {
    if (p < pat.size() && (pat[p] == '?' || (pat[p] != '*' && eq(pat[p], name[n])))) {
      ++n, ++p;
    } else if (p < pat.size() && pat[p] == '*') {
      star = p++;
      back = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++back;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

std::string expand_tilde(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.size() >= 2 && path[0] == '~' && path[1] == '/') return home + path.substr(1);
  return path;
}

HostConfig parse_config(std::string_view text, const std::string& file, const std::string& host) {
  HostConfig c;
  bool active = true;  // lines before the first Host apply to every host
  size_t lineno = 0;
  for (size_t pos = 0; pos <= text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view raw = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    const std::string where = file + ":" + std::to_string(lineno) + ": ";
    Line l;
    try {
      l = split_line(raw);
    } catch (const std::string& e) {
      throw ConfigError(where + e);
    }
    if (l.keyword.empty()) continue;
    if (lower(l.keyword) == "host") {
      if (l.args.empty()) throw ConfigError(where + "Host: at least one pattern expected");
      bool any = false, excluded = false;
      for (const auto& pat : l.args) {
        if (pat == "!" || pat.empty()) throw ConfigError(where + "Host: empty pattern");
        if (pat[0] == '!')
          excluded = excluded || match_pattern(host, std::string_view(pat).substr(1));
        else
          any = any || match_pattern(host, pat);
      }
      active = any && !excluded;
      if (active) c.applied.push_back(file + " line " + std::to_string(lineno));
      continue;
    }
    if (std::string e = apply_line(l, c, active); !e.empty()) throw ConfigError(where + e);
  }
  return c;
}

void apply_option(const std::string& option, HostConfig& into) {
  const std::string where = "-o '" + printable(option) + "': ";
  Line l;
  try {
    l = split_line(option);
  } catch (const std::string& e) {
    throw ConfigError(where + e);
  }
  if (l.keyword.empty()) throw ConfigError(where + "empty option (write -o Keyword=value)");
  if (lower(l.keyword) == "host") throw ConfigError(where + "Host blocks belong in the config file");
  if (std::string e = apply_line(l, into, true); !e.empty()) throw ConfigError(where + e);
}

}  // namespace aesxfer::client
