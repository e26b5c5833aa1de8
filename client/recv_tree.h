// recv -r and recv --resume (issue 7, "Across machines"): the client's side of the list op and
// of a get with the resume flag (Client::list, Client::fetch_resumed in recv_tree.cpp), and the
// local half of recv -r. See docs/PROTOCOL.md, "Listing" and "Resumed get".
#pragma once
#include <filesystem>
#include <functional>
#include <string>

#include "client/client.h"

namespace aesxfer::net {

// recv -r: lists `remote` on the server and recreates it under `dest` with scp -r semantics: in
// dest/NAME when dest is an existing directory (NAME the remote directory's name; the root "."
// has none, its contents go into dest), else as dest itself (whose parent must exist). Files
// are fetched one after the other on the same connection through fetch_one(remote path, exact
// local path), which reports progress and throws Failure to stop everything. Directories are
// created owner-writable while they are filled; after their contents (deepest first) new ones
// get the listed mode & ~umask, and with `preserve` every one gets the exact mode and mtime.
// Symlinks and special files on the server are not fetched: `note` gets one line for each.
// Throws Failure (one line) on the first error; what was complete stays, nothing half-written
// appears under a destination name.
void recv_tree(
    Client& client, const std::string& remote, const std::filesystem::path& dest, bool preserve,
    const std::function<void(const std::string& remote, const std::filesystem::path& local, uint64_t size)>& fetch_one,
    const std::function<void(const std::string& line)>& note);

}  // namespace aesxfer::net
