#include "server/log_value.h"

#include "proto/failure.h"

namespace aesxfer::server {

namespace {

// quoted()'s text with the backslash of each \xNN escape doubled (quoted() writes a backslash
// only before 'x', its escapes, or before '"'; a backslash of s itself is \x5c).
std::string doubled(std::string_view q) {
  std::string out;
  out.reserve(q.size() + q.size() / 4);
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] == '\\' && i + 1 < q.size() && q[i + 1] == 'x') out += '\\';
    out += q[i];
  }
  return out;
}

}  // namespace

std::string log_quoted(std::string_view s) { return doubled(proto::quoted(s)); }

std::string log_value(const std::string& s, size_t max) {
  const std::string q = proto::quoted(s);
  std::string out = doubled(q);
  if (out.size() <= max + 2) return out;
  // Whole pieces of quoted()'s text (proto::escaped_piece) after the opening quote, each counted
  // as it is logged: an \xNN escape takes five bytes there.
  size_t cut = 1, logged = 0;
  while (cut < q.size() - 1) {
    const size_t n = proto::escaped_piece(q, cut);
    const size_t cost = n + (q[cut] == '\\' && q[cut + 1] == 'x' ? 1 : 0);
    if (logged + cost > max) break;
    cut += n;
    logged += cost;
  }
  return doubled(q.substr(0, cut)) + "...[" + std::to_string(s.size()) + " bytes]\"";
}

}  // namespace aesxfer::server
