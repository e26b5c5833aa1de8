// recv -r and recv --resume: the client's side of the list op and
// of a get with the resume flag (Client::list, Client::fetch_resumed in recv_tree.cpp), and the
// local half of recv -r. See docs/PROTOCOL.md, "Listing" and "Resumed get".
#pragma once
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/client.h"

namespace aesxfer::client {

// Thrown by recv_tree (with `pipelined` given) when a local failure during a file's data ended the
// session: that file's failure and every file of the listing after it ("not fetched") were already
// reported through `pipelined`, so the caller says nothing more and exits 1.
struct TreeEnded : proto::Failure {
  explicit TreeEnded(const proto::Failure& f) : proto::Failure(f) {}
};

// The directories one recv -r command made, across its sessions, by device and inode.
using MadeDirs = std::set<std::pair<dev_t, ino_t>>;

// A set of strings kept as a 16-byte SHA-256 digest each. What the sessions of a retried command
// remember of a hostile server's names (paths of up to 4 KB, lines of up to 16 KB once escaped)
// costs one small node an entry, not the string: kept whole, 16,000 listed links a session grew
// a recv -r to 1.7 GB over the default five retries (a fifty-fourth re-attack, C54-1).
class SeenSet {
 public:
  // At most as many entries as one listing may hold (proto::kMaxListEntries, about 64 MB): a server
  // that lists a million new names every session still grew the client by 63 MB a retry (a
  // fifty-fifth re-attack, C55-3). Past that a string is not kept, and insert says it is new: a
  // line is then said again, a file fetched again, which a tree of real files never reaches.
  static constexpr size_t kMaxEntries = proto::kMaxListEntries;
  bool insert(std::string_view s);  // true when s was not in the set (or the set is full)
  bool contains(std::string_view s) const;
  size_t size() const { return digests_.size(); }

 private:
  std::set<std::array<uint8_t, 16>> digests_;
};

// What the sessions of one recv -r command share (--retries): each retry session is given the
// same one.
struct TreeSessions {
  // The directories the command made: a retry finds them there and still treats them as the
  // command's own, giving them their listed modes (a thirtieth re-attack, B-N3: they kept the mode
  // they were made with). Filled by recv_tree.
  MadeDirs made;
  // The top the first session chose, which every retry continues: a retry runs "as with --resume",
  // and took a DEST recorded as an earlier copy for the copy where the first session had put the
  // tree in DEST/NAME by scp's rule, writing the rest into DEST itself over the user's files, exit 0
  // (a fifty-first re-attack, C51-3). An existing DEST recorded as the copy is continued only with
  // the user's own --resume (Client::resume_asked). Set by recv_tree.
  std::optional<std::filesystem::path> placed;
  // The files (remote paths) the command already reported, fetched or failed: a retry leaves them
  // alone. It fetched them again, and a file changed on the server in between replaced the one
  // whose line and --json object were already printed, without a word (a fifty-second re-attack,
  // C52-2). Filled by the caller, which reports.
  SeenSet settled;
  // The files of the latest listing, by remote path, with where each goes here: when a session
  // ends on a failure no retry takes over, the caller names each one not yet reported, as send -r
  // does (a fifty-eighth re-attack, I58-7: only the tree was named), and says which of them keeps
  // a partial file (a sixtieth re-attack, O60-5: each was said to). One listing's worth, replaced
  // (not added to) when a session's listing comes; until then the earlier one stays, so that a
  // retry whose listing is refused (the tree gone, or now a file) still names them (O60-4). Set
  // by recv_tree.
  struct Listed {
    std::string remote;
    std::filesystem::path local;
  };
  std::vector<Listed> files;
  // The files of an earlier listing, not yet reported, that a later one no longer holds (gone
  // from the server meanwhile): the caller names each "not fetched" and lets them go (a
  // sixty-first re-attack, S61-1: they had no line, exit 0). Set by recv_tree.
  std::vector<Listed> vanished;
};

// recv -r: lists `remote` on the server and recreates it under `dest` with scp -r semantics: in
// dest/NAME when dest is an existing directory (NAME the last component of the request, never of
// the server's reply; the root "." has none, its contents go into dest), else as dest itself
// (whose parent must exist). The reply must name the directory asked for, and every entry is a
// relative path below it without control bytes; else nothing is written. Every directory and
// file is created relative to its parent's open fd (mkdirat, openat with O_NOFOLLOW): a symbolic
// link already in the destination is never followed. Files are fetched one after the other on
// the same connection through fetch_one(remote path, local path as shown, size, parent dir fd
// holding local.filename()), which reports progress and throws Failure to stop everything.
// Directories are created owner-writable while they are filled; after their contents (deepest
// first) the ones this command created get the listed mode & ~umask, with `preserve` the exact
// mode (never setuid/setgid) and mtime; directories that existed keep theirs. `across`, when
// given, is what the sessions of one command share (--retries; TreeSessions).
// Symlinks and special files on the server are not fetched: `note` gets one line for each.
// Throws Failure (one line) on the first error; what was complete stays, nothing half-written
// appears under a destination name.
void recv_tree(Client& client, const std::string& remote, const std::filesystem::path& dest, bool preserve,
               const std::function<void(const std::string& remote, const std::filesystem::path& local,
                                        uint64_t size, int dirfd)>& fetch_one,
               const std::function<void(const std::string& line)>& note,
               // When given, small files are fetched pipelined (client/pipeline.h) rather than through
               // fetch_one, and each one's verdict arrives here: its result, or the failure that stopped this
               // file alone (the others go on). A failure of the connection is still thrown.
               const std::function<void(const std::string& remote, const std::filesystem::path& local,
                                        const FileResult* ok, const proto::Failure* failed)>& pipelined = {},
               TreeSessions* across = nullptr);

}  // namespace aesxfer::client
