// The server sweeps expired partial files where a put lands, end to end (the sweeper itself:
// tests/server/sweep_test.cpp).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace aesxfer::test
