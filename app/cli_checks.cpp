#include "app/cli_checks.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "files/guarded_path.h"
#include "proto/failure.h"

namespace aesxfer::app {
namespace {

// v as typed, at most 40 bytes, made printable (an eighth re-attack, F4: C0 bytes became '?' but
// C1, bidi and, in an 8-bit locale, every high byte reached the terminal as typed).
std::string shown(const std::string& v) {
  const std::string s = proto::printable(v.substr(0, 40));
  return v.size() > 40 ? s + "..." : s;
}

std::string in_quotes(const std::string& v) { return "'" + shown(v) + "'"; }

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A whole decimal number, with nothing after it.
bool parse_whole(const std::string& v, int64_t& out) {
  const char* end = v.data() + v.size();
  auto r = std::from_chars(v.data(), end, out);
  return r.ec == std::errc() && r.ptr == end && !v.empty();
}

// A finite decimal number, with nothing after it.
bool parse_real(const std::string& v, double& out) {
  if (v.empty() || std::isspace(static_cast<unsigned char>(v[0]))) return false;
  char* end = nullptr;
  out = std::strtod(v.c_str(), &end);
  return end && *end == '\0' && std::isfinite(out) && v.find_first_of("xXpP") == std::string::npos;
}

// The leading number of v (digits and one '.'), the rest in `suffix`; false when there is none.
bool split_number(const std::string& v, double& n, std::string& suffix) {
  size_t i = 0;
  while (i < v.size() && (std::isdigit(static_cast<unsigned char>(v[i])) || v[i] == '.')) ++i;
  if (i == 0 || !parse_real(v.substr(0, i), n)) return false;
  suffix = lower(v.substr(i));
  return true;
}

std::string number_words(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", d);
  return buf;
}

const CLI::Option* find_long(const CLI::App& cmd, const std::string& name) {
  for (const CLI::Option* o : cmd.get_options())
    for (const auto& l : o->get_lnames())
      if (l == name) return o;
  return nullptr;
}

const CLI::Option* find_short(const CLI::App& cmd, char c) {
  for (const CLI::Option* o : cmd.get_options())
    for (const auto& s : o->get_snames())
      if (s.size() == 1 && s[0] == c) return o;
  return nullptr;
}

bool takes_value(const CLI::Option* o) { return o->get_expected_max() > 0; }  // flags expect 0

// A word CLI11 would read as an option rather than a value: "-x", "--x", but not "-", "--", "-1".
bool looks_like_option(const CLI::App& cmd, const std::string& w) {
  if (w.size() < 2 || w[0] != '-' || w == "--") return false;
  if (w[1] == '-') return true;
  return !std::isdigit(static_cast<unsigned char>(w[1])) || find_short(cmd, w[1]);
}

std::string unknown_line(const CLI::App& cmd, const std::string& word, const std::string& typed) {
  std::vector<std::string> names;
  for (const CLI::Option* o : cmd.get_options())
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
  // "-resume" is compared as "--resume" would be: the likely slip is the missing dash.
  const std::string like = typed.size() > 2 && typed[1] != '-' ? "-" + typed : typed;
  std::string best = nearest(like, names);
  if (best.empty() && like != typed) best = nearest(typed, names);
  return "unknown option " + shown(word) + (best.empty() ? "" : " (did you mean " + best + "?)");
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = 3;  // within two edits
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d && d + 1 < word.size()) best_d = d, best = c;
  }
  return best;
}

std::string unknown_option(const CLI::App& cmd, const std::vector<std::string>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") return "";
    if (!looks_like_option(cmd, w)) {
      for (const CLI::App* sub : cmd.get_subcommands({}))  // a command's own options follow it
        if (sub->get_name() == w) {
          const std::string u = unknown_option(*sub, {words.begin() + long(i) + 1, words.end()});
          return u.empty() || u.rfind("unknown", 0) != 0 ? u : w + ": " + u;
        }
      continue;
    }
    const CLI::Option* o = nullptr;
    if (w[1] == '-') {
      const size_t eq = w.find('=');
      const std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (!(o = find_long(cmd, name))) return unknown_line(cmd, w.substr(0, eq), w.substr(0, eq));
      if (eq == std::string::npos && takes_value(o) && i + 1 < words.size() &&
          !looks_like_option(cmd, words[i + 1]))
        ++i;
      continue;
    }
    for (size_t k = 1; k < w.size(); ++k) {  // a cluster of short options: -rp, -P7300
      if (!(o = find_short(cmd, w[k]))) {
        // "-resume": a long option with one dash, more likely than a cluster with a wrong letter.
        if (std::string whole = unknown_line(cmd, w, w);
            w.size() > 2 && whole.find("did you mean") != std::string::npos)
          return whole;
        return "unknown option -" + shown(w.substr(k, 1)) + (w.size() > 2 ? " (in " + shown(w) + ")" : "");
      }
      if (!takes_value(o)) continue;
      if (k + 1 == w.size() && i + 1 < words.size() && !looks_like_option(cmd, words[i + 1])) ++i;
      break;
    }
  }
  return "";
}

CLI::Validator whole_number(int64_t lo, int64_t hi, const std::string& what) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        int64_t n = 0;
        if (parse_whole(v, n) && n >= lo && n <= hi) return "";
        return "expected " + what + " from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " +
               in_quotes(v);
      },
      "", "whole_number");
}

