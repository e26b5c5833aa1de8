// files::fitted: what the Ctrl-C line keeps of a text too long for its slot. A forty-sixth
// re-attack (B-F2): the server-kept slot, `what arrived of "F" in "HOST:PATH" (port N)`, was cut
// to "...TAIL" and its path's opening quote went, so that a sent tree's deep names read as clauses
// of the line. The quotes stay paired; the name, at the end, is still said.
#include <gtest/gtest.h>

#include <string>

#include "files/atomic_file.h"
#include "proto/failure.h"

namespace aesxfer::test {
namespace {

// The quotes of a quoted() text that are not escaped: paired when even.
size_t bare_quotes(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
      continue;
    }
    n += s[i] == '"';
  }
  return n;
}

TEST(Fitted, ACutKeepsTheQuotesPairedAndTheNameAtTheEnd) {
  std::string path = "127.0.0.1:backup";
  for (int i = 0; i < 8; ++i) path += "/" + std::string(150, char('A' + i)) + "; removed \"x\" \xe2\x80\xae";
  path += "/big.bin";
  const std::string remote =
      "what arrived of " + proto::quoted("big.bin") + " in " + proto::quoted(path) + " (port 4)";
  const std::string local = proto::quoted("/home/u/" + path.substr(10));
  for (const std::string& shown : {remote, local}) {
    for (size_t cap : {64u, 200u, 1024u}) {
      const std::string f = files::fitted(shown, cap);
      EXPECT_LT(f.size(), cap) << f;
      EXPECT_GT(f.size(), cap - 8) << f;
      EXPECT_EQ(bare_quotes(f) % 2, 0u) << f;
      EXPECT_NE(f.find("/big.bin\""), std::string::npos) << f;
      EXPECT_NE(f.find("\"..."), std::string::npos) << f;
      if (shown == remote) {
        EXPECT_EQ(f.rfind("what arrived of \"...", 0), 0u) << f;
      }
      // The tail is the text's own, from a whole escape or character on.
      const std::string tail = f.substr(f.find("...") + 3);
      EXPECT_EQ(shown.compare(shown.size() - tail.size(), tail.size(), tail), 0) << f;
    }
  }
  EXPECT_EQ(files::fitted("short", 64), "short");
}

}  // namespace
}  // namespace aesxfer::test
