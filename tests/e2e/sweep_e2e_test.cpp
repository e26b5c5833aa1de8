// The server sweeps expired partial files where a put lands, end to end (the sweeper itself:
// tests/server/sweep_test.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

TEST(Sweep, ServerSweepsWhereAPutLands) {
  Workspace ws;
  fs::create_directories(ws.root / "in");
  write_text_file(ws.root / "in" / ".gone.aesxfer-partial", "x");
  fs::permissions(ws.root / "in" / ".gone.aesxfer-partial", fs::perms(0600));  // as the server makes them
  make_old(ws.root / "in" / ".gone.aesxfer-partial", 3);
  write_text_file(ws.root / ".elsewhere.aesxfer-partial", "x");  // another directory: untouched
  make_old(ws.root / ".elsewhere.aesxfer-partial", 3);
  ServerProcess server(ws.home, ws.root, {"--partial-max-age", "2"});
  fs::path src = ws.local / "a.bin";
  write_random_file(src, 1000, 1);
  auto r = run_aesxfer({"send", src.string(), "127.0.0.1:in/", "-q", "-P", std::to_string(server.port())},
                       ws.home);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(ws.root / "in" / ".gone.aesxfer-partial"));
  EXPECT_TRUE(fs::exists(ws.root / ".elsewhere.aesxfer-partial"));
  EXPECT_TRUE(server.wait_for_log("expired partial and temporary files removed")) << server.log();
  // One line for the sweep, naming the client whose put made it (a forty-second re-attack, A-F3:
  // a line per file, outside every budget and without peer=).
  size_t lines = 0;
  for (const auto& l : nonempty_lines(server.log()))
    if (l.find("expired partial and temporary files removed") != std::string::npos) {
      ++lines;
      EXPECT_NE(l.find(" peer=127.0.0.1:"), std::string::npos) << l;
      EXPECT_NE(l.find(" partial=1 temporary=0 first=\".gone.aesxfer-partial\""), std::string::npos) << l;
    }
  EXPECT_EQ(lines, 1u) << server.log();
  EXPECT_EQ(sha256_file(ws.root / "in" / "a.bin"), sha256_file(src));
}

// A forty-seventh re-attack (A47-1): the names a sweep read were charged to the key whose put
// brought it, so names another local user planted in a shared directory locked that key out of
// its puts (busy) for up to 40 s. Sweeps draw on the server's own allowance now.
TEST(Sweep, NamesPlantedInAPutsDirectoryLockTheKeyOutOfNothing) {
  Workspace ws;
  fs::create_directories(ws.root / "pub");
  fs::create_directories(ws.root / "other");
  // 50,000 names, second names of one file: a key's names are 40,000 at once (4 x --max-list, at
  // least 10,000) and 1,000 a second after, so a sweep charged to it left it 10 s in debt.
  write_text_file(ws.root / "pub" / "planted", "");
  for (int i = 0; i < 50000; ++i)
    ASSERT_EQ(
        ::link((ws.root / "pub" / "planted").c_str(), (ws.root / "pub" / ("p" + std::to_string(i))).c_str()),
        0);
  ServerProcess server(ws.home, ws.root, {"--max-list", "100"});
  std::vector<std::string> args = {"send"};
  for (int i = 0; i < 5; ++i) {
    const fs::path src = ws.local / ("f" + std::to_string(i));
    write_random_file(src, 100, i);
    args.push_back(src.string());
  }
  args.insert(args.end(), {"127.0.0.1:pub/", "-q", "-P", std::to_string(server.port())});
  auto r = run_aesxfer(args, ws.home);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(fs::exists(ws.root / "pub" / ("f" + std::to_string(i)))) << i;
  r = run_aesxfer(
      {"send", (ws.local / "f0").string(), "127.0.0.1:other/", "-q", "-P", std::to_string(server.port())},
      ws.home);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(server.log().find("server busy"), std::string::npos) << server.log();
}

}  // namespace
}  // namespace aesxfer::test
