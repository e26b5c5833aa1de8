// server::cgroup_task_limit reads the pids.max that binds this process: cgroup v2 ("0::/path",
// under /sys/fs/cgroup or, on a hybrid host, /sys/fs/cgroup/unified) and v1's "pids"
// controller, the tightest of the cgroup's own and its ancestors'. A fake sysfs tree stands in.
#include "server/task_limit.h"

#include <gtest/gtest.h>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

void write_max(const fs::path& dir, const std::string& value) {
  fs::create_directories(dir);
  write_text_file(dir / "pids.max", value + "\n");
}

TEST(TaskLimit, TheTightestPidsMaxOfTheCgroupAndItsAncestorsBinds) {
  TempDir sys("aesxfer-sysfs");
  write_max(sys.path(), "max");
  write_max(sys.path() / "system.slice", "4000");
  write_max(sys.path() / "system.slice" / "aesxfer.service", "120");
  auto v2 = server::cgroup_task_limit("0::/system.slice/aesxfer.service\n", sys.path());
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->max, 120u);
  EXPECT_EQ(v2->what, "pids.max of cgroup /system.slice/aesxfer.service");
  write_max(sys.path() / "system.slice", "50");  // the slice binds tighter
  v2 = server::cgroup_task_limit("0::/system.slice/aesxfer.service\n", sys.path());
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->max, 50u);
  EXPECT_EQ(v2->what, "pids.max of cgroup /system.slice");
  // v1's pids controller, beside others that say nothing of tasks.
  write_max(sys.path() / "pids" / "user.slice", "30");
  const auto v1 = server::cgroup_task_limit("4:memory:/x\n8:pids:/user.slice\n0::/\n", sys.path());
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->max, 30u);
  // No limit anywhere, a path that climbs out, or a malformed file: none.
  EXPECT_FALSE(server::cgroup_task_limit("0::/\n", sys.path()));
  EXPECT_FALSE(server::cgroup_task_limit("0::/../../etc\n8:pids:relative\ngarbage\n", sys.path()));
  write_max(sys.path() / "odd", "12abc");
  EXPECT_FALSE(server::cgroup_task_limit("0::/odd\n", sys.path()));
}

}  // namespace
}  // namespace aesxfer::test
