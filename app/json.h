// JSON output helpers shared by the CLI's --json, --json-progress, speed --json and bench --json.
#pragma once
#include <string>
#include <string_view>

namespace aesxfer::app {

// s as a JSON string literal, quotes included; control characters escaped (\n, \r, \t, \uXXXX).
// The result is valid JSON (RFC 8259, UTF-8) for any bytes: well-formed UTF-8 passes as it is,
// and every byte that is not part of well-formed UTF-8 becomes \ufffd (the replacement
// character), one per byte. json_name_fields keeps such a name's exact bytes beside it.
std::string json_quote(std::string_view s);

// True when s is well-formed UTF-8 (no overlong form, no surrogate, at most U+10FFFF).
bool valid_utf8(std::string_view s);

// `"key":<json_quote(s)>`, and for a name that is not well-formed UTF-8 also `,"key_hex":"<the
// raw bytes as lower-case hex>"`, so that a file name of any bytes can be recovered exactly.
std::string json_name_fields(const std::string& key, std::string_view s);

}  // namespace aesxfer::app