CLI::Validator real_number(double lo, double hi, const std::string& unit, bool open_lo) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        double d = 0;
        if (parse_real(v, d) && (open_lo ? d > lo : d >= lo) && (hi <= 0 || d <= hi)) return "";
        std::string range = open_lo ? "more than " + number_words(lo) : number_words(lo) + " or more";
        if (hi > 0)
          range += open_lo ? " and at most " + number_words(hi) : " and at most " + number_words(hi);
        return "expected a number of " + unit + ", " + range + ", got " + in_quotes(v);
      },
      "", "real_number");
}

std::string size_words(uint64_t bytes) {
  const char* units = "KMGT";
  std::string suffix;
  for (int u = 0; u < 4 && bytes >= 1024 && bytes % 1024 == 0; ++u) {
    bytes /= 1024;
    suffix = std::string(1, units[u]);
  }
  return std::to_string(bytes) + suffix;
}

CLI::Validator byte_size(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        double n = 0;
        std::string suffix;
        const std::string shape = "a number of bytes, or with K, M or G (of 1024), e.g. 256K";
        if (!split_number(v, n, suffix)) return in_quotes(v) + " is not a size: " + shape;
        double scale = 1;
        if (!suffix.empty() && suffix != "b") {
          const size_t at = std::string("kmgt").find(suffix[0]);
          const std::string rest = suffix.substr(1);
          if (at == std::string::npos || !(rest.empty() || rest == "b" || rest == "ib"))
            return in_quotes(v) + " is not a size: " + shape;
          scale = std::pow(1024.0, double(at + 1));
        }
        const double bytes = std::floor(n * scale);
        if (bytes < double(lo) || bytes > double(hi))
          return "expected a size from " + size_words(lo) + " to " + size_words(hi) + ", got " + in_quotes(v);
        v = std::to_string(uint64_t(bytes));
        return "";
      },
      "", "byte_size");
}

CLI::Validator kbit_rate(double max_kbit) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        double n = 0;
        std::string suffix;
        const std::string shape =
            " is not a rate: give Kbit/s, or a number with K, M or G for Kbit/s, Mbit/s, Gbit/s (80M = "
            "80000)";
        if (!split_number(v, n, suffix) || suffix.size() > 1) return in_quotes(v) + shape;
        const size_t at = suffix.empty() ? 0 : std::string("kmg").find(suffix[0]);
        if (at == std::string::npos) return in_quotes(v) + shape;
        const double kbit = n * std::pow(1000.0, double(at));  // K (or none): 1, M: 1000, G: 10^6
        if (kbit > max_kbit)
          return "at most " + number_words(max_kbit / 1e6) + "G (" + number_words(max_kbit) +
                 " Kbit/s), got " + in_quotes(v);
        if (kbit > 0 && kbit < kMinLimitKbit)
          return "at least " + number_words(kMinLimitKbit) +
                 " Kbit/s, the slowest the limiter paces (one 4 KiB record every 4 s; 0 for no limit), got " +
                 in_quotes(v);
        v = number_words(kbit);
        return "";
      },
      "", "kbit_rate");
}

std::string parse_error_line(const CLI::ParseError& e, const std::string& cmd) {
  const std::string what = e.what();
  const std::string help = cmd.empty() ? "aesxfer --help" : "aesxfer " + cmd + " --help";
  std::string line;
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
    // "NAME: 1 required TYPE missing": the option was the last word, its value absent.
    const size_t colon = what.find(": "), req = what.find(" required "), miss = what.rfind(" missing");
    if (colon != std::string::npos && req != std::string::npos && miss != std::string::npos && req < miss)
      line = what.substr(0, colon) + " needs a value (" + what.substr(req + 10, miss - req - 10) + ")";
    // "NAME: At Most 1 required but received N": an option that takes one value, given twice.
    const std::string twice = ": At Most 1 required but received ";
    if (const size_t at = what.find(twice); line.empty() && at != std::string::npos)
      line = what.substr(0, at) + " is given " + what.substr(at + twice.size()) + " times: give it once";
  } else if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    const size_t colon = what.find(": ");
    const std::string words = colon == std::string::npos ? what : what.substr(colon + 2);
    line =
        std::string(words.find(' ') == std::string::npos ? "unexpected argument " : "unexpected arguments ") +
        in_quotes(words);
  } else if (dynamic_cast<const CLI::ConversionError*>(&e)) {
    // "Could not convert: NAME = VALUE"
    const size_t colon = what.find(": "), eq = what.find(" = ");
    if (colon != std::string::npos && eq != std::string::npos && colon < eq)
      line = what.substr(colon + 2, eq - colon - 2) + ": " + in_quotes(what.substr(eq + 3)) +
             " is not a valid value";
  }
  if (line.empty()) line = what.empty() ? "bad command line" : what;
  return (cmd.empty() ? "" : cmd + ": ") + line + " (see " + help + ")";
}

std::string unwritable(const std::filesystem::path& p) {
  const std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  try {  // refused now as when it is written: another user's link on the way in a sticky directory,
         // or a directory another user planted
    if (const files::UniqueFd d = files::open_guarded_dir(dir); d)
      if (const std::string why = files::planted_way_text(d.get()); !why.empty())
        return proto::printable(p.string()) + ": " + why;
  } catch (const proto::Failure& f) {
    return proto::printable(p.string()) + ": " + f.what();
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return proto::printable(p.string()) + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return proto::printable(p.string()) + ": " + std::strerror(ENOTDIR);
  if (::access(dir.c_str(), W_OK) != 0) return proto::printable(p.string()) + ": " + std::strerror(errno);
  // A directory at the name is one the file cannot replace (a twenty-seventh re-attack, N10: exit 1
  // after the start lines).
  if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return proto::printable(p.string()) + ": " + std::strerror(EISDIR);
  return "";
}

}  // namespace aesxfer::app
