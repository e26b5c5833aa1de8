// JSON output of the CLI and the lab (--json, --json-progress, speed --json, bench --json): built
// with nlohmann-json, one naming scheme (docs/aesxfer.1, section JSON OUTPUT). This header adds
// what the library leaves to its user: file names that are not UTF-8, and figures rounded to
// what they measure.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace aesxfer::app {

// Objects keep their keys in the order they were set (the documented order).
using Json = nlohmann::ordered_json;

// True when s is well-formed UTF-8 (no overlong form, no surrogate, at most U+10FFFF).
bool valid_utf8(std::string_view s);

// s with every byte that is not part of well-formed UTF-8 replaced by U+FFFD, one per byte;
// well-formed UTF-8 passes as it is.
std::string utf8_or_replacement(std::string_view s);

// A name of any bytes: j[key] = utf8_or_replacement(name), and when name is not well-formed UTF-8
// also j[key + "_hex"] = its exact bytes as lower-case hex, so that it can be recovered.
void set_name(Json& j, const std::string& key, std::string_view name);

// v rounded to `decimals` places: a measurement printed without digits it does not have.
double rounded(double v, int decimals);

// j as one line of JSON and a newline. Strings that are not UTF-8 (none should reach here: names go
// through set_name) become U+FFFD rather than an exception; control characters are escaped.
std::string json_line(const Json& j);

}  // namespace aesxfer::app
