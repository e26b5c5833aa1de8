// What the server reads on a client key's behalf outside its listings is charged to the key's name
// budget (server::NameBudget): the directories the planted-directory walk of a put, probe or mkdir
// judges (a forty-sixth re-attack, A46-1: probes of the bottoms of 40 chains 2,040 levels deep, in
// turn, each after its second in CleanWays, had every walk made again, 5.4 s of CPU for 400
// probes). The names a sweep reads are the server's own allowance (tests/server/sweep_test.cpp).
#include <fcntl.h>
#include <gtest/gtest.h>

#include "server/name_budget.h"
#include "server/root.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

TEST(WalkBudget, TheWalksOfPutsAndProbesAreChargedToTheKey) {
  TempDir root("aesxfer-walkbudget");
  std::vector<std::string> bottoms;
  for (const char* top : {"a", "b", "c"}) {
    fs::path p = root.path() / top;
    std::string rel = top;
    for (int i = 0; i < 300; ++i) {
      p /= "d";
      rel += "/d";
    }
    fs::create_directories(p);
    bottoms.push_back(rel);
  }
  server::Root r(root.path());
  server::NameBudget names(500, 0);  // no refill within the test
  server::Refusal why;
  EXPECT_TRUE(r.put_target(bottoms[0] + "/f", "f", why, &names)) << why.text;  // ~300 judged: ~200 left
  EXPECT_TRUE(r.put_target(bottoms[1] + "/f", "f", why, &names)) << why.text;  // one more may start: ~-100
  EXPECT_FALSE(r.put_target(bottoms[2] + "/f", "f", why, &names));
  EXPECT_EQ(why.status, proto::Status::busy);
  EXPECT_NE(why.text.find("server busy"), std::string::npos) << why.text;
  // Another key, or a request without a key's budget (the server's own), is not held back.
  server::NameBudget other(500, 0);
  EXPECT_TRUE(r.put_target(bottoms[2] + "/f", "f", why, &other)) << why.text;
  EXPECT_TRUE(r.put_target(bottoms[2] + "/g", "g", why)) << why.text;
  // A walk the set of lately judged directories spares costs the key one name.
  server::NameBudget small(3, 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(r.put_target(bottoms[2] + "/h", "h", why, &small)) << i;
  EXPECT_FALSE(small.take(1));
}

}  // namespace
}  // namespace aesxfer::test
