// What the server logs of a peer's text: quoted (proto::quoted) and bounded.
#pragma once
#include <cstddef>
#include <string>

namespace aesxfer::server {

// A peer-supplied value for the log, quoted, and cut to its first `max` bytes (then "...[N bytes]"
// says how long it was): a 4096-byte path of bytes that escape to four characters each, named in
// the file and the result, made one refused request cost eight times its size in log bytes (an
// eleventh re-attack); sshd cuts what it logs of a peer's words too.
constexpr size_t kLoggedPath = 256, kLoggedResult = 512;
// Cut after escaping, never inside an escape: a name of 0xff bytes was cut at 256 bytes and then
// grew fourfold (a twenty-ninth re-attack, N5: lines of 2.2 KB).
std::string log_value(const std::string& s, size_t max);

}  // namespace aesxfer::server
