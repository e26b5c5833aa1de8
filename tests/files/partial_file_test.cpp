// files/resume.h's PartialFile: a constructor that fails (another session holds the file's lock,
// or the name is not a regular file) leaves no descriptor open. Before the members were UniqueFd,
// the directory descriptor opened first leaked on every refused resume: a server refusing
// "busy" over and over ran out of descriptors.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "files/resume.h"
#include "proto/failure.h"
#include "tests/harness.h"

namespace aesxfer::test {
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

}  // namespace
}  // namespace aesxfer::test
