// files/resume.h's PartialFile: a constructor that fails (another session holds the file's lock,
// or the name is not a regular file) leaves no descriptor open. Before the members were UniqueFd,
// the directory descriptor opened first leaked on every refused resume: a server refusing
// "busy" over and over ran out of descriptors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "files/atomic_file.h"
#include "files/resume.h"
#include "files/unique_fd.h"
#include "proto/failure.h"
#include "tests/harness.h"

namespace aesxfer::test {
using files::UniqueFd;
namespace {

size_t open_descriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(PartialFile, ABusyFileLeavesNoDescriptorOpen) {
  TempDir d("aesxfer-partial");
  const fs::path dest = d / "f.bin";
  files::PartialFile holder(dest);
  const size_t before = open_descriptors();
  for (int i = 0; i < 3; ++i) {
    try {
      files::PartialFile again(dest);
      ADD_FAILURE() << "a second writer of one partial file was let in";
    } catch (const proto::Failure& e) {
      EXPECT_EQ(e.status, proto::Status::busy) << e.what();
    }
  }
  EXPECT_EQ(open_descriptors(), before);
}

TEST(PartialFile, ANameThatIsNotARegularFileLeavesNoDescriptorOpen) {
  TempDir d("aesxfer-partial");
  const fs::path dest = d / "f.bin";
  fs::create_directory(files::PartialFile::partial_path(dest));
  const size_t before = open_descriptors();
  EXPECT_THROW(files::PartialFile p(dest), proto::Failure);
  EXPECT_EQ(open_descriptors(), before);
}

// A seventh re-attack (N1): the refusals of a partial or temporary file named the file as it was,
// and the name comes from a server's listing (recv -r) or a directory another user made: an escape
// sequence in it reached the terminal. They show it made printable.
TEST(PartialFile, RefusalsNameTheFilePrintable) {
  TempDir d("aesxfer-partial");
  const std::string name =
      "f\x1b]0;owned\x07\xc2\x9b"
      "31m";
  fs::create_directory(d / files::partial_name(name));  // the partial name taken by a directory
  for (int how = 0; how < 2; ++how) {
    try {
      if (how == 0) {
        files::PartialFile p(d / name);
      } else {
        files::UniqueFd dir(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        files::PartialFile p(dir.get(), name, d / name);
      }
      ADD_FAILURE() << "a directory was taken for the partial file";
    } catch (const proto::Failure& f) {
      const std::string what = f.what();
      EXPECT_EQ(what.find('\x1b'), std::string::npos) << proto::printable(what);
      EXPECT_EQ(what.find("\xc2\x9b"), std::string::npos) << proto::printable(what);
      EXPECT_NE(what.find("f\\x1b]0;owned"), std::string::npos) << what;
    }
  }
  // A temporary file in a directory that cannot take one (here: gone), named either way.
  const fs::path gone = d / ("gone\x1b[2J");
  try {
    files::AtomicFile f(gone / "x");
    ADD_FAILURE() << "created in a missing directory";
  } catch (const proto::Failure& f) {
    EXPECT_EQ(std::string(f.what()).find('\x1b'), std::string::npos) << proto::printable(f.what());
  }
  fs::create_directory(gone);
  files::UniqueFd dir(::open(gone.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  fs::remove(gone);
  try {
    files::AtomicFile f(dir.get(), "x", gone / "x");
    ADD_FAILURE() << "created in a removed directory";
  } catch (const proto::Failure& f) {
    EXPECT_EQ(std::string(f.what()).find('\x1b'), std::string::npos) << proto::printable(f.what());
  }
}

// lock_partial: a file whose lock is taken after its name moved on (renamed into place by the
// transfer the lock came from, or removed) is "moved", never written (a twenty-second re-attack, N2).
TEST(PartialLock, TheLockCountsOnlyWhileTheNameStillNamesTheFile) {
  TempDir d("aesxfer-partial");
  const UniqueFd dir(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir);
  const std::string p = ".f.aesxfer-partial";
  const auto open_p = [&] {
    return UniqueFd(::openat(dir.get(), p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  };
  {
    UniqueFd a = open_p(), b = open_p();
    EXPECT_EQ(files::lock_partial(dir.get(), p, a.get()), files::PartialLock::held);
    EXPECT_EQ(files::lock_partial(dir.get(), p, b.get()), files::PartialLock::busy);
  }
  {
    UniqueFd a = open_p();  // renamed into place by its holder before this lock
    ASSERT_EQ(::renameat(dir.get(), p.c_str(), dir.get(), "f"), 0);
    EXPECT_EQ(files::lock_partial(dir.get(), p, a.get()), files::PartialLock::moved);
  }
  {
    UniqueFd a = open_p();  // removed, and another file made under the name since
    ASSERT_EQ(::unlinkat(dir.get(), p.c_str(), 0), 0);
    UniqueFd b = open_p();
    EXPECT_EQ(files::lock_partial(dir.get(), p, a.get()), files::PartialLock::moved);
    EXPECT_EQ(files::lock_partial(dir.get(), p, b.get()), files::PartialLock::held);
  }
}

// close_and_rename_locked reports a rename that fails as the rename's error, the file left where
// it was, and the lock let go afterwards.
TEST(PartialLock, ARenameThatFailsIsReportedAndTheLockIsLetGo) {
  TempDir d("aesxfer-partial");
  const UniqueFd dir(::open(d.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const std::string p = ".g.aesxfer-partial";
  UniqueFd fd(::openat(dir.get(), p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_EQ(files::lock_partial(dir.get(), p, fd.get()), files::PartialLock::held);
  fs::create_directories(d / "g" / "full");  // a non-empty directory cannot be renamed over
  bool closed = false;
  EXPECT_EQ(files::close_and_rename_locked(fd, dir.get(), p, "g", &closed), EISDIR);
  EXPECT_TRUE(closed);
  EXPECT_FALSE(fd);
  UniqueFd again(::openat(dir.get(), p.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(again);
  EXPECT_EQ(files::lock_partial(dir.get(), p, again.get()), files::PartialLock::held);
}

// A fifty-third re-attack (A53-1): a prefix is hashed with its holes' zeros from memory, not read
// (the kernel zeroes a page-cache page for every page of a hole read). The digest is the one of
// the same bytes written out, holes at the start, in the middle and up to the end; the
// descriptor's offset is kept; a file shorter than the prefix still fails.
TEST(PrefixHash, HolesHashAsTheirZerosAndTheOffsetIsKept) {
  TempDir d("aesxfer-sparse");
  const uint64_t len = 5 * (uint64_t(1) << 20) + 123;
  std::string dense(len, '\0');
  const fs::path sparse_path = d.path() / "sparse", dense_path = d.path() / "dense";
  files::UniqueFd sparse(::open(sparse_path.c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_TRUE(sparse);
  ASSERT_EQ(::ftruncate(sparse.get(), off_t(len)), 0);
  for (const uint64_t at : {uint64_t(1) << 20, (uint64_t(3) << 20) + 7}) {  // data between holes
    const std::string bytes(70000, char('a' + at % 26));
    ASSERT_EQ(::pwrite(sparse.get(), bytes.data(), bytes.size(), off_t(at)), ssize_t(bytes.size()));
    dense.replace(at, bytes.size(), bytes);
  }
  write_text_file(dense_path, dense);
  files::UniqueFd whole(::open(dense_path.c_str(), O_RDONLY));
  ASSERT_EQ(::lseek(sparse.get(), 4321, SEEK_SET), 4321);
  for (const uint64_t prefix : {len, len - 100, uint64_t(1) << 20, (uint64_t(1) << 20) + 5}) {
    SCOPED_TRACE(prefix);
    crypto::FileChecksum a, b;
    files::hash_prefix(a, sparse.get(), prefix);
    files::hash_prefix(b, whole.get(), prefix);
    EXPECT_EQ(a.final().hex(), b.final().hex());
  }
  EXPECT_EQ(::lseek(sparse.get(), 0, SEEK_CUR), 4321);
  crypto::FileChecksum c;
  EXPECT_THROW(files::hash_prefix(c, sparse.get(), len + 1), proto::Failure);
}

// A fifty-fourth re-attack (A54-1): the hole lookups were made again for every MiB hashed, and on
// tmpfs SEEK_HOLE walks the page cache a page at a time to the next hole, so one pass over a file
// cost the square of its size (1 GiB: 5 to 12 s of CPU). A file is asked once per data region or
// hole, whatever their sizes: twice for a file without holes (and never not at all, A55-2).
TEST(PrefixHash, HolesAreLookedUpOncePerRegionNotPerMiB) {
  TempDir d("aesxfer-seeks");
  const uint64_t mib = uint64_t(1) << 20;
  const fs::path dense_path = d.path() / "dense", sparse_path = d.path() / "sparse";
  write_random_file(dense_path, 24 * mib, 5);
  files::UniqueFd dense(::open(dense_path.c_str(), O_RDONLY));
  ASSERT_TRUE(dense);
  uint64_t before = files::g_prefix_seeks;
  crypto::FileChecksum a;
  files::hash_prefix(a, dense.get(), 24 * mib);
  EXPECT_EQ(files::g_prefix_seeks - before, 2u) << "a file without holes: one data region";

  // 24 MiB of data, a 16 MiB hole, 8 MiB of data, a hole to the end (64 MiB).
  files::UniqueFd sparse(::open(sparse_path.c_str(), O_RDWR | O_CREAT, 0600));
  ASSERT_TRUE(sparse);
  ASSERT_EQ(::ftruncate(sparse.get(), off_t(64 * mib)), 0);
  const std::string data(mib, 'x');
  for (uint64_t at = 0; at < 24; ++at)
    ASSERT_EQ(::pwrite(sparse.get(), data.data(), mib, off_t(at * mib)), ssize_t(mib));
  for (uint64_t at = 40; at < 48; ++at)
    ASSERT_EQ(::pwrite(sparse.get(), data.data(), mib, off_t(at * mib)), ssize_t(mib));
  ASSERT_EQ(::fsync(sparse.get()), 0);
  before = files::g_prefix_seeks;
  crypto::FileChecksum b;
  files::hash_prefix(b, sparse.get(), 64 * mib);
  // Two lookups for each data region, one for each hole (plus a file system's own split of a
  // region): far below the 2 a MiB (128) of the code before.
  EXPECT_LE(files::g_prefix_seeks - before, 12u);
  EXPECT_GE(files::g_prefix_seeks - before, 1u) << "a sparse file is asked where its holes are";
}

// A fifty-sixth re-attack (A56-4): on a file system of 1 KiB blocks, a file of 1 KiB pieces of data
// and holes cost a lookup (and four lseeks) for each piece, ten times the CPU of a dense file, though
// each page of it holds data and is read whole anyway. A hole shorter than a page is read as data,
// so such a file costs at most two lookups a page. Shown here with a "page" of 16 KiB over holes of
// 4 KiB (this file system's blocks): the bytes are the file's, and the lookups are per page.
TEST(Regions, HolesShorterThanAPageAreReadAsData) {
  TempDir d("aesxfer-regions");
  const fs::path path = d / "pieces";
  constexpr uint64_t kPiece = 4096, kPieces = 256, kPage = 16384;
  {
    const files::UniqueFd f(::open(path.c_str(), O_CREAT | O_WRONLY, 0600));
    const std::string data(kPiece, 'x');
    for (uint64_t i = 0; i < kPieces; i += 2)
      ASSERT_EQ(::pwrite(f.get(), data.data(), kPiece, off_t(i * kPiece)), ssize_t(kPiece));
    ASSERT_EQ(::ftruncate(f.get(), off_t(kPieces * kPiece)), 0);
  }
  const files::UniqueFd f(::open(path.c_str(), O_RDONLY));
  for (const uint64_t page : {uint64_t(4096), kPage}) {
    SCOPED_TRACE(page);
    files::Regions regions(f.get(), page);
    const uint64_t before = files::g_prefix_seeks;
    uint64_t holes = 0, pos = 0;
    while (pos < kPieces * kPiece) {
      bool hole = false;
      const size_t k = regions.at(pos, size_t(kPieces * kPiece - pos), hole);
      ASSERT_GT(k, 0u);
      if (hole) {
        holes += k;
        for (uint64_t i = pos; i < pos + k; i += kPiece)
          EXPECT_EQ((i / kPiece) % 2, 1u) << i;  // truly a hole
      }
      pos += k;
    }
    const uint64_t seeks = files::g_prefix_seeks - before;
    if (page == kPage) {
      EXPECT_EQ(holes, 0u);                                // every hole shorter than the "page": read
      EXPECT_LE(seeks, 2 * kPieces * kPiece / kPage + 2);  // two lookups a page at most
    } else {
      EXPECT_EQ(holes, kPieces / 2 * kPiece);  // each page-long hole skipped
      EXPECT_GE(seeks, kPieces);               // a lookup for each piece
    }
  }
}

// A fifty-seventh re-attack (E57-1): SEEK_HOLE at a position that is a hole answers that position,
// which hole_from took for "the file system cannot tell": when another process punched the data
// found a moment before, the get read every byte after it, holes and all (a GiB for 4 KiB of
// writes). It is an empty data region, and the reader goes on looking up.
TEST(Regions, APositionInAHoleIsNotAnUnknownEnd) {
  TempDir d("aesxfer-regions");
  const fs::path path = d / "sparse";
  const files::UniqueFd f(::open(path.c_str(), O_CREAT | O_RDWR, 0600));
  ASSERT_EQ(::pwrite(f.get(), "x", 1, 0), 1);
  ASSERT_EQ(::ftruncate(f.get(), off_t(64) << 20), 0);
  EXPECT_EQ(files::hole_from(f.get(), 1 << 20), uint64_t(1) << 20);  // in the hole: there
  EXPECT_LE(files::hole_from(f.get(), 0), uint64_t(1) << 20);        // the data's end
}

// A fifty-sixth re-attack (C56-1): names too long for ".NAME.aesxfer-partial" were cut and tagged
// with a 32-bit FNV-1a hash; these two, the same but for their last 12 bytes, were found in under
// a second to share one partial file (one file's transfer took or removed the other's). Long names
// get distinct partial names of at most 255 bytes, the same for the same name.
TEST(PartialFile, LongNamesThatShareTheirStartGetTheirOwnPartialNames) {
  const std::string start = "long_dataset_name_" + std::string(211, 'x');
  const std::string a = start + "Uo6dIQpXMntq", b = start + "juliuO9gaAgi";
  const auto fnv = [](const std::string& n) {
    uint32_t h = 2166136261u;
    for (unsigned char ch : n) h = (h ^ ch) * 16777619u;
    return h;
  };
  ASSERT_EQ(fnv(a), fnv(b));  // the pair the re-attack found
  EXPECT_NE(files::partial_name(a), files::partial_name(b));
  EXPECT_EQ(files::partial_name(a), files::partial_name(a));
  for (const auto& n : {a, b, std::string(255, 'y')}) {
    const std::string p = files::partial_name(n);
    EXPECT_LE(p.size(), size_t(NAME_MAX)) << p;
    EXPECT_TRUE(files::is_partial_name(p)) << p;
    EXPECT_NE(p.find('~'), std::string::npos) << p;  // marked as shortened (client::stands_for)
  }
  EXPECT_EQ(files::partial_name("short"), ".short.aesxfer-partial");
}

}  // namespace
}  // namespace aesxfer::test
