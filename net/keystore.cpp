#include "net/keystore.h"

#include <sodium.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "crypto/util.h"

namespace aesxfer::net {
namespace fs = std::filesystem;

namespace {

std::string b64(const uint8_t* p, size_t n) {
  std::string s(sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(s.data(), s.size(), p, n, sodium_base64_VARIANT_ORIGINAL);
  s.resize(std::strlen(s.c_str()));
  return s;
}

bool unb64(const std::string& s, uint8_t* out, size_t n) {
  size_t len = 0;
  if (sodium_base642bin(out, n, s.data(), s.size(), " \r\n", &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    return false;
  return len == n;
}

void write_file_mode(const fs::path& p, const std::string& content, mode_t mode) {
  fs::create_directories(p.parent_path());
  fs::path tmp = p;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + tmp.string());
    f << content;
    if (!f.flush()) throw std::runtime_error("cannot write " + tmp.string());
  }
  ::chmod(tmp.c_str(), mode);
  fs::rename(tmp, p);
}

}  // namespace

fs::path aesxfer_home() {
  if (const char* h = std::getenv("AESXFER_HOME"); h && *h) return fs::path(h);
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return fs::path(x) / "aesxfer";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".config" / "aesxfer";
}

std::string encode_public_key(const proto::PublicKey& pk) { return "aesxfer-ed25519 " + b64(pk.data(), pk.size()); }

bool decode_public_key(const std::string& line, proto::PublicKey& out) {
  std::istringstream in(line);
  std::string kind, key;
  if (!(in >> kind >> key) || kind != "aesxfer-ed25519") return false;
  return unb64(key, out.data(), out.size());
}

proto::Identity load_or_create_identity(const fs::path& path, bool* created) {
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
  proto::Identity id;
  std::ifstream f(path);
  if (f) {
    std::string line;
    std::getline(f, line);
    if (!unb64(line, id.sk.data(), id.sk.size()))
      throw std::runtime_error("identity file " + path.string() + " is damaged");
    crypto::secure_zero(line.data(), line.size());
    crypto_sign_ed25519_sk_to_pk(id.pk.data(), id.sk.data());
    if (created) *created = false;
    return id;
  }
  id = proto::Identity::generate();
  std::string secret = b64(id.sk.data(), id.sk.size()) + "\n";
  fs::create_directories(path.parent_path());
  ::chmod(path.parent_path().c_str(), 0700);
  write_file_mode(path, secret, 0600);
  crypto::secure_zero(secret.data(), secret.size());
  fs::path pub = path;
  pub += ".pub";
  write_file_mode(pub, encode_public_key(id.pk) + " " + path.filename().string() + "\n", 0644);
  if (created) *created = true;
  return id;
}

HostCheck check_known_host(const fs::path& file, const std::string& host_port, const proto::PublicKey& key,
                           proto::PublicKey* expected) {
  std::ifstream in(file);
  std::string line;
  while (in && std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name;
    if (!(ls >> name) || name.empty() || name[0] == '#' || name != host_port) continue;
    std::string rest;
    std::getline(ls, rest);
    proto::PublicKey pk;
    if (!decode_public_key(rest, pk)) continue;
    if (pk == key) return HostCheck::known;
    if (expected) *expected = pk;
    return HostCheck::changed;
  }
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::app);
  if (!out) throw std::runtime_error("cannot write " + file.string());
  out << host_port << " " << encode_public_key(key) << "\n";
  return HostCheck::added;
}

std::vector<proto::PublicKey> load_authorized_keys(const fs::path& file, std::vector<std::string>* problems) {
  std::vector<proto::PublicKey> keys;
  std::ifstream in(file);
  std::string line;
  for (size_t n = 1; in && std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    proto::PublicKey pk;
    if (decode_public_key(line, pk))
      keys.push_back(pk);
    else if (problems)
      problems->push_back(file.string() + ":" + std::to_string(n) +
                          ": not a key line (expected 'aesxfer-ed25519 BASE64 [comment]', as aesxfer keygen prints)");
  }
  return keys;
}

}  // namespace aesxfer::net
