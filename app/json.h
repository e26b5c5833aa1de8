// JSON output helpers shared by the CLI's --json, --json-progress, speed --json and bench --json.
#pragma once
#include <string>
#include <string_view>

namespace aesxfer::app {

// s as a JSON string literal, quotes included; control characters escaped (\n, \r, \t, \uXXXX).
std::string json_quote(std::string_view s);

}  // namespace aesxfer::app
