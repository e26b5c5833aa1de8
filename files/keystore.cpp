#include "files/keystore.h"

#include <fcntl.h>
#include <pwd.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "crypto/util.h"
#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/io.h"
#include "files/link_walk.h"
#include "files/unique_fd.h"
#include "proto/failure.h"
#include "proto/init.h"

namespace aesxfer::files {

using proto::Failure;
namespace fs = std::filesystem;

namespace {

// known_hosts and authorized_keys: read whole, bounded (some 40,000 keys).
constexpr size_t kMaxKeysFile = size_t(16) << 20;

std::string b64(const uint8_t* p, size_t n) {
  std::string s(sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(s.data(), s.size(), p, n, sodium_base64_VARIANT_ORIGINAL);
  s.resize(std::strlen(s.c_str()));
  return s;
}

bool unb64(const std::string& s, uint8_t* out, size_t n) {
  size_t len = 0;
  if (sodium_base642bin(out, n, s.data(), s.size(), " \r\n", &len, nullptr, sodium_base64_VARIANT_ORIGINAL) !=
      0)
    return false;
  return len == n;
}

// Writes `content` whole as `name` in the directory open as dirfd (`shown` names it in messages),
// through a temporary file of a random name created afresh (O_EXCL) and never through a symbolic
// link (a twelfth re-attack, G2: keygen rewrote a planted link's target, mode 0644). The mode is
// set on the descriptor; renameat() replaces the name itself, never what a link there names.
void write_file_mode_at(int dirfd, const std::string& name, const fs::path& shown, const std::string& content,
                        mode_t mode) {
  const std::string tmp = random_temp_name(name);
  UniqueFd fd(::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd) throw Failure("cannot write " + proto::printable(shown.string()) + ": " + std::strerror(errno));
  const bool ok = ::fchmod(fd.get(), mode) == 0 &&
                  ::write(fd.get(), content.data(), content.size()) == ssize_t(content.size()) &&
                  ::fsync(fd.get()) == 0 && fd.close() == 0;
  if (!ok || ::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    const int e = errno;
    ::unlinkat(dirfd, tmp.c_str(), 0);
    throw Failure("cannot write " + proto::printable(shown.string()) + ": " + std::strerror(e));
  }
}

}  // namespace

fs::path aesxfer_home() {
  if (const char* h = std::getenv("AESXFER_HOME"); h && *h) return fs::path(h);
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return fs::path(x) / "aesxfer";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".config" / "aesxfer";
  // No HOME (a service started without one): the user's home from the password database, as ssh
  // finds ~/.ssh; never a directory relative to wherever the command was started.
  const struct passwd* pw = ::getpwuid(::geteuid());
  if (!pw || !pw->pw_dir || pw->pw_dir[0] != '/')
    throw Failure("no home directory: HOME is not set and uid " + std::to_string(::geteuid()) +
                  " has no home in the password database; set AESXFER_HOME");
  return fs::path(pw->pw_dir) / ".config" / "aesxfer";
}

std::string encode_public_key(const proto::PublicKey& pk) {
  return "aesxfer-ed25519 " + b64(pk.data(), pk.size());
}

bool decode_public_key(const std::string& line, proto::PublicKey& out) {
  std::istringstream in(line);
  std::string kind, key;
  if (!(in >> kind >> key) || kind != "aesxfer-ed25519") return false;
  return unb64(key, out.data(), out.size());
}

namespace {

std::string os_error(int err) {
  std::string t = std::strerror(err);
  if (!t.empty()) t[0] = char(std::tolower(static_cast<unsigned char>(t[0])));
  return t;
}

// Opens `dir`, making what is missing of it, and returns its descriptor. The part that exists is
// reached by the rule for links in sticky directories (open_guarded_dir: a thirtieth re-attack,
// N2, found keygen writing root's secret key into nobody's 0777 directory through nobody's link
// in /tmp); each missing directory is made with mkdirat relative to the one before and opened
// without following a link, so a link planted meanwhile is never followed (a thirty-first, N1,
// won that race by path in ten tries). The home made here becomes the user's alone (0700, by
// fchmod on its descriptor: the twelfth re-attack's G3); one that was there keeps its mode.
UniqueFd make_private_home(const fs::path& dir_in) {
  fs::path dir = dir_in.has_filename() ? dir_in : dir_in.parent_path();
  std::vector<std::string> missing;  // innermost first
  fs::path there = dir;
  struct stat st {};
  while (!there.empty() && there != there.root_path() && ::lstat(there.c_str(), &st) != 0 &&
         errno == ENOENT) {
    missing.push_back(there.filename().string());
    there = there.parent_path();
  }
  UniqueFd cur = open_guarded_dir(there.empty() ? fs::path(".") : there);
  if (!cur) throw Failure("cannot open " + proto::printable(dir.string()) + ": " + os_error(errno));
  for (size_t i = missing.size(); i-- > 0;) {
    const std::string& c = missing[i];
    const bool made = ::mkdirat(cur.get(), c.c_str(), i == 0 ? 0700 : 0755) == 0;
    if (!made && errno != EEXIST)
      throw Failure("cannot create " + proto::printable(dir.string()) + ": " + os_error(errno));
    UniqueFd next(::openat(cur.get(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next)
      throw Failure(
          "cannot create " + proto::printable(dir.string()) + ": " + os_error(errno) +
          (errno == ELOOP || errno == ENOTDIR ? " (replaced by a link while it was being made)" : ""));
    if (made && i == 0) ::fchmod(next.get(), 0700);
    cur = std::move(next);
  }
  return cur;
}

// Reads the whole (small) file open as fd: the identity's secret key, wiped on failure.
std::string read_fd(int fd, const fs::path& path) {
  std::string data;
  if (const int e = read_small_file(fd, data, 4096); e != 0) {
    crypto::secure_zero(data.data(), data.size());
    throw Failure("cannot read identity file " + proto::printable(path.string()) + ": " + os_error(e));
  }
  return data;
}

}  // namespace

std::string key_comment() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  const char* user = std::getenv("USER");
  if (!user || !*user) user = std::getenv("LOGNAME");
  if (!user || !*user) {
    const passwd* pw = ::getpwuid(::getuid());
    user = pw ? pw->pw_name : nullptr;
  }
  std::string u = user && *user ? user : ("uid" + std::to_string(::getuid()));
  std::string c = u + "@" + host;
  for (char& ch : c)
    if (static_cast<unsigned char>(ch) <= 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '_';
  return c;
}

namespace {

// The identity in the file open as fd (closed here): a regular file that only its owner may access.
proto::Identity read_identity(UniqueFd fd, const fs::path& path) {
  proto::Identity id;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw Failure("identity file " + proto::printable(path.string()) + " is not a regular file");
  }
  // Another user's key is theirs, however its mode reads (a thirteenth re-attack, H4: a home that
  // another user made in a shared directory handed root that user's key as its own).
  if (st.st_uid != ::geteuid())
    throw Failure("identity file " + proto::printable(path.string()) + " is owned by uid " +
                  std::to_string(st.st_uid) + ", not by this user (uid " + std::to_string(::geteuid()) +
                  "): its owner knows the secret key; use a key of your own (aesxfer keygen, -i)");
  // A public key given for the secret one (-i id_ed25519.pub): said so, not "chmod 600 it" and then
  // "damaged" (a twentieth re-attack, N5).
  static const std::string kPub = "aesxfer-ed25519 ";
  char head[16] = {};
  const bool pub = ::pread(fd.get(), head, sizeof head, 0) == ssize_t(sizeof head) &&
                   kPub.compare(0, kPub.size(), head, sizeof head) == 0;
  crypto::secure_zero(head, sizeof head);
  if (pub) {
    std::string secret = path.string();
    if (secret.size() > 4 && secret.compare(secret.size() - 4, 4, ".pub") == 0)
      secret.resize(secret.size() - 4);
    throw Failure("identity file " + proto::printable(path.string()) +
                  " is a public key (the line for authorized_keys); give the secret key file instead (" +
                  proto::printable(secret) + ")");
  }
  if (st.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    throw Failure("identity file " + proto::printable(path.string()) + " is accessible by others (mode " +
                  mode + "); a secret key must be readable by its owner only: chmod 600 it");
  }
  std::string data = read_fd(fd.get(), path);
  fd.reset();
  std::string line = data.substr(0, data.find('\n'));
  bool ok = unb64(line, id.sk.data(), id.sk.size());
  crypto::secure_zero(line.data(), line.size());
  crypto::secure_zero(data.data(), data.size());
  if (!ok) throw Failure("identity file " + proto::printable(path.string()) + " is damaged");
  crypto_sign_ed25519_sk_to_pk(id.pk.data(), id.sk.data());
  return id;
}

}  // namespace

proto::Identity load_identity(const fs::path& path) {
  proto::init();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    int e = errno;
    throw Failure("cannot read identity file " + proto::printable(path.string()) + ": " +
                  (e == ELOOP ? std::string("is a symbolic link") : os_error(e)));
  }
  return read_identity(std::move(fd), path);
}

proto::Identity load_or_create_identity(const fs::path& path, bool* created) {
  proto::init();
  proto::Identity id;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd) {
    id = read_identity(std::move(fd), path);
    if (created) *created = false;
    return id;
  }
  // Only a file that is not there is created; any other error (permission denied, I/O error,
  // too many open files, a symbolic link) fails and leaves the file as it is.
  if (errno != ENOENT) {
    int e = errno;
    throw Failure("cannot read identity file " + proto::printable(path.string()) + ": " +
                  (e == ELOOP ? std::string("is a symbolic link") : os_error(e)));
  }
  id = proto::Identity::generate();
  std::string secret = b64(id.sk.data(), id.sk.size()) + "\n";
  const UniqueFd home = make_private_home(path.parent_path());
  const std::string name = path.filename().string();
  // Written whole into a temporary file beside it, then linked to its name, which fails if the
  // name exists: a second process starting at the same moment (or a crash) never finds the name
  // holding a key not yet written (a twenty-ninth re-attack, N1: "identity file ... is damaged",
  // about one start in twenty of two servers on a new home). All relative to the home's
  // descriptor (a thirty-first, N1).
  const std::string tmp = random_temp_name(name);
  fd.reset(::openat(home.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    int e = errno;
    crypto::secure_zero(secret.data(), secret.size());
    throw Failure("cannot create identity file " + proto::printable(path.string()) + ": " + os_error(e));
  }
  bool ok =
      ::write(fd.get(), secret.data(), secret.size()) == ssize_t(secret.size()) && ::fsync(fd.get()) == 0;
  int e = errno;
  crypto::secure_zero(secret.data(), secret.size());
  if (fd.close() != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (ok && ::linkat(home.get(), tmp.c_str(), home.get(), name.c_str(), 0) != 0) {
    e = errno;
    ok = false;
  }
  ::unlinkat(home.get(), tmp.c_str(), 0);
  if (!ok && e == EEXIST) return load_or_create_identity(path, created);  // made meanwhile by another process
  if (!ok)
    throw Failure("cannot write identity file " + proto::printable(path.string()) + ": " + os_error(e));
  fs::path pub = path;
  pub += ".pub";
  write_file_mode_at(home.get(), name + ".pub", pub, encode_public_key(id.pk) + " " + key_comment() + "\n",
                     0644);
  if (created) *created = true;
  return id;
}

HostCheck check_known_host(const fs::path& file, const std::string& host_port, const proto::PublicKey& key,
                           proto::PublicKey* expected, bool add) {
  // Trusted only when it is this user's, with one link, and nobody else may write it, as the
  // configuration file and the identity are (a sixteenth re-attack, L7: another local user who
  // could write it, in a shared or temporary home, could pin a key of theirs). Read through the
  // descriptor that was checked.
  // Reached by the kernel's rule for links in sticky directories, and added to from the home's
  // descriptor (make_private_home), never by path: another user's link on the way chose where the
  // home and known_hosts were made (a thirty-second re-attack, A-N4: in root's private directory).
  std::string text;
  UniqueFd fd;
  try {
    const GuardedEntry g = resolve_guarded(file);
    fd.reset(::openat(g.dir.get(), g.name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  } catch (const Failure&) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(file.parent_path(), ec))) throw;  // else a new home: no file yet
  }
  if (fd) {
    struct stat st {};
    std::string why = ::fstat(fd.get(), &st) != 0 ? os_error(errno)
                      : !S_ISREG(st.st_mode)      ? std::string("not a regular file")
                                                  : ownership_problem(st, S_IWGRP | S_IWOTH);
    if (!why.empty())
      throw Failure(proto::printable(file.string()) + ": not used: " + why +
                    " (another user could pin a host key in it; make it this user's, one link, chmod go-w)");
    if (const int e = read_small_file(fd.get(), text, kMaxKeysFile); e != 0)
      throw Failure(proto::printable(file.string()) + ": " + os_error(e));
    if (text.size() > kMaxKeysFile) throw Failure(proto::printable(file.string()) + ": over 16 MiB");
  }
  // Host names without regard to case, as DNS and ssh take them, and written in lower case: one
  // server is one entry however it is spelled (a forty-first re-attack, B-F3: LOCALHOST was
  // trusted on first use with another key while localhost was pinned).
  const auto lower = [](std::string t) {
    for (char& ch : t) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return t;
  };
  const std::string wanted = lower(host_port);
  std::istringstream in(text);
  std::string line;
  for (int lineno = 1; in && std::getline(in, line); ++lineno) {
    std::istringstream ls(line);
    std::string name;
    if (!(ls >> name) || name.empty() || name[0] == '#' || lower(name) != wanted) continue;
    std::string rest;
    std::getline(ls, rest);
    proto::PublicKey pk;
    // A line for this host that cannot be read is an error, never a reason to pin a new key.
    if (!decode_public_key(rest, pk))
      throw Failure(proto::printable(file.string()) + ":" + std::to_string(lineno) +
                    ": cannot parse the key for " + host_port + "; fix or remove that line");
    if (pk == key) return HostCheck::known;
    if (expected) *expected = pk;
    return HostCheck::changed;
  }
  if (!add) return HostCheck::unknown;
  // Appended, never through a symbolic link (a link planted in a home another user can write would
  // otherwise take the line to a file of the user's choosing).
  const UniqueFd home = make_private_home(file.parent_path());
  UniqueFd out(::openat(home.get(), file.filename().c_str(),
                        O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  const std::string entry = wanted + " " + encode_public_key(key) + "\n";
  if (!out || ::write(out.get(), entry.data(), entry.size()) != ssize_t(entry.size()) || out.close() != 0)
    throw Failure("cannot write " + proto::printable(file.string()) + ": " +
                  (errno == ELOOP ? std::string("is a symbolic link") : std::string(std::strerror(errno))));
  return HostCheck::added;
}

namespace {

std::vector<proto::PublicKey> parse_authorized_keys(std::istream& in, const fs::path& file,
                                                    std::vector<std::string>* problems) {
  std::vector<proto::PublicKey> keys;
  std::string line;
  for (size_t n = 1; in && std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#')
      continue;
    proto::PublicKey pk;
    if (decode_public_key(line, pk))
      keys.push_back(pk);
    else if (problems)
      problems->push_back(
          file.string() + ":" + std::to_string(n) +
          ": not a key line (expected 'aesxfer-ed25519 BASE64 [comment]', as aesxfer keygen prints)");
  }
  return keys;
}

std::string mode_text(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", unsigned(m & 07777));
  return b;
}

// Why `what` (the file or a directory above it) may not be trusted, or "".
std::string owner_and_mode_problem(const std::string& what, const struct stat& st, bool dir) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0)
    return what + " is owned by uid " + std::to_string(st.st_uid) + ", neither this user (uid " +
           std::to_string(me) + ") nor root";
  const bool sticky_root_dir = dir && st.st_uid == 0 && (st.st_mode & S_ISVTX);
  if ((st.st_mode & 022) && !sticky_root_dir)
    return what + " is writable by group or others (mode " + mode_text(st.st_mode) + ")";
  return "";
}

}  // namespace

std::vector<proto::PublicKey> load_authorized_keys(const fs::path& file, std::vector<std::string>* problems) {
  std::ifstream in(file);
  return parse_authorized_keys(in, file, problems);
}

namespace {

// Every symbolic link on the way to `file` (in the name as given and in each link's target) must
// be this user's or root's, and the directory that holds it, and every one above that, must pass
// the directory rule (in a sticky directory such as /tmp another user may own a link only they
// can re-point; in a writable one anyone can swap it; a fourth re-attack: a writable directory
// above it let another user swap the whole branch). "" when all hold.
std::string chain_problem(const fs::path& file, const std::string& hint) {
  LinkWalk walk;
  walk.on_link = [&](const fs::path& link, const struct stat& ls, const fs::path& at) -> std::string {
    if (ls.st_uid != ::geteuid() && ls.st_uid != 0)
      return "symbolic link " + link.string() + " is owned by uid " + std::to_string(ls.st_uid) +
             ", neither this user nor root (it leads to " + file.string() + ")" + hint;
    for (fs::path dir = at;; dir = dir.parent_path()) {
      struct stat ds {};
      if (::stat(dir.c_str(), &ds) != 0)
        return "cannot check directory " + dir.string() + ": " + os_error(errno);
      if (std::string p = owner_and_mode_problem("directory " + dir.string(), ds, true); !p.empty())
        return p + " (it holds the symbolic link " + link.string() + " on the way to " + file.string() + ")" +
               hint;
      if (dir == dir.parent_path()) break;
    }
    return "";
  };
  return walk_links(file, walk);
}

}  // namespace

std::string strict_modes_problem(const fs::path& file, const struct stat& st) {
  const std::string hint = "; fix with chmod go-w and chown (sshd's StrictModes rule)";
  if (std::string p = owner_and_mode_problem(file.string(), st, false); !p.empty()) return p + hint;
  std::error_code ec;
  fs::path real = fs::canonical(file, ec);
  if (ec) return "cannot resolve " + file.string() + ": " + ec.message();
  // The directories above the file as named and above the file it leads to: a symbolic link in a
  // writable directory could be swapped for one to another file, whatever that file's own modes.
  fs::path named = fs::absolute(file, ec).lexically_normal();
  if (std::string p = chain_problem(file, hint); !p.empty()) return p;
  for (const fs::path& start : {named.parent_path(), real.parent_path()})
    for (fs::path dir = start;; dir = dir.parent_path()) {
      struct stat ds {};
      if (::stat(dir.c_str(), &ds) != 0)
        return "cannot check directory " + dir.string() + ": " + os_error(errno);
      if (std::string p = owner_and_mode_problem("directory " + dir.string(), ds, true); !p.empty())
        return p + " (it holds " + file.string() + ")" + hint;
      if (dir == dir.parent_path()) break;
    }
  return "";
}

std::vector<proto::PublicKey> load_trusted_keys(const fs::path& file, std::string& refused,
                                                std::vector<std::string>* problems) {
  refused.clear();
  const UniqueFd owned(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  const int fd = owned.get();
  if (fd < 0) {
    if (errno != ENOENT) refused = "cannot read " + file.string() + ": " + os_error(errno);
    return {};
  }
  struct stat st {};
  std::string data;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    refused = "cannot read " + file.string() + ": not a regular file";
  } else if (std::string p = strict_modes_problem(file, st); !p.empty()) {
    refused = p;
  } else {
    if (const int e = read_small_file(fd, data, kMaxKeysFile); e != 0)
      refused = "cannot read " + file.string() + ": " + os_error(e);
    else if (data.size() > kMaxKeysFile)
      refused = "cannot read " + file.string() + ": over 16 MiB";
  }
  if (!refused.empty()) return {};
  std::istringstream in(data);
  return parse_authorized_keys(in, file, problems);
}

namespace {

constexpr const char* kKeyType = "aesxfer-ed25519";
constexpr size_t kMaxComment = 59;  // a key line, "aesxfer-ed25519 " and its key, is 60 bytes

// Where the first word after the key that decodes as a key (44 base64 characters, 32 bytes) starts
// in `line`, or npos.
size_t key_in_comment(const std::string& line) {
  size_t at = line.find(' ');                                  // after the key type
  at = at == std::string::npos ? at : line.find(' ', at + 1);  // after the key
  while (at != std::string::npos) {
    const size_t start = at + 1, end = std::min(line.find(' ', start), line.size());
    proto::PublicKey pk{};
    if (end - start == 44 && unb64(line.substr(start, 44), pk.data(), pk.size())) return start;
    at = end < line.size() ? end : std::string::npos;
  }
  return std::string::npos;
}

// The first character of `line` that printable() would escape, named ("U+2215 at byte 57",
// "the byte 0xff at byte 9, not UTF-8"), or "". A backslash, which printable() escapes too, is
// harmless here.
std::string unshown_character(const std::string& line) {
  for (size_t i = 0; i < line.size();) {
    const size_t len = proto::utf8_sequence(line, i);  // 0: no well-formed sequence starts here
    const std::string ch = line.substr(i, len ? len : 1);
    if (ch != "\\" && proto::printable(ch) != ch) {
      char what[80];
      if (len == 0)
        std::snprintf(what, sizeof what, "the byte 0x%02x at byte %zu, not UTF-8",
                      unsigned(static_cast<unsigned char>(line[i])), i + 1);
      else
        std::snprintf(what, sizeof what, "U+%04X at byte %zu", unsigned(proto::utf8_code_point(ch, len)),
                      i + 1);
      return what;
    }
    i += ch.size();
  }
  return "";
}

}  // namespace

Authorize authorize_key(const fs::path& file, const std::string& line_in) {
  std::string line = line_in;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  // Written as is, a control byte in the comment (CR, ESC, ...) would let `cat authorized_keys`
  // show another line than the key let in: any of them refuses the line.
  for (size_t i = 0; i < line.size(); ++i)
    if (const auto ch = static_cast<unsigned char>(line[i]); ch < 0x20 || ch == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "0x%02x", ch);
      throw Failure("the key line holds a control byte (" + std::string(b) + " at byte " +
                    std::to_string(i + 1) + "); nothing written");
    }
  // Named by what it is and where, once: the command's own line names the key line (a sixtieth
  // re-attack, P60-4: a look-alike slash was called a control, and the line was shown twice).
  if (const std::string what = unshown_character(line); !what.empty())
    throw Failure("the key line holds " + what +
                  ", which a terminal does not show as it is; nothing written");
  // Spaces that push what follows onto a line of its own: `cat authorized_keys` showed a second
  // key line, alice's, after a comment of 2,330 spaces, and only mallory's key was let in (a
  // sixtieth re-attack, P60-3). A comment holds single spaces and no key type.
  if (const size_t at = line.find("  "); at != std::string::npos)
    throw Failure("the key line holds a run of spaces (at byte " + std::to_string(at + 1) +
                  "), which a terminal can show as another line; nothing written");
  if (const size_t at = line.find(kKeyType, 1); at != std::string::npos)
    throw Failure("the key line's comment holds \"" + std::string(kKeyType) + "\" (at byte " +
                  std::to_string(at + 1) + "), which a terminal can show as another key; nothing written");
  // A key in the comment, whatever the word before it: "аesxfer-ed25519" with a Cyrillic a, or in
  // capitals, passed, and alice's key showed on a line of its own (a sixty-first re-attack, R61-5).
  if (const size_t at = key_in_comment(line); at != std::string::npos)
    throw Failure("the key line's comment holds a key (at byte " + std::to_string(at + 1) +
                  "), which a terminal can show as another key line; nothing written");
  // Shorter than a key line (60 bytes): whatever its spelling, no comment can show as another key
  // line on a row of its own, at any width. A look-alike key type with a key of 43 characters, or
  // one with a look-alike letter, passed every rule above (a sixty-second re-attack, U62-3).
  const size_t first = line.find(' '),
               second = first == std::string::npos ? first : line.find(' ', first + 1);
  if (second != std::string::npos && line.size() - second - 1 > kMaxComment)
    throw Failure("the key line's comment is " + std::to_string(line.size() - second - 1) +
                  " bytes, more than " + std::to_string(kMaxComment) +
                  " (a longer one can show as another key line); nothing written");
  proto::PublicKey pk{};
  if (!decode_public_key(line, pk))
    throw Failure("not a key line (expected 'aesxfer-ed25519 BASE64 [comment]', as aesxfer keygen prints)");
  // A home made here is the user's alone; one that was there keeps its mode (StrictModes below says
  // whether the server would trust it): a chmod by name followed a link to another directory (a
  // twelfth re-attack, G3).
  const UniqueFd home = make_private_home(file.parent_path());
  struct stat st {};
  const std::string name = file.filename().string();
  const bool existed = ::fstatat(home.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  UniqueFd fd(::openat(home.get(), name.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) throw Failure("cannot open " + proto::printable(file.string()) + ": " + std::strerror(errno));
  // "added" must mean let in: the keys as the server reads them (load_trusted_keys: StrictModes, a
  // readable regular file); a file it would not trust is refused with its reason (a sixth
  // re-attack, F2) and left as it was.
  std::string refused;
  const std::vector<proto::PublicKey> keys = load_trusted_keys(file, refused);
  if (!refused.empty()) {
    if (!existed) ::unlinkat(home.get(), name.c_str(), 0);
    // The server's own words, which its log quotes; here they go to a terminal: printable (a tenth
    // re-attack: a home named with escapes came out raw).
    throw Failure(proto::printable(refused) +
                  "; the server would trust no key of it, so nothing was written");
  }
  for (const auto& k : keys)
    if (k == pk) return Authorize::already;
  // A last line without its newline would take the new key into it: one line that shows both keys
  // and lets neither in (a fifth re-attack, F3). End it first.
  if (::fstat(fd.get(), &st) != 0)
    throw Failure("cannot read " + proto::printable(file.string()) + ": " + std::strerror(errno));
  char last = '\n';
  if (st.st_size > 0 && ::pread(fd.get(), &last, 1, st.st_size - 1) != 1)
    throw Failure("cannot read " + proto::printable(file.string()) + ": " + std::strerror(errno));
  const std::string out = (last == '\n' ? "" : "\n") + line + "\n";
  const bool ok = ::write(fd.get(), out.data(), out.size()) == ssize_t(out.size()) && fd.close() == 0;
  if (!ok) throw Failure("cannot write " + proto::printable(file.string()));
  return Authorize::added;
}

}  // namespace aesxfer::files
