// What the documentation says about constant time matches the product (issue 18): the two legacy
// ciphers built on secret-indexed tables say so wherever ciphers are listed, and the constant-time
// ones do not.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "crypto/suite.h"
#include "tests/harness.h"

namespace aesxfer {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(CtClaims, ListCiphersSaysWhichAreNotConstantTime) {
  test::Workspace ws;
  auto r = test::run_aesxfer({"--list-ciphers"}, ws.home, 30);
  ASSERT_EQ(0, r.exit_code) << r.describe();
  std::istringstream lines(r.out);
  std::string line;
  int marked = 0;
  while (std::getline(lines, line)) {
    const bool table_cipher = line.rfind("blowfish-cbc ", 0) == 0 || line.rfind("arcfour ", 0) == 0;
    const bool says = line.find("not constant-time") != std::string::npos;
    EXPECT_EQ(table_cipher, says) << line;
    marked += says;
  }
  EXPECT_EQ(2, marked) << r.out;
}

TEST(CtClaims, ManPageAndSecurityNotesSayIt) {
  const std::string man = slurp(std::string(AESXFER_SOURCE_DIR) + "/docs/aesxfer.1");
  EXPECT_NE(std::string::npos, man.find("not constant\\-time")) << "docs/aesxfer.1";
  const std::string sec = slurp(std::string(AESXFER_SOURCE_DIR) + "/docs/SECURITY.md");
  EXPECT_NE(std::string::npos, sec.find("not constant time")) << "docs/SECURITY.md";
  // SECURITY.md names the tests that prove the constant-time and Wycheproof claims.
  for (const char* t :
       {"CtCheck.Memcheck", "CtCheck.CatchesSecretBranch", "CtCheck.CatchesSecretIndex", "WycheproofGcm",
        "WycheproofCbc", "WycheproofHmac", "WycheproofX25519", "WycheproofEd25519"})
    EXPECT_NE(std::string::npos, sec.find(t)) << "docs/SECURITY.md does not name " << t;
}

}  // namespace
}  // namespace aesxfer
