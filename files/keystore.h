// Identities, known hosts and authorized keys on disk, under $AESXFER_HOME (default
// ~/.config/aesxfer). Shared by the client and the server.
//
//   id_ed25519         this user's identity: one line, base64 of libsodium's 64-byte secret key
//   id_ed25519.pub     one line: "aesxfer-ed25519 <base64 public key> <comment>"
//   host_ed25519(.pub) the server's host key, same format
//   known_hosts        lines "<host>:<port> aesxfer-ed25519 <base64 public key>", pinned on first use
//   authorized_keys    lines like id_ed25519.pub; the server also accepts the identity in its own
//                      $AESXFER_HOME, so one user on one machine works out of the box
#pragma once
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "proto/handshake.h"

namespace aesxfer::files {

std::filesystem::path aesxfer_home();

// Loads the identity at path, creating it (and its .pub, mode 0600/0644) only when the file does
// not exist (O_EXCL). Any other error fails with one line and leaves the file alone; a secret key
// file that group or others may access (mode & 077), or a symbolic link, is refused, as ssh
// refuses an unprotected private key.
proto::Identity load_or_create_identity(const std::filesystem::path& path, bool* created = nullptr);
// The same checks for an identity that must exist (-i FILE, IdentityFile): never created.
proto::Identity load_identity(const std::filesystem::path& path);

std::string encode_public_key(const proto::PublicKey& pk);  // "aesxfer-ed25519 <base64>"
bool decode_public_key(const std::string& line, proto::PublicKey& out);
// "user@host", the comment a new .pub line carries (as ssh-keygen writes it).
std::string key_comment();

// `aesxfer authorize`: appends a key line (as keygen prints it) to the authorized_keys file,
// created 0600 in a 0700 directory, opened without following a symlink; a key already there is
// not added twice. Throws Failure for a line that is not a key, a line holding any control byte
// (C0 with TAB and CR, DEL, C1) or anything else a terminal would not show as it is (bidi and
// invisible format characters, invalid UTF-8; proto::printable's rule), or a file it cannot write.
enum class Authorize { added, already };
Authorize authorize_key(const std::filesystem::path& file, const std::string& line);

enum class HostCheck { known, added, changed, unknown };
// Pins on first use: adds the key when host is new (`unknown`, nothing written, when !add),
// reports `changed` (and leaves the file alone) when a different key is on record. `expected`
// receives the recorded key then. A line for host_port whose key cannot be parsed throws
// ("FILE:LINE: cannot parse ..."), never a silent re-pin.
HostCheck check_known_host(const std::filesystem::path& file, const std::string& host_port,
                           const proto::PublicKey& key, proto::PublicKey* expected, bool add = true);

// The keys of an authorized_keys file. A line that is neither blank, a comment nor a key is
// reported in `problems` (when given) as "FILE:LINE: ..." and skipped.
std::vector<proto::PublicKey> load_authorized_keys(const std::filesystem::path& file,
                                                   std::vector<std::string>* problems = nullptr);

// sshd's StrictModes for a file the server trusts (authorized_keys): "" when the file (after
// symlinks) and every directory above it up to / are owned by this user or root and not
// writable by group or others, else why not ("FILE is writable by group or others (mode 0664)").
// A root-owned directory with the sticky bit (such as /tmp) is accepted, as others cannot
// rename or remove what is ours in it. `st` is the open file's fstat.
std::string strict_modes_problem(const std::filesystem::path& file, const struct stat& st);

// The keys of authorized_keys that the server may trust. None, with `refused` set to the reason,
// when the file exists but cannot be read ("cannot read FILE: permission denied": never
// reported as an empty file) or fails strict_modes_problem. A missing file has no keys and no
// reason. Lines that are not keys go to `problems`, as in load_authorized_keys.
std::vector<proto::PublicKey> load_trusted_keys(const std::filesystem::path& file, std::string& refused,
                                                std::vector<std::string>* problems = nullptr);

}  // namespace aesxfer::files
