// server::Root::hidden_in: what a listing leaves out of a directory by the hidden paths' names (the
// server's home, an --authorized-keys file), judged once per directory and the same for every name
// as the whole path from the root would be.
#include <gtest/gtest.h>

#include "server/root.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

TEST(RootHidden, EachNameIsJudgedAsItsWholePathWouldBe) {
  TempDir root("aesxfer-hidden");
  fs::create_directories(root.path() / "home" / "sub");
  fs::create_directories(root.path() / "etc" / "keys");
  write_text_file(root.path() / "etc" / "keys" / "authorized_keys", "k\n");
  server::Root r(root.path(), {root.path() / "home", root.path() / "etc" / "keys" / "authorized_keys"});
  struct Case {
    const char* dir;
    const char* name;
    bool hidden;
  };
  for (const Case c :
       {Case{"", "home", true}, Case{"", "etc", false}, Case{"", "homes", false}, Case{"home/", "x", true},
        Case{"home/sub/", "deeper", true}, Case{"etc/", "keys", false},
        Case{"etc/keys/", "authorized_keys", true}, Case{"etc/keys/", "other", false},
        Case{"etc/keysx/", "authorized_keys", false}, Case{"etc/", "authorized_keys", false},
        Case{"./etc//keys/", "authorized_keys", true}, Case{"a/../", "x", true}, Case{"", "..", true}}) {
    SCOPED_TRACE(std::string(c.dir) + c.name);
    EXPECT_EQ(r.hidden_in(c.dir).hides(c.name), c.hidden);
  }
  // A component at a time from the root, as a listing walks: the same answers.
  const auto top = r.hidden_in("");
  EXPECT_TRUE(top.hides("home"));
  EXPECT_TRUE(top.child("home").hides("anything"));
  EXPECT_FALSE(top.child("etc").hides("authorized_keys"));
  EXPECT_TRUE(top.child("etc").child("keys").hides("authorized_keys"));
  EXPECT_FALSE(top.child("etc").child("keys").hides("other"));
  EXPECT_FALSE(top.child("etc").child("keysx").hides("authorized_keys"));
  EXPECT_TRUE(top.child("etc").child("keys").child("authorized_keys").hides("x"));
  EXPECT_TRUE(r.hidden_in(".").hides("home"));
}

}  // namespace
}  // namespace aesxfer::test
