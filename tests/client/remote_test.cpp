// HOST:PATH as send and recv read it (client/remote.h), scp's rules: a colon before any slash
// names a host; "[v6]:path" for an IPv6 address; "user@" accepted and kept apart; "host:" is the
// server's root; anything else is a local path.
#include "client/remote.h"

#include <gtest/gtest.h>

namespace aesxfer::client {
namespace {

TEST(Remote, HostPathUserAndTheLocalPaths) {
  struct Case {
    const char* arg;
    bool remote;
    const char* host;
    const char* path;
    const char* user;
  };
  const Case cases[] = {
      {"box:dir/f", true, "box", "dir/f", ""},
      {"box:", true, "box", ".", ""},
      {"me@box:f", true, "box", "f", "me"},
      {"[::1]:f", true, "::1", "f", ""},
      {"me@[fe80::1%eth0]:", true, "fe80::1%eth0", ".", "me"},
      {"10.0.0.1:/abs", true, "10.0.0.1", "/abs", ""},
      {"./a:b", false, "", "", ""},
      {"dir/x:y", false, "", "", ""},
      {"plain.txt", false, "", "", ""},
      {":f", false, "", "", ""},
      {"[]:f", false, "", "", ""},  // no host between the brackets: a local path, never "" to connect to
      {"[::1]", false, "", "", ""},
      {"[::1]x", false, "", "", ""},
      {"@box:f", true, "@box", "f", ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.arg);
    auto r = parse_remote(c.arg);
    ASSERT_EQ(r.has_value(), c.remote);
    if (!r) continue;
    EXPECT_EQ(r->host, c.host);
    EXPECT_EQ(r->path, c.path);
    EXPECT_EQ(r->user, c.user);
  }
}

}  // namespace
}  // namespace aesxfer::client
