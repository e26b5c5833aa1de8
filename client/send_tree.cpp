#include "client/send_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "client/remote.h"
#include "client/tree_resume.h"
#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/io.h"

namespace aesxfer::client {

using proto::Failure;
using proto::printable;

namespace fs = std::filesystem;

namespace {

// The names in the directory open as dirfd, sorted (a second descriptor of it: the caller's
// keeps its offset).
std::vector<std::string> names_in(int dirfd, const fs::path& dir) {
  files::UniqueFd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* d = fd ? ::fdopendir(fd.get()) : nullptr;
  if (!d)
    throw Failure(printable(dir.string()) + ": " + files::errno_text(errno), proto::Status::io_error, errno);
  fd.release();  // closedir closes it
  std::vector<std::string> names;
  while (const dirent* de = ::readdir(d))
    if (std::strcmp(de->d_name, ".") != 0 && std::strcmp(de->d_name, "..") != 0)
      names.emplace_back(de->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// Why an entry of the tree is left out and the command fails at the end, or "":
// - a name of the shapes aesxfer keeps for its own working files, which no server stores: skipped in
//   one line, a directory with all below it, as recv -r does (a thirty-sixth re-attack, B6: the
//   server refused each, and the files below such a directory failed one by one);
// - another user's link to a file that user does not own (files::foreign_link; one in a sticky
//   directory is judged by the kernel's rule, with its own words, when it is opened).
std::string refused_entry(const std::string& name, bool link, const struct stat& lst, const struct stat& st,
                          const struct stat& ds) {
  if (files::is_reserved_name(name))
    return std::string("a name of the shape aesxfer keeps for its own partial and temporary files; skipped") +
           (S_ISDIR(st.st_mode) ? " with all below it" : "");
  return link && files::planted_by(lst.st_uid, ds).empty() ? files::foreign_link(lst, st) : "";
}

// A skipped entry is named by its local path as the user wrote the tree's top, as recv -r names one
// by the server path typed (a thirty-fifth re-attack, B-N13: "skipping fifo" named no tree).
void walk(int dirfd, const fs::path& dir, const std::string& prefix, std::vector<TreeEntry>& out,
          std::vector<std::string>* skipped, std::vector<std::string>* unreadable) {
  struct stat ds {};
  if (::fstat(dirfd, &ds) != 0) throw Failure(printable(dir.string()) + ": " + files::errno_text(errno));
  for (const auto& name : names_in(dirfd, dir)) {
    const std::string rel = prefix.empty() ? name : prefix + "/" + name;
    struct stat lst {
    }, st{};
    if (::fstatat(dirfd, name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const bool link = S_ISLNK(lst.st_mode);
    if (::fstatat(dirfd, name.c_str(), &st, 0) != 0) {
      // A loop is not dangling (a thirty-sixth re-attack, B11: "l_loop (dangling symlink)").
      const std::string why = errno == ELOOP    ? "a loop of symbolic links"
                              : errno == ENOENT ? "dangling symlink"
                                                : files::errno_text(errno);
      if (skipped) skipped->push_back(printable((dir / name).string()) + " (" + why + ")");
      continue;
    }
    if (unreadable) {  // else these are sent, and the server says why not
      if (std::string why = refused_entry(name, link, lst, st, ds); !why.empty()) {
        unreadable->push_back(printable((dir / name).string()) + ": " + why);  // the command fails at the end
        continue;
      }
    }
    TreeEntry t;
    t.local = dir / name;
    t.rel = rel;
    t.mode = st.st_mode & 07777;
    t.mtime = st.st_mtim.tv_sec;
    t.parent_dev = ds.st_dev;
    t.parent_ino = ds.st_ino;
    if (S_ISDIR(st.st_mode)) {
      if (link) {
        if (skipped)
          skipped->push_back(printable((dir / name).string()) + " (symlink to a directory, not followed)");
        continue;
      }
      const files::UniqueFd sub(
          ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub && (errno == ELOOP || errno == ENOTDIR)) {  // replaced since the fstatat
        if (skipped)
          skipped->push_back(printable((dir / name).string()) +
                             " (replaced while the tree was read, not followed)");
        continue;
      }
      // A directory this user may not read or search (mode 0000, 0600): named, skipped with all
      // below it, and the rest goes (a twelfth re-attack, G5: the whole send stopped there).
      const auto unreadable_dir = [&] {
        unreadable->push_back(printable(t.local.string()) + ": permission denied; skipped with all below it");
      };
      if (!sub) {
        if (errno != EACCES || !unreadable)
          throw Failure(printable(t.local.string()) + ": " + files::errno_text(errno),
                        proto::Status::io_error, errno);
        unreadable_dir();
        continue;
      }
      t.dir = true;
      const size_t at = out.size();
      out.push_back(t);
      try {
        walk(sub.get(), t.local, rel, out, skipped, unreadable);  // reads its names before anything else
      } catch (const Failure& f) {                                // its names could not be read
        if (f.err != EACCES || !unreadable) throw;
        out.resize(at);
        unreadable_dir();
      }
    } else if (S_ISREG(st.st_mode)) {
      out.push_back(t);
    } else if (skipped) {
      skipped->push_back(printable((dir / name).string()) + " (not a regular file)");
    }
  }
}

// Where an entry of the tree goes on the server, below the tree's place `base`.
std::string below(const std::string& base, const std::string& rel) {
  return base == "." ? rel : base + "/" + rel;
}

// Where a file of the tree is sent: its directory on the server, with a trailing slash, under its
// own name (the local file's). The directory must exist (a refused mkdir never turns the file into
// that directory's name), and a directory standing where the file goes is refused as "is a
// directory", never written into: sent as its whole path, a file went into a server directory of
// its own name and the command said ok (a fifteenth re-attack, K1).
std::string file_dest(const std::string& base, const std::string& rel) {
  const size_t slash = rel.rfind('/');
  return (slash == std::string::npos ? base : below(base, rel.substr(0, slash))) + "/";
}

}  // namespace

std::vector<TreeEntry> walk_tree(const fs::path& top, std::vector<std::string>* skipped,
                                 std::vector<std::string>* unreadable) {
  std::vector<TreeEntry> out;
  // Every link on the way judged as for a single source (a thirty-fourth re-attack, A-N1: another
  // user's link in /tmp named as the tree was followed, and the directory it named was sent).
  const files::UniqueFd fd = files::open_guarded_dir(top);
  if (!fd) throw Failure(printable(top.string()) + ": " + files::errno_text(errno));
  walk(fd.get(), top, "", out, skipped, unreadable);
  return out;
}

int TreeSender::entry_dir(const TreeEntry& e) {
  const fs::path dir = e.local.parent_path();
  struct stat ds {};
  if (!parent_fd_ || dir != parent_path_) {
    parent_fd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    parent_path_ = dir;
  }
  if (!parent_fd_ || ::fstat(parent_fd_.get(), &ds) != 0 || ds.st_dev != e.parent_dev ||
      ds.st_ino != e.parent_ino) {
    parent_fd_.reset();
    throw Failure(printable(e.local.string()) +
                  ": its directory was replaced since the tree was read; not sent");
  }
  return parent_fd_.get();
}

files::UniqueFd TreeSender::open_entry(const TreeEntry& e, struct stat& st) {
  return open_source(entry_dir(e), e.local.filename(), e.local, st);
}

bool TreeSender::send_file(const fs::path& local, const std::string& to, bool probed) {
  struct stat st {};
  files::UniqueFd fd;
  try {
    fd = open_source(AT_FDCWD, local, local, st);
  } catch (const Failure&) {  // send_one says why, after the pipeline's answers
    try {
      pipeline_.drain();
    } catch (const Failure& f) {
      hooks_.failed(f);
      return false;
    }
    return hooks_.send_one(local, -1, to) || c_.can_continue();
  }
  return send_open(local, fd.get(), st, to, probed);
}

bool TreeSender::probe_size(const TreeEntry& e, struct stat& st) {
  try {  // a stat below the walk's directory: the file itself is opened once, when it is sent
    const int dir = entry_dir(e);
    const std::string name = e.local.filename().string();
    // Not through a link open_source() will refuse (another user's in a sticky directory): the size
    // of the file it names went to the server in a probe (a thirty-third re-attack, A-N2).
    // Only a link is walked (files::resolve_guarded_at), every link on its way judged.
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    if (!S_ISLNK(st.st_mode)) return S_ISREG(st.st_mode);
    const files::GuardedEntry g = files::resolve_guarded_at(dir, e.local.parent_path(), name);
    return ::fstatat(g.dir.get(), g.name.c_str(), &st, g.magic ? 0 : AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISREG(st.st_mode);
  } catch (const Failure&) {
    return false;
  }
}

files::UniqueFd TreeSender::open_or_report(const TreeEntry& e, struct stat& st) {
  try {
    return open_entry(e, st);
  } catch (const Failure& f) {  // this file alone
    hooks_.verdict(e.local.string(), nullptr, &f);
    return files::UniqueFd();
  }
}

bool TreeSender::send_entry(const TreeEntry& e, const std::string& to, bool probed) {
  struct stat st {};
  const files::UniqueFd fd = open_or_report(e, st);
  return !fd || send_open(e.local, fd.get(), st, to, probed);
}

bool TreeSender::send_open(const fs::path& local, int fd, const struct stat& st, const std::string& to,
                           bool probed) {
  try {
    if (pipeline_.can_put(uint64_t(st.st_size), probed) && !files::made_when_read(fd, st)) {
      if (hooks_.sending) hooks_.sending(local.string());
      pipeline_.put(
          local, to, "",
          [this, shown = local.string()](const FileResult* r, const Failure* f) {
            hooks_.verdict(shown, r, f);
          },
          fd);
      return true;
    }
    pipeline_.drain();
  } catch (const PipelineStopped&) {  // this file failed as it was read: every verdict given
    return false;
  } catch (const Failure& f) {  // the connection failed: nothing more goes
    hooks_.failed(f);
    return false;
  }
  return hooks_.send_one(local, fd, to) || c_.can_continue();
}

void TreeSender::name_rest(const std::vector<TreeEntry>& entries, size_t from) {
  if (!hooks_.not_sent) return;
  for (size_t i = from; i < entries.size(); ++i)
    if (!entries[i].dir) hooks_.not_sent(entries[i].local.string());
}

bool TreeSender::finish() {
  try {
    pipeline_.drain();
    return true;
  } catch (const Failure& f) {
    hooks_.failed(f);
    return false;
  }
}

// -r --resume (docs/PROTOCOL.md 3.6, protocol 4): the directories and a probe of every file
// pipelined first (one round trip for the tree), then only what the server lacks: a file it holds
// whole and identical is reported as up to date and not sent, one with a kept partial file is
// resumed (put asks again and checks the prefix), the rest goes whole (pipelined when small).
// False when a failure stopped the connection.
bool TreeSender::send_resumed(const std::vector<TreeEntry>& entries, const std::string& base,
                              const Pipeline::DirDone& dir_failed) {
  std::vector<std::optional<proto::Message>> said(entries.size());
  std::vector<char> whole(entries.size(), 0);  // the server refused the kept partial file
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    struct stat st {};
    if (e.dir)
      pipeline_.mkdir(below(base, e.rel), e.mode, e.mtime, false, dir_failed);
    else if (probe_size(e, st))  // else sending it says why
      pipeline_.probe(file_dest(base, e.rel), e.local.filename().string(), uint64_t(st.st_size),
                      [this, &said, &whole, i, dest = printable(below(base, e.rel))](const proto::Message* m,
                                                                                     const Failure* f) {
                        if (m) said[i] = *m;
                        // A kept partial file the server does not trust (another user's, linked
                        // or writable by others) is left alone: say so, the file goes whole.
                        if (m && !m->text.empty() && m->text != proto::kProbeComplete) {
                          // The server's words, quoted and cut, as for one file (a forty-sixth
                          // re-attack, B-F3: bare, they imitated the client's login hint).
                          hooks_.note("the server (" + c_.peer() + ") said " + proto::peer_words(m->text) +
                                      " of " + dest + "; sending it whole");
                          whole[i] = 1;
                        } else if (f && f->status == proto::Status::permission) {
                          hooks_.note(std::string(f->what()) + "; sending it whole");
                          whole[i] = 1;
                        }
                      });
  }
  // A connection lost while the probes are answered names every file, as a plain send -r does (a
  // fifty-eighth re-attack, I58-6: one line about the connection, and --json printed nothing).
  if (!finish()) {
    name_rest(entries, 0);
    return false;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (e.dir) continue;
    struct stat st {};
    const files::UniqueFd fd = open_or_report(e, st);
    if (!fd) continue;
    FileResult done;
    auto kept = Client::Kept::nothing;
    if (said[i]) {
      if (said[i]->size > proto::kMaxAheadSize) pipeline_.drain();  // its hash pings the server
      kept = c_.judge_probe(e.local, *said[i], done, fd.get());
    }
    if (kept == Client::Kept::complete) {
      hooks_.up_to_date(done);
    } else if (kept == Client::Kept::partial) {
      pipeline_.drain();
      if (!hooks_.send_one(e.local, fd.get(), file_dest(base, e.rel)) && !c_.can_continue()) {
        name_rest(entries, i + 1);
        return false;
      }
    } else {
      // Whole, as said: a large file then goes without the resume flag, which would only meet the
      // same refusal and end the tree there (a tenth re-attack).
      const bool resume = c_.set_resuming(!whole[i] && c_.resuming());
      const bool ok = send_open(e.local, fd.get(), st, file_dest(base, e.rel), true);
      c_.set_resuming(resume);
      if (!ok) {
        name_rest(entries, i + 1);
        return false;
      }
    }
  }
  return true;
}

// The entries whose path on the server fits a request (proto::kMaxPath); each that does not is
// reported and left out with all below it, and the rest of the tree goes (a sixteenth re-attack,
// L6: the request could not be encoded, a local failure, which ended the whole tree unnamed).
std::vector<TreeEntry> TreeSender::within_path_limit(std::vector<TreeEntry> entries,
                                                     const std::string& base) {
  std::vector<TreeEntry> kept;
  std::string cut;  // the rel of the last entry left out ("" for none)
  for (auto& e : entries) {
    if (!cut.empty() && e.rel.compare(0, cut.size() + 1, cut + "/") == 0) continue;
    const std::string path = e.dir ? below(base, e.rel) : file_dest(base, e.rel);
    if (path.size() > proto::kMaxPath) {
      hooks_.failed(Failure(printable(e.local.string()) + ": its path on the server would be " +
                            std::to_string(path.size()) + " bytes, over the protocol's " +
                            std::to_string(proto::kMaxPath) + "; skipped" +
                            (e.dir ? " with all below it" : "")));
      cut = e.rel;
      continue;
    }
    kept.push_back(std::move(e));
  }
  return kept;
}

namespace {
// place()'s refusal of a directory that is no longer the copy it was (D57-2, G58-1): this source
// alone fails, its files named.
struct NotTheCopy : Failure {
  using Failure::Failure;
};
}  // namespace

// Where the tree `source` (named `name`) goes on the server, made there: a retry's `placed`, the
// copy DEST already is (--resume: this client's record of DEST names the directory the server
// identifies DEST as, client/tree_resume.h), else DEST/NAME when DEST is a directory and DEST
// itself when it is not (scp's rule). `placed` is set before the mkdir.
std::string TreeSender::place(const std::string& dest, const std::string& name, const std::string& source,
                              const struct stat& st, Placed* placed) {
  const auto mode = st.st_mode & 07777;
  std::string dir_id;
  if (placed && !placed->path.empty()) {
    // A retry: the copy the lost connection was writing, made again if its mkdir never ran (and
    // recorded, if that mkdir's answer was lost); never another directory made under its name
    // meanwhile (a fifty-seventh re-attack, D57-2: the retry wrote into it and replaced the
    // server user's file, exit 0).
    const std::string base = c_.mkdir(placed->path, "", mode, st.st_mtim.tv_sec, false, &dir_id);
    if (!placed->dir_id.empty() && dir_id != placed->dir_id)
      throw NotTheCopy(c_.remote_name(printable(placed->path)) +
                       ": no longer the directory this command made for " + printable(source) +
                       " (it was removed and made again meanwhile); nothing more is sent into it" +
                       c_.port_note());
    remember_sent_copy(c_.home(), c_.host_key_fingerprint(), base, dir_id, source);
    placed->dir_id = dir_id;
    return base;
  }
  // One stat says whether DEST is a directory and which one: the copy is DEST itself when this
  // client recorded that very directory as this source's copy. No listing: a refused one (a busy
  // server, --max-list) made the resume nest a second copy, and a copy still empty was nested
  // (a fifty-seventh re-attack, D57-3 and D57-1).
  // (The server's root is never the copy: is_remote_dir gives it no identity.)
  const std::string asked = normal_request(dest);
  std::string dest_id;
  const bool is_dir = c_.is_remote_dir(dest, &dest_id);
  // The user's --resume only: a retry of --retries resumes files, never a copy the same command
  // would not have continued without the loss (a fifty-eighth re-attack, I58-1: a plain send -r
  // that lost its connection sent a later tree into its older copy, over its files, exit 0).
  const bool continued = c_.resume_asked() && !dest_id.empty() &&
                         is_sent_copy(c_.home(), c_.host_key_fingerprint(), asked, dest_id, source);
  // Where the copy goes is settled before the mkdir that makes it: DEST/NAME when DEST is there,
  // else DEST. Learnt only from the mkdir's answer, a lost answer left the retry to ask scp's
  // question again, and DEST, made by the lost session, was there: the tree went a level deeper,
  // exit 0 (a fifty-sixth re-attack, B56-3).
  if (placed) *placed = {continued || !is_dir ? asked : below(asked, name), continued ? dest_id : ""};
  const std::string base = c_.mkdir(dest, continued ? "" : name, mode, st.st_mtim.tv_sec, false, &dir_id);
  // The copy the stat found, still: another directory moved in under DEST between the stat and
  // the mkdir is never continued (a fifty-eighth re-attack, G58-1: another user's, in a team
  // directory, took the rest of the tree, exit 0).
  if (continued && dir_id != dest_id)
    throw NotTheCopy(c_.remote_name(printable(asked)) +
                     ": no longer the directory this client recorded as the copy of " + printable(source) +
                     " (it was moved or replaced meanwhile); nothing is sent into it" + c_.port_note());
  // Recorded as this source's copy before anything goes into it: DEST itself when it did not
  // exist, else DEST/NAME (a continued one is recorded already).
  if (!continued) remember_sent_copy(c_.home(), c_.host_key_fingerprint(), base, dir_id, source);
  if (placed) *placed = {base, dir_id};
  return base;
}

bool TreeSender::send_tree(const fs::path& local, const std::string& dest, Placed* placed) {
  std::vector<std::string> skipped, unreadable;
  std::vector<TreeEntry> entries;
  try {
    entries = walk_tree(local, &skipped, &unreadable);
  } catch (const Failure& f) {  // its top cannot be read (a refused link on the way): this source alone
    if (f.origin != proto::Origin::local) throw;
    // Reported as the source's verdict (a thirty-fifth re-attack, B-N1: the failure left the
    // session, and every other source got its line or none).
    hooks_.verdict(local.string(), nullptr, &f);
    return true;
  }
  for (const auto& sk : skipped) (hooks_.skipped ? hooks_.skipped : hooks_.note)("skipping " + sk);
  for (const auto& u : unreadable) hooks_.failed(Failure(u));  // the command fails at the end
  if (hooks_.walked) hooks_.walked(entries);
  struct stat st {};
  ::stat(local.c_str(), &st);
  // The source as named, absolute, without a trailing slash ("tree/" is tree): its last component
  // names the copy. tree_copies records the directory it is, links resolved: the same tree named
  // through a link (or a link named through its target) was another source, and --resume sent a
  // second copy, whole (a fifty-eighth re-attack, I58-8).
  fs::path top = fs::absolute(local).lexically_normal();
  if (!top.has_filename()) top = top.parent_path();
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(top, ec);
  const std::string name = top.filename().string(), source = (ec ? top : real).string();
  // The top's place is the one answer waited for (it names where everything else goes); the
  // directories and small files below it are pipelined.
  if (!finish()) return false;
  std::string base;
  try {
    base = place(dest, name, source, st, placed);
  } catch (const NotTheCopy& f) {
    // The copy is no longer the directory it was: this source's files are each named, and the next
    // source goes on (a fifty-eighth re-attack, G58-3: the refusal named no file of the tree).
    hooks_.failed(f);
    name_rest(entries, 0);
    return true;
  }
  auto dir_failed = [this](const std::string*, const Failure* f) {
    if (f) hooks_.failed(*f);
  };
  entries = within_path_limit(std::move(entries), base);
  try {
    if (c_.resuming()) {
      if (!send_resumed(entries, base, dir_failed)) return false;
    } else {
      for (size_t i = 0; i < entries.size(); ++i) {
        const auto& e = entries[i];
        if (e.dir) {
          pipeline_.mkdir(below(base, e.rel), e.mode, e.mtime, false, dir_failed);
        } else if (!send_entry(e, file_dest(base, e.rel))) {
          name_rest(entries, i + 1);
          return false;
        }
      }
    }
    if (preserve_) {  // directory modes and times last, deepest first
      for (auto it = entries.rbegin(); it != entries.rend(); ++it)
        if (it->dir) pipeline_.mkdir(below(base, it->rel), it->mode, it->mtime, true, dir_failed);
      pipeline_.mkdir(base, st.st_mode & 07777, st.st_mtim.tv_sec, true, dir_failed);
    }
  } catch (const Failure& f) {  // the connection failed
    hooks_.failed(f);
    return false;
  }
  return finish();
}

}  // namespace aesxfer::client
