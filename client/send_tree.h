// send and send -r: the files of one send over one connection, beside recv -r (client/recv_tree.h).
// Small files go pipelined (client/pipeline.h, docs/PROTOCOL.md "Pipelining"); a large one, or any
// with --resume or -l, waits for the pipeline to empty and goes on its own through the caller's
// send_one. -r walks the local tree, creates the directories on the server and sends the files
// below; -r --resume probes every file first (docs/PROTOCOL.md 3.6) and sends only what the server
// lacks. What a file shows (progress, report lines) is the caller's: it comes through Hooks.
#pragma once
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
// may have named it with escape sequences), then why.
struct TreeEntry {
  std::filesystem::path local;
  std::string rel;  // relative to the walked directory, '/'-separated
  bool dir = false;
  uint32_t mode = 0;
  int64_t mtime = 0;
};
std::vector<TreeEntry> walk_tree(const std::filesystem::path& top, std::vector<std::string>* skipped);

class TreeSender {
 public:
  struct Hooks {
    // A file sent on its own, not pipelined (large, --resume, -l): moves it, shows it and reports
    // it; false after a failure it reported.
    std::function<bool(const std::filesystem::path& local, const std::string& to)> send_one;
    // A pipelined file's verdict, when its answers arrive: its result (shown as `shown`), or the
    // failure that stopped this file alone.
    std::function<void(const std::string& shown, const FileResult* ok, const proto::Failure* failed)> verdict;
    // --resume found the file whole and identical on the server: nothing moved.
    std::function<void(const FileResult& done)> up_to_date;
    // A failure outside any one file's verdict: the connection, or a directory the server refused.
    std::function<void(const proto::Failure& f)> failed;
    // A line about the local tree ("skipping NAME (not a regular file)").
    std::function<void(const std::string& line)> note;
  };
  TreeSender(Client& c, Hooks hooks, bool preserve) : c_(c), hooks_(std::move(hooks)), preserve_(preserve) {}

  // One file, pipelined when it is small; false when a failure stopped the connection. probed:
  // --resume found nothing to resume from (the file goes whole, pipelined when small).
  bool send_file(const std::filesystem::path& local, const std::string& to, bool probed = false);
  // -r: like scp, DEST/NAME when DEST is a directory on the server, else DEST itself; with
  // --resume, DEST itself when it already is the copy (client/tree_resume.h). False when a
  // failure stopped the connection.
  // `placed`, when given: where the tree went on the server; empty on the first call, which
  // fills it in, and given back by a retry (--retries) so that the same copy is continued.
  bool send_tree(const std::filesystem::path& local, const std::string& dest, std::string* placed = nullptr);
  // Waits for the answers still due; false when the connection failed meanwhile.
  bool finish();

 private:
  Client& c_;
  Hooks hooks_;
  bool preserve_;
  Pipeline pipeline_{c_};

  bool send_resumed(const std::vector<TreeEntry>& entries, const std::string& base,
                    const Pipeline::DirDone& dir_failed);
};

}  // namespace aesxfer::client
