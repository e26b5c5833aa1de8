// send and send -r: the files of one send over one connection, beside recv -r (client/recv_tree.h).
// Small files go pipelined (client/pipeline.h, docs/PROTOCOL.md "Pipelining"); a large one, or any
// with --resume or -l, waits for the pipeline to empty and goes on its own through the caller's
// send_one. -r walks the local tree, creates the directories on the server and sends the files
// below; -r --resume probes every file first (docs/PROTOCOL.md 3.6) and sends only what the server
// lacks. What a file shows (progress, report lines) is the caller's: it comes through Hooks.
#pragma once
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/pipeline.h"

namespace aesxfer::client {

// The contents of a local directory, parents before their contents, names sorted. Regular files
// (also through symlinks) and directories; symlinks to directories and special files are listed in
// `skipped` (not followed: no loops), each as a line to show: its name made printable (another user
// may have named it with escape sequences), then why. Each directory below the top is opened from
// its parent's fd with O_NOFOLLOW, never by its path again; a file is later opened from its
// directory opened by path, which must still be the directory read here (its device and inode):
// another user who can write to the tree cannot swap a directory for a link to one of ours
// between the walk and the sends (an eighth re-attack, F3).
struct TreeEntry {
  std::filesystem::path local;
  std::string rel;  // relative to the walked directory, '/'-separated
  bool dir = false;
  uint32_t mode = 0;
  int64_t mtime = 0;
  dev_t parent_dev = 0;  // the directory that holds it, as the walk read it
  ino_t parent_ino = 0;
};
// The tree below top, parents before their contents, names sorted. `skipped` gets a line for what is
// not sent (symbolic links to directories, special files); `unreadable`, when given, one for each
// directory below top that may not be read or searched (left out with all below it; without it,
// such a directory is an error).
std::vector<TreeEntry> walk_tree(const std::filesystem::path& top, std::vector<std::string>* skipped,
                                 std::vector<std::string>* unreadable = nullptr);

class TreeSender {
 public:
  struct Hooks {
    // A file sent on its own, not pipelined (large, --resume, -l): moves it, shows it and reports
    // it; false after a failure it reported.
    // `fd`: `local` already open (open_source, client.h), or -1 for send_one to open it.
    std::function<bool(const std::filesystem::path& local, int fd, const std::string& to)> send_one;
    // A pipelined file's verdict, when its answers arrive: its result (shown as `shown`), or the
    // failure that stopped this file alone.
    std::function<void(const std::string& shown, const FileResult* ok, const proto::Failure* failed)> verdict;
    // --resume found the file whole and identical on the server: nothing moved.
    std::function<void(const FileResult& done)> up_to_date;
    // A failure outside any one file's verdict: the connection, or a directory the server refused.
    std::function<void(const proto::Failure& f)> failed;
    // A line about the local tree (a partial file the server passed over).
    std::function<void(const std::string& line)> note;
    // Optional (else `note`): what the walk skips by design ("skipping NAME (not a regular file)").
    std::function<void(const std::string& line)> skipped;
    // Optional: a file of the tree that a failure ending the session kept from being sent (the
    // caller names it, unless a retry will send it).
    std::function<void(const std::string& shown)> not_sent;
    // Optional: a file whose put goes pipelined now (send_one's put says so through its on_start).
    std::function<void(const std::string& shown)> sending;
    // Optional: the tree as the walk read it, before anything is sent.
    std::function<void(const std::vector<TreeEntry>& entries)> walked;
  };
  TreeSender(Client& c, Hooks hooks, bool preserve) : c_(c), hooks_(std::move(hooks)), preserve_(preserve) {}

  // One file, pipelined when it is small; false when a failure stopped the connection. probed:
  // --resume found nothing to resume from (the file goes whole, pipelined when small).
  bool send_file(const std::filesystem::path& local, const std::string& to, bool probed = false);
  // -r: like scp, DEST/NAME when DEST is a directory on the server, else DEST itself; with
  // --resume, DEST itself when it already is the copy (client/tree_resume.h). False when a
  // failure stopped the connection.
  // `placed`, when given: where the tree went on the server; empty on the first call, which
  // fills it in, and given back by a retry (--retries) so that the same copy is continued, and
  // only that one (its identity, when the server gave it).
  struct Placed {
    std::string path, dir_id;
  };
  bool send_tree(const std::filesystem::path& local, const std::string& dest, Placed* placed = nullptr);
  // Waits for the answers still due; false when the connection failed meanwhile.
  bool finish();

 private:
  Client& c_;
  Hooks hooks_;
  bool preserve_;
  Pipeline pipeline_{c_};

  bool send_resumed(const std::vector<TreeEntry>& entries, const std::string& base,
                    const Pipeline::DirDone& dir_failed);
  std::vector<TreeEntry> within_path_limit(std::vector<TreeEntry> entries, const std::string& base);
  // Opens a file of the walk below its directory, which must still be the one the walk read;
  // throws Failure (origin local) naming the file.
  files::UniqueFd open_entry(const TreeEntry& e, struct stat& st);
  // The directory that holds a file of the walk, opened by path (kept open for the next file of
  // the same directory) and required to still be the one the walk read; throws Failure.
  int entry_dir(const TreeEntry& e);
  // open_entry, or, when it fails, that file's verdict and no descriptor.
  files::UniqueFd open_or_report(const TreeEntry& e, struct stat& st);
  // One file, open: pipelined when small, else through send_one.
  bool send_open(const std::filesystem::path& local, int fd, const struct stat& st, const std::string& to,
                 bool probed);
  // One file of the walk; false when a failure stopped the connection (a file that cannot be
  // opened is that file's verdict).
  bool send_entry(const TreeEntry& e, const std::string& to, bool probed = false);
  // After a failure that ended the session: the files of `entries` from index `from` on, to
  // Hooks::not_sent (a twentieth re-attack, N3: they were left out without a word).
  void name_rest(const std::vector<TreeEntry>& entries, size_t from);
  std::string place(const std::string& dest, const std::string& name, const std::string& source,
                    const struct stat& st, Placed* placed);
  // A file of the walk's size for its probe (a stat in entry_dir); false when it is not a regular
  // file there any more (sending it says why).
  bool probe_size(const TreeEntry& e, struct stat& st);
  std::filesystem::path parent_path_;  // the last directory open_entry opened, kept open
  files::UniqueFd parent_fd_;
};

}  // namespace aesxfer::client
