// libFuzzer target: the parsers of what the user (or a second local user) writes, which no peer
// sends but which the tool reads at every run: the client config file and its -o options
// (client/config), authorized_keys and known_hosts (files/keystore), a public key line, and the
// HOST:PATH argument (client/remote). The first byte picks the parser, the rest is its text. What they
// must never do: crash, hang, or accept something they then cannot print or use:
//   - parse_config either throws ConfigError or returns values that round-trip through -o;
//   - a key line that decodes re-encodes to the same key;
//   - parse_remote's host and path are never empty (an empty host would be connected to).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "client/config.h"
#include "client/remote.h"
#include "files/keystore.h"

using namespace aesxfer;

namespace {

// The text as a 0600 file in a private directory (the keystore reads files, as the tool does).
std::filesystem::path as_file(const std::string& text) {
  static const std::filesystem::path dir = [] {
    char tmpl[] = "/tmp/aesxfer-fuzz-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    return std::filesystem::path(d ? d : "/tmp");
  }();
  const auto f = dir / "input";
  const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    (void)!::write(fd, text.data(), text.size());
    ::close(fd);
  }
  return f;
}

void config(const std::string& text) {
  for (const char* host : {"box", "10.0.0.1", "anything.example"}) {
    try {
      client::HostConfig c = client::parse_config(text, "fuzz", host);
      if (c.hostname && c.hostname->empty()) __builtin_trap();
      if (c.port) {
        client::HostConfig again;
        client::apply_option("Port=" + std::to_string(*c.port), again);
        if (again.port != c.port) __builtin_trap();
      }
    } catch (const client::ConfigError&) {
    }
  }
  try {
    client::HostConfig c;
    client::apply_option(text, c);
  } catch (const client::ConfigError&) {
  }
}

void keys(const std::string& text) {
  proto::PublicKey pk{};
  if (files::decode_public_key(text, pk)) {
    proto::PublicKey again{};
    if (!files::decode_public_key(files::encode_public_key(pk), again) || again != pk) __builtin_trap();
  }
  const auto f = as_file(text);
  std::vector<std::string> problems;
  (void)files::load_authorized_keys(f, &problems);
  try {
    proto::PublicKey expected{};
    (void)files::check_known_host(f, "box:7227", pk, &expected, false);
  } catch (const std::exception&) {  // a line for the host that cannot be parsed: one error line
  }
}

void remote(const std::string& text) {
  auto r = client::parse_remote(text);
  if (!r) return;
  if (r->host.empty() || r->path.empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      config(text);
      break;
    case 1:
      keys(text);
      break;
    default:
      remote(text);
      break;
  }
  return 0;
}
