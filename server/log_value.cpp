#include "server/log_value.h"

#include "proto/failure.h"

namespace aesxfer::server {

std::string log_value(const std::string& s, size_t max) {
  const std::string q = proto::quoted(s);  // "...", every escape starting with a backslash
  if (q.size() <= max + 2) return q;
  size_t cut = max + 1;  // the opening quote and max characters
  for (size_t p = cut - 1; p + 4 > cut && p > 0; --p)
    if (q[p] == '\\') {
      if (p + (q[p + 1] == 'x' ? 4 : 2) > cut) cut = p;
      break;
    }
  // Nor inside a character: the line stays well-formed UTF-8, which the journal shows (it shows an
  // ill-formed one as "[N blob data]", a fortieth re-attack, B-F6: a client's long name of emoji
  // hid its own get and put lines from journalctl).
  while (cut > 1 && (static_cast<unsigned char>(q[cut]) & 0xc0) == 0x80) --cut;
  return q.substr(0, cut) + "...[" + std::to_string(s.size()) + " bytes]\"";
}

}  // namespace aesxfer::server
