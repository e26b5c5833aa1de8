// -r --resume continues the destination the interrupted run was writing.
// scp's rule for a tree (DEST/NAME when DEST is a directory, else DEST) depends on whether DEST
// exists, and the interrupted run created it: a resume would nest the tree one level deeper and
// start a second copy from zero. With --resume a DEST that already is the copy is continued
// instead: an existing directory that holds something, and nothing but names found at the top of
// the source (a kept partial file ".X.aesxfer-partial" counts as X; a receiver's temporary files
// are left out). So running the same `-r --resume` command again always lands in the same place,
// as rsync does (docs/aesxfer.1, send and recv --resume).
#pragma once
#include <set>
#include <string>
#include <vector>

namespace aesxfer::client {

// True when a directory whose entries (one level) are `there` is already the copy of a source
// whose top-level names are `source` (see above).
bool is_copy_of(const std::vector<std::string>& there, const std::set<std::string>& source);

// The names in `there` (paths relative to a listed directory, '/'-separated) that are at its top.
std::vector<std::string> top_names(const std::vector<std::string>& there);

}  // namespace aesxfer::client
