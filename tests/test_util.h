// Helpers shared by the tests: vector files, hex, random bytes.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace aesxfer::test {

using Bytes = std::vector<uint8_t>;

Bytes hex(const std::string& s);  // accepts upper/lower case, ignores spaces
std::string to_hex(const uint8_t* p, size_t n);
inline std::string to_hex(const Bytes& b) { return to_hex(b.data(), b.size()); }

// A vector file: "# comment" lines, "[section]" lines, and "key = value" lines; a blank line
// ends a record. Each record carries the section it appeared under (key "section") and its
// line number (key "line").
using Record = std::map<std::string, std::string>;
std::vector<Record> load_vectors(const std::string& file_name);  // relative to tests/vectors

// The tools' --json output and the JSON vector files, read by nlohmann-json (strict: nothing may
// follow the value, and a key repeated in one object is an error, which nlohmann itself allows).
std::optional<nlohmann::json> parse_json_strict(const std::string& text);

// The same as a plain tree for the tests that walk it field by field (strings UTF-8 decoded).
struct Json {
  enum Kind { Null, Bool, Num, Str, Arr, Obj } kind = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;
};
class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  bool parse(Json& out);  // false when the text is not one strict JSON value

 private:
  const std::string& s_;
};

// Deterministic random bytes for differential tests (seeded per test, printed on failure).
Bytes random_bytes(std::mt19937_64& rng, size_t n);

}  // namespace aesxfer::test
