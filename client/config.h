// The client's configuration file ($AESXFER_HOME/config, or -F FILE) and -o options, in the
// syntax of ssh_config(5): "Keyword value" or "Keyword=value", keywords case-insensitive, '#'
// comments, double quotes around a value with spaces, and "Host PATTERN..." blocks (wildcards
// '*' and '?', '!' to exclude) that apply to the host aliases they match. For each keyword the
// first value obtained wins. Pure: text in, values out; the caller reads the file, checks its
// permissions and applies the values (app/).
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aesxfer::client {

// Every keyword the client knows, with its value as given (validated).
struct HostConfig {
  std::optional<std::string> hostname;       // HostName: the name or address to connect to
  std::optional<uint16_t> port;              // Port
  std::optional<std::string> cipher;         // Cipher (as -c)
  std::optional<std::string> mac;            // MAC (as -m)
  std::optional<std::string> identity_file;  // IdentityFile (as -i; "~" not yet expanded)
  std::optional<int> streams;                // Streams (as --streams, 0 = auto)
  std::optional<std::string> checksum;       // Checksum (as --checksum)
  std::optional<uint32_t> record_size;       // RecordSize (as --record-size, K and M suffixes)
  std::optional<double> timeout;             // Timeout (as --timeout, seconds)
  std::optional<bool> strict_host_keys;      // StrictHostKeyChecking yes | accept-new
  std::optional<std::string> congestion;     // CongestionControl (as --congestion)
  std::optional<int> retries;                // Retries (as --retries, 0 to 100)
  // The lines ("FILE line N") of the Host blocks that matched, for -v.
  std::vector<std::string> applied;

  // Sets every value still unset from `lower` (first obtained wins: `this` was obtained first).
  void fill_from(const HostConfig& lower);
};

// "FILE:LINE: what is wrong", one line.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The values that apply to `host` (the alias as typed, before HostName replaces it) in the text
// of a config file named `file` (for messages). Every line is checked, matching or not: an
// unknown keyword, a missing, extra or bad value throws ConfigError naming file and line.
HostConfig parse_config(std::string_view text, const std::string& file, const std::string& host);

// One -o option ("Keyword=value" or "Keyword value"; Host is not allowed there) set into `into`
// unless the keyword already has a value there. Throws ConfigError ("-o 'TEXT': ...").
void apply_option(const std::string& option, HostConfig& into);

// ssh's pattern match: '*' any run of characters, '?' one character, case-insensitive.
bool match_pattern(std::string_view name, std::string_view pattern);

// "~" or "~/x" with $HOME (`home`) in front; other paths unchanged. "~user/x" is refused
// (ConfigError) by the parser already.
std::string expand_tilde(const std::string& path, const std::string& home);

// The keywords, for messages and documentation: "HostName, Port, Cipher, ...".
std::string config_keywords();

}  // namespace aesxfer::client
