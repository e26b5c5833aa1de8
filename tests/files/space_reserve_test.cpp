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

TEST(SpaceReserve, AnotherProcessesWritesAreSeenBeforeTheReserveIsReached) {
  test::TempDir dir("aesxfer-reserve");
  const fs::path mnt = dir.path() / "mnt";
  fs::create_directories(mnt);
  ASSERT_EQ(::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64m"), 0)
      << std::strerror(errno) << " (this test needs root and CAP_SYS_ADMIN; it is not skipped)";
  struct Unmount {
    fs::path at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const UniqueFd d(::open(mnt.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(d);
  struct statvfs vfs {};
  ASSERT_EQ(::fstatvfs(d.get(), &vfs), 0);
  const uint64_t reserve = reserve_of(uint64_t(vfs.f_blocks) * vfs.f_frsize);
  ASSERT_EQ(reserve, uint64_t(1) << 20);
  SpaceReserve writer(d.get());
  EXPECT_EQ(writer.take(4096), "");  // an allowance, from 63 MiB of headroom
  // Another process fills the file system to 16 KiB above the reserve.
  const uint64_t free_now = uint64_t(vfs.f_bavail) * vfs.f_frsize;
  const UniqueFd other(::openat(d.get(), "other", O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(other);
  ASSERT_EQ(::posix_fallocate(other.get(), 0, off_t(free_now - reserve - (16 << 10))), 0);
  // 64 KiB more would take the file system 48 KiB into its reserve: refused, the free space looked
  // at again (with an eighth of the headroom, 7.9 MiB, it was written without a look).
  const std::string why = writer.take(64 << 10);
  EXPECT_NE(why.find("left free: a transfer stops before the file system is full"), std::string::npos) << why;
  // What fits above the reserve is still let through.
  EXPECT_EQ(writer.take(8 << 10), "");
}

}  // namespace
}  // namespace aesxfer::files
