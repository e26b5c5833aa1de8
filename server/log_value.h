// What the server logs of a peer's text: quoted as logfmt readers read it, and bounded.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace aesxfer::server {

// A value for the log: proto::quoted(s) (printable, in double quotes, '"' as \"), with the
// backslash of every \xNN escape written as \\ (so a '$' is \\x24 and a byte 0xff \\xff). Both
// kinds of reader then take the same text from it, the one printable() shows on a terminal: a
// shell-style splitter (sh, Python's shlex.split), which in double quotes reads \\ as \ and would
// expand a bare '$', and a logfmt parser with JSON's escapes (go-logfmt, as Loki's and Grafana's
// `| logfmt` use), which rejects the whole line at an escape it does not know, \x among them: a
// client put one '$' in a name and its request was gone from such a query (a forty-fourth
// re-attack, B-F3).
std::string log_quoted(std::string_view s);

// log_quoted(s) cut to its first `max` bytes (then "...[N bytes]" says how long s was): a
// 4096-byte path of bytes that escape to five characters each, named in the file and the result,
// made one refused request cost eight times its size in log bytes (an eleventh re-attack); sshd
// cuts what it logs of a peer's words too.
constexpr size_t kLoggedPath = 256, kLoggedResult = 512;
// Cut between escapes and characters, never inside one: a name of 0xff bytes was cut at 256 bytes
// and then grew fourfold (a twenty-ninth re-attack, N5: lines of 2.2 KB), and a cut inside a
// UTF-8 sequence made a line the journal shows as "[N blob data]" (a fortieth re-attack, B-F6:
// a client's long name of emoji hid its own get and put lines from journalctl).
std::string log_value(const std::string& s, size_t max);

}  // namespace aesxfer::server
