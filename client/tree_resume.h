// -r --resume continues the destination the interrupted run was writing.
//
// send -r --resume (the rule below, applied to the server's DEST):
// scp's rule for a tree (DEST/NAME when DEST is a directory, else DEST) depends on whether DEST
// exists, and the interrupted run created it: a resume would nest the tree one level deeper and
// start a second copy from zero. With --resume a DEST that already is the copy is continued
// instead. The names it holds are no evidence (a directory the user already had, holding
// notes.txt, was taken for the copy of a tree with a notes.txt at its top, and the user's file
// was replaced: a forty-ninth re-attack, B49-5), nor is its path (one removed and made again
// there was: a fifty-sixth, B56-2). So each send -r records the directory its copy goes into
// (DEST, or DEST/NAME) before anything goes into it, in $AESXFER_HOME/tree_copies ("sent", the
// server's host key fingerprint, the path, the server's identity of that directory (PROTOCOL.md
// 3.5), the local source's absolute path), and --resume continues only a DEST whose stat gives an
// identity recorded there for the same source; any other nests once, as scp would, which loses
// nothing. So running the same `-r --resume` command again lands in the same place, as rsync does
// (docs/aesxfer.1, send and recv --resume).
//
// recv -r --resume cannot use that rule: the names would come from the server, and a hostile one
// lists a victim directory's own names (.bashrc, .ssh, ...) to make `recv -r --resume host:x ~`
// write into ~ itself (scp's CVE-2019-6111 class). Its evidence is local: each recv -r that
// creates DEST itself as the copy records DEST (device, inode and birth time: an inode number is
// reused by the next directory made after a removal) with the source it copies (the server's
// host key fingerprint and the path on it) in $AESXFER_HOME/tree_copies; --resume continues an
// existing DEST only when it is recorded there for the same source, else scp's rule (DEST/NAME)
// holds. A record written before the fingerprint was part of it (0.5.0 and earlier) matches nothing:
// such a DEST nests once, as scp would.
#pragma once
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace aesxfer::client {

// recv -r: records the directory open as dirfd (just created as the copy of `source`) in
// home/tree_copies, by device, inode and birth time; the file keeps the latest 1000 records.
// Quietly does nothing when it cannot (no birth time on the file system: a later --resume then
// nests, as scp would).
void remember_tree_copy(const std::filesystem::path& home, int dirfd, const std::string& source);
// recv -r --resume: true when the directory open as dirfd is recorded as the copy of `source`.
bool is_tree_copy(const std::filesystem::path& home, int dirfd, const std::string& source);

// send -r: records that `dest` (normal_request's form) on the server whose host key has
// `fingerprint`, the directory that server identifies as `dir_id` (its mkdir's answer, PROTOCOL.md
// 3.5), is the copy of the local directory `local` (absolute); and whether it is (`dir_id` from
// a stat of DEST): a directory removed and made again under the same path is another (a
// fifty-sixth re-attack, B56-2: the path alone was recorded, and the resume replaced a file the
// server's user had put in the new directory). Records with a tab or LF in dest, or LF in local,
// or without an identity (an older server, a file system without birth times: a --resume then
// nests, as scp would) are neither kept nor found.
void remember_sent_copy(const std::filesystem::path& home, const std::string& fingerprint,
                        const std::string& dest, const std::string& dir_id, const std::string& local);
bool is_sent_copy(const std::filesystem::path& home, const std::string& fingerprint, const std::string& dest,
                  const std::string& dir_id, const std::string& local);

}  // namespace aesxfer::client
