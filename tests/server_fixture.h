// A test with its own workspace and an `aesxfer serve` on a loopback port for its whole length;
// on teardown the server must exit cleanly on SIGTERM with no sanitizer report, and a failing
// test shows the server's log. Shared by the end-to-end suites of issue 7 and after.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tests/harness.h"

namespace aesxfer::test {

class ServerTest : public testing::Test {
 protected:
  Workspace ws;
  std::unique_ptr<ServerProcess> server;
  // Extra `aesxfer serve` options for the fixture's server.
  virtual std::vector<std::string> server_args() const { return {}; }
  void SetUp() override { server = std::make_unique<ServerProcess>(ws.home, ws.root, server_args()); }
  void TearDown() override {
    if (!server) return;
    EXPECT_EQ(server->stop(), 0) << "the server did not exit cleanly on SIGTERM";
    EXPECT_EQ(sanitizer_findings(server->log()), "");
    if (HasFailure()) std::cerr << "--- server log ---\n" << server->log();
  }
  // The aesxfer binary with args, against this server (or `port`), with a 20 s network timeout
  // unless args give one.
  ProcResult run(std::vector<std::string> a, uint16_t port = 0, double timeout_s = 120) {
    const bool timeout_given = std::find(a.begin(), a.end(), "--timeout") != a.end();
    a.push_back("-P");
    a.push_back(std::to_string(port ? port : server->port()));
    if (!timeout_given) {
      a.push_back("--timeout");
      a.push_back("20");
    }
    return run_aesxfer(a, ws.home, timeout_s);
  }
};

}  // namespace aesxfer::test
