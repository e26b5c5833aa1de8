#include "server/log_value.h"

#include "proto/failure.h"

namespace aesxfer::server {

std::string log_quoted(std::string_view s) {
  // quoted() writes a backslash only before 'x' (its \xNN escapes: a backslash of s itself is
  // \x5c) or before '"'.
  const std::string q = proto::quoted(s);
  std::string out;
  out.reserve(q.size() + q.size() / 4);
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] == '\\' && i + 1 < q.size() && q[i + 1] == 'x') out += '\\';
    out += q[i];
  }
  return out;
}

// The length of the piece of a log_quoted() value that starts at q[i]: an escape (\\xNN, \"), one
// UTF-8 sequence (quoted() passes only well-formed ones) or one byte.
static size_t piece(const std::string& q, size_t i) {
  if (q[i] == '\\') return i + 1 < q.size() && q[i + 1] == '\\' ? 5 : 2;
  size_t n = 1;
  while (i + n < q.size() && (static_cast<unsigned char>(q[i + n]) & 0xc0) == 0x80) ++n;
  return n;
}

std::string log_value(const std::string& s, size_t max) {
  const std::string q = log_quoted(s);
  if (q.size() <= max + 2) return q;
  size_t cut = 1;  // after the opening quote
  while (cut < q.size() - 1) {
    const size_t n = piece(q, cut);
    if (cut - 1 + n > max) break;
    cut += n;
  }
  return q.substr(0, cut) + "...[" + std::to_string(s.size()) + " bytes]\"";
}

}  // namespace aesxfer::server
