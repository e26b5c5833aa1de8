// files/io.h SpaceReserve: a writer's allowance between two looks at the free space is at most
// 1/64 of the reserve, so that writers of other processes on the same file system, which take
// allowances of their own, cannot together spend the reserve (a thirty-ninth re-attack, A-F2: ten
// servers, each with an eighth of the headroom, went 700 KiB into an 875 KiB reserve).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "files/io.h"
#include "files/unique_fd.h"
#include "tests/harness.h"

namespace aesxfer::files {
namespace {
namespace fs = std::filesystem;

// A 64 MiB tmpfs of its own (a reserve of 1 MiB), unmounted when the test ends.
struct SmallFs {
  test::TempDir dir{"aesxfer-reserve"};
  fs::path mnt = dir.path() / "mnt";
  bool mounted = fs::create_directories(mnt) && ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64m") == 0;
  UniqueFd d{mounted ? ::open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1};
  ~SmallFs() {
    d.reset();
    if (mounted) ::umount2(mnt.c_str(), MNT_DETACH);
  }
  uint64_t free_bytes() const {
    struct statvfs vfs {};
    return ::fstatvfs(d.get(), &vfs) == 0 ? uint64_t(vfs.f_bavail) * vfs.f_frsize : 0;
  }
  // Another process's file of `n` bytes.
  bool fill(const char* name, uint64_t n) const {
    const UniqueFd f(::openat(d.get(), name, O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    return f && ::posix_fallocate(f.get(), 0, off_t(n)) == 0;
  }
};

TEST(SpaceReserve, AnotherProcessesWritesAreSeenBeforeTheReserveIsReached) {
  SmallFs small;
  ASSERT_TRUE(small.mounted && small.d)
      << std::strerror(errno) << " (needs root and CAP_SYS_ADMIN; not skipped)";
  struct statvfs vfs {};
  ASSERT_EQ(::fstatvfs(small.d.get(), &vfs), 0);
  const uint64_t reserve = reserve_of(uint64_t(vfs.f_blocks) * vfs.f_frsize);
  ASSERT_EQ(reserve, uint64_t(1) << 20);
  SpaceReserve writer(small.d.get());
  EXPECT_EQ(writer.take(4096), "");  // an allowance, from 63 MiB of headroom
  writer.release();
  // Another process fills the file system to 16 KiB above the reserve.
  ASSERT_TRUE(small.fill("other", small.free_bytes() - reserve - (16 << 10)));
  // 64 KiB more would take the file system 48 KiB into its reserve: refused, the free space looked
  // at again (with an eighth of the headroom, 7.9 MiB, it was written without a look).
  const std::string why = writer.take(64 << 10);
  EXPECT_NE(why.find("left free: a transfer stops before the file system is full"), std::string::npos) << why;
  // What fits above the reserve is still let through.
  EXPECT_EQ(writer.take(8 << 10), "");
}

}  // namespace
}  // namespace aesxfer::files

namespace aesxfer::files {
namespace {

// Two writers of one process granted batches larger than the allowance on looks at the same free
// figure: the second sees the first's pending bytes, so together they stop at the reserve (a
// fortieth re-attack, A-F1: forty puts took the file system to 0 bytes free).
TEST(SpaceReserve, BatchesGrantedAndNotYetWrittenCountAgainstTheNextLook) {
  SmallFs small;
  ASSERT_TRUE(small.mounted && small.d)
      << std::strerror(errno) << " (needs root and CAP_SYS_ADMIN; not skipped)";
  const uint64_t reserve = uint64_t(1) << 20;
  ASSERT_TRUE(small.fill("other", small.free_bytes() - reserve - (1536 << 10)));  // 1.5 MiB above it
  SpaceReserve a(small.d.get()), b(small.d.get());
  EXPECT_EQ(a.take(1 << 20), "");           // 1 MiB of the 1.5
  const std::string why = b.take(1 << 20);  // 2.5 MiB free, less a's 1 MiB in flight
  EXPECT_NE(why.find("only 2560 KiB left free, 1024 KiB of it taken by writes in progress: "),
            std::string::npos)
      << why;
  EXPECT_EQ(b.take(256 << 10), "");
  // a's batch written: the free figure holds it now, and the pending bytes no longer count twice.
  ASSERT_TRUE(small.fill("a", 1 << 20));
  a.release();
  b.release();
  ASSERT_TRUE(small.fill("b", 256 << 10));
  EXPECT_EQ(b.take(128 << 10), "");
  EXPECT_NE(b.take(1 << 20).find("left free"), std::string::npos);
}

}  // namespace
}  // namespace aesxfer::files
