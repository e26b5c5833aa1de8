// The build installs like a real tool (binary, compressed man page, docs, copyright, changelog,
// systemd unit, bash completion), and `cpack -G DEB` makes a package that lintian accepts with no
// error, whose Depends come from dpkg-shlibdeps, whose binary is hardened, and whose unit passes
// `systemd-analyze verify`.
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <sstream>

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
  for (const char* f :
       {"bin/aesxfer", "share/man/man1/aesxfer.1.gz", "share/doc/aesxfer/PROTOCOL.md",
        "share/doc/aesxfer/aesxfer.service", "share/doc/aesxfer/README.md", "share/doc/aesxfer/copyright",
        "share/doc/aesxfer/changelog.gz", "share/doc/aesxfer/examples/60-aesxfer-bbr.conf",
        "lib/systemd/system/aesxfer.service", "share/bash-completion/completions/aesxfer"})
    EXPECT_TRUE(fs::is_regular_file(prefix.path() / f)) << f;
  auto v = run_process({(prefix.path() / "bin/aesxfer").string(), "--version"}, {}, 10);
  EXPECT_EQ(v.exit_code, 0) << v.describe();
  EXPECT_NE(v.out.find("aesxfer"), std::string::npos) << v.out;
  // The man page documents every subcommand and the issue 7 options.
  std::string man = read_text_file(fs::path(AESXFER_SOURCE_DIR) / "docs/aesxfer.1");
  auto z =
      run_process({"/bin/gzip", "-dc", (prefix.path() / "share/man/man1/aesxfer.1.gz").string()}, {}, 10);
  EXPECT_EQ(z.out, man) << "the installed man page is not docs/aesxfer.1";
  for (const char* word :
       {"send", "recv", "serve", "keygen", "speed", "bench", "\\-\\-resume", "\\-\\-json\\-progress",
        "\\-\\-recursive", "\\-\\-preserve", "\\-\\-limit", "umask"})
    EXPECT_NE(man.find(word), std::string::npos) << word;
  std::string unit = read_text_file(prefix.path() / "lib/systemd/system/aesxfer.service");
  for (const char* key : {"ProtectSystem=strict", "StateDirectory=aesxfer aesxfer/files", "DynamicUser=yes",
                          "NoNewPrivileges=yes", "--root /var/lib/aesxfer/files"})
    EXPECT_NE(unit.find(key), std::string::npos) << key;
}

