// Issue 7: the build installs like a real tool (binary, man page, docs, systemd unit) and
// `cpack -G DEB` makes a package that lists them and depends on libsodium23.
#include <gtest/gtest.h>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

std::string which(const std::string& tool) {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
    fs::path p = fs::path(dir) / tool;
    if (fs::exists(p)) return p.string();
  }
  return "";
}

TEST(Install, CmakeInstallPutsEveryFileInPlace) {
  std::string cmake = which("cmake");
  ASSERT_FALSE(cmake.empty()) << "cmake not found (it built this test)";
  TempDir prefix("aesxfer-install");
  auto r = run_process({cmake, "--install", AESXFER_BUILD_DIR, "--prefix", prefix.path().string()}, {}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* f : {"bin/aesxfer", "share/man/man1/aesxfer.1", "share/doc/aesxfer/PROTOCOL.md",
                        "share/doc/aesxfer/aesxfer.service", "share/doc/aesxfer/README.md"})
    EXPECT_TRUE(fs::is_regular_file(prefix.path() / f)) << f;
  auto v = run_process({(prefix.path() / "bin/aesxfer").string(), "--version"}, {}, 10);
  EXPECT_EQ(v.exit_code, 0) << v.describe();
  EXPECT_NE(v.out.find("aesxfer"), std::string::npos) << v.out;
  // The man page documents every subcommand and the issue 7 options.
  std::string man = read_text_file(prefix.path() / "share/man/man1/aesxfer.1");
  for (const char* word : {"send", "recv", "serve", "keygen", "speed", "bench", "\\-\\-resume", "\\-\\-json\\-progress",
                           "\\-\\-recursive", "\\-\\-preserve", "\\-\\-limit", "umask"})
    EXPECT_NE(man.find(word), std::string::npos) << word;
  std::string unit = read_text_file(prefix.path() / "share/doc/aesxfer/aesxfer.service");
  for (const char* key : {"ProtectSystem=strict", "ReadWritePaths=/srv/aesxfer", "DynamicUser=yes", "NoNewPrivileges=yes"})
    EXPECT_NE(unit.find(key), std::string::npos) << key;
}

TEST(Install, CpackBuildsADebianPackage) {
  std::string cpack = which("cpack"), dpkg_deb = which("dpkg-deb");
  ASSERT_FALSE(cpack.empty()) << "cpack not found (it comes with cmake)";
  ASSERT_FALSE(dpkg_deb.empty()) << "dpkg-deb not found (Debian's dpkg)";
  TempDir out("aesxfer-cpack");
  auto r = run_process({cpack, "-G", "DEB", "--config", std::string(AESXFER_BUILD_DIR) + "/CPackConfig.cmake", "-B",
                        out.path().string()},
                       {}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  fs::path deb;
  for (const auto& e : fs::directory_iterator(out.path()))
    if (e.path().extension() == ".deb") deb = e.path();
  ASSERT_FALSE(deb.empty()) << r.describe();
  auto c = run_process({dpkg_deb, "-c", deb.string()}, {}, 30);
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  for (const char* f : {"./usr/bin/aesxfer", "./usr/share/man/man1/aesxfer.1", "./usr/share/doc/aesxfer/aesxfer.service"})
    EXPECT_NE(c.out.find(f), std::string::npos) << f << "\n" << c.out;
  auto i = run_process({dpkg_deb, "-f", deb.string(), "Package", "Depends", "Maintainer"}, {}, 30);
  ASSERT_EQ(i.exit_code, 0) << i.describe();
  EXPECT_NE(i.out.find("Package: aesxfer"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("libsodium23"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("Maintainer: "), std::string::npos) << i.out;
}

}  // namespace
}  // namespace aesxfer::test