TEST(Install, CpackBuildsADebianPackage) {
  std::string cpack = which("cpack"), dpkg_deb = which("dpkg-deb");
  ASSERT_FALSE(cpack.empty()) << "cpack not found (it comes with cmake)";
  ASSERT_FALSE(dpkg_deb.empty()) << "dpkg-deb not found (Debian's dpkg)";
  TempDir out("aesxfer-cpack");
  auto r = run_process({cpack, "-G", "DEB", "--config", std::string(AESXFER_BUILD_DIR) + "/CPackConfig.cmake",
                        "-B", out.path().string()},
                       {}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  fs::path deb;
  for (const auto& e : fs::directory_iterator(out.path()))
    if (e.path().extension() == ".deb") deb = e.path();
  ASSERT_FALSE(deb.empty()) << r.describe();
  auto c = run_process({dpkg_deb, "-c", deb.string()}, {}, 30);
  ASSERT_EQ(c.exit_code, 0) << c.describe();
  for (const char* f :
       {"./usr/bin/aesxfer", "./usr/share/man/man1/aesxfer.1.gz", "./usr/share/doc/aesxfer/copyright",
        "./usr/lib/systemd/system/aesxfer.service", "./usr/share/bash-completion/completions/aesxfer",
        "./usr/share/doc/aesxfer/examples/60-aesxfer-bbr.conf"})
    EXPECT_NE(c.out.find(f), std::string::npos) << f << "\n" << c.out;
  auto i =
      run_process({dpkg_deb, "-f", deb.string(), "Package", "Depends", "Maintainer", "Description"}, {}, 30);
  ASSERT_EQ(i.exit_code, 0) << i.describe();
  EXPECT_NE(i.out.find("Package: aesxfer"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("libsodium23 (>="), std::string::npos) << "Depends not from dpkg-shlibdeps: " << i.out;
  EXPECT_NE(i.out.find("Maintainer: "), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("\n aesxfer moves large files"), std::string::npos)
      << "no extended description: " << i.out;
  // lintian: no errors. Warnings are printed for the record (README lists the ones that remain).
  std::string lintian = which("lintian");
  ASSERT_FALSE(lintian.empty()) << "lintian not found (scripts/setup-debian.sh installs it)";
  auto l = run_process({lintian, "--tag-display-limit", "0", deb.string()}, {}, 300);
  std::printf("[lintian] %s\n", l.out.empty() ? "(nothing to report)" : l.out.c_str());
  EXPECT_EQ(l.out.find("\nE: "), std::string::npos) << l.out;
  EXPECT_NE(l.out.rfind("E: ", 0), 0u) << l.out;
  // The unit, as the package installs it, passes systemd-analyze verify, its man: link included.
  // The package is unpacked into a folder; verify needs ExecStart's binary and the man page to
  // exist, so the copy it checks points at the unpacked binary and MANPATH at the unpacked pages.
  std::string sa = which("systemd-analyze");
  ASSERT_FALSE(sa.empty()) << "systemd-analyze not found (package systemd)";
  const fs::path root = out.path() / "root";
  auto x = run_process({dpkg_deb, "-x", deb.string(), root.string()}, {}, 30);
  ASSERT_EQ(x.exit_code, 0) << x.describe();
  std::string unit = read_text_file(root / "usr/lib/systemd/system/aesxfer.service");
  const std::string from = "/usr/bin/aesxfer";
  unit.replace(unit.find(from), from.size(), (root / "usr/bin/aesxfer").string());
  write_text_file(out.path() / "aesxfer.service", unit);
  auto v = run_process({sa, "verify", (out.path() / "aesxfer.service").string()},
                       {{"MANPATH", (root / "usr/share/man").string()}}, 60);
  EXPECT_EQ(v.exit_code, 0) << v.describe();
  EXPECT_EQ(v.err.find("aesxfer.service:"), std::string::npos) << v.describe();
}

// The bash completion knows every long option each subcommand's --help shows, and answers.
TEST(Install, BashCompletionCoversEveryOption) {
  const fs::path comp = fs::path(AESXFER_SOURCE_DIR) / "packaging/aesxfer.bash-completion";
  const std::string text = read_text_file(comp);
  for (const char* sub : {"send", "recv", "serve", "speed", "bench"}) {
    auto h = run_aesxfer({sub, "--help"}, fs::temp_directory_path(), 10);
    ASSERT_EQ(h.exit_code, 0) << h.describe();
    std::regex opt("--[a-z][a-z0-9-]+");
    for (auto it = std::sregex_iterator(h.out.begin(), h.out.end(), opt); it != std::sregex_iterator(); ++it)
      EXPECT_TRUE(std::regex_search(text, std::regex("[ \"]" + it->str() + "[ \"|)]")))
          << sub << " " << it->str() << " missing in " << comp;
  }
  auto r = run_process(
      {"/bin/bash", "-c",
       "source '" + comp.string() +
           "'; COMP_WORDS=(aesxfer send -c aes); COMP_CWORD=3; _aesxfer; echo \"${COMPREPLY[*]}\"; "
           "COMP_WORDS=(aesxfer se); COMP_CWORD=1; _aesxfer; echo \"${COMPREPLY[*]}\"; "
           "COMP_WORDS=(aesxfer send --checksum x); COMP_CWORD=3; _aesxfer; echo \"${COMPREPLY[*]}\""},
      {}, 10);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "aes128-gcm aes128-ctr aes128-cbc\nsend serve\nxxh128\n") << r.describe();
}

// The completion's cipher and MAC lists are kept by hand: they must name exactly what
// `aesxfer --list-ciphers` lists (the cipher table), in its order, so a new row fails here until
// the completion has it too.
TEST(Install, BashCompletionCiphersAreTheListedOnes) {
  const std::string text = read_text_file(fs::path(AESXFER_SOURCE_DIR) / "packaging/aesxfer.bash-completion");
  auto r = run_aesxfer({"--list-ciphers"}, fs::temp_directory_path(), 10);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::string ciphers, macs;
  for (const std::string& line : nonempty_lines(r.out)) {
    std::istringstream in(line);
    std::string first, name;
    in >> first;
    std::string& list = first == "mac" ? macs : ciphers;
    if (first == "mac")
      in >> name;
    else
      name = first;
    list += (list.empty() ? "" : " ") + name;
  }
  ASSERT_FALSE(ciphers.empty()) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("local ciphers=\"([^\"]*)\"")));
  EXPECT_EQ(m[1].str(), ciphers) << "packaging/aesxfer.bash-completion against --list-ciphers";
  ASSERT_TRUE(std::regex_search(text, m, std::regex("local macs=\"([^\"]*)\"")));
  EXPECT_EQ(m[1].str(), macs) << "packaging/aesxfer.bash-completion against --list-ciphers";
}

}  // namespace
}  // namespace aesxfer::test
