// server::log_quoted and log_value: a peer's text as a log value that a shell-style splitter and a
// logfmt parser with go-logfmt's rules (tests/logfmt_reader.h) both read, as the same text, the
// text printable() shows; and cut between escapes and characters, never inside one.
#include "server/log_value.h"

#include <gtest/gtest.h>

#include "proto/failure.h"
#include "tests/logfmt_reader.h"

namespace aesxfer::test {
namespace {

std::string read_back(const std::string& value) {
  auto pairs = go_logfmt("k=" + value);
  if (!pairs || pairs->size() != 1) return "<not logfmt: " + value + ">";
  return pairs->front().second;
}

// What proto::quoted(s) shows between its quotes (printable, inside a quote: '$' and '`' as \x24
// and \x60, which a shell would expand), its \" read as '"'.
std::string shown(const std::string& s) {
  const std::string q = proto::quoted(s);
  std::string out;
  for (size_t i = 1; i + 1 < q.size(); ++i) {
    if (q[i] == '\\' && q[i + 1] == '"') ++i;
    out += q[i];
  }
  return out;
}

TEST(LogValue, AGoLogfmtParserReadsWhatATerminalShows) {
  EXPECT_EQ(server::log_quoted("a$b\"c\\d`e"), "\"a\\\\x24b\\\"c\\\\x5cd\\\\x60e\"");
  for (const std::string& s :
       {std::string("plain.txt"), std::string("$HOME `id`"), std::string("q\"uo\"te"),
        std::string("back\\slash\\x41"), std::string("esc\x1b[2J\x07"), std::string("bad \xff\xfe utf8"),
        std::string("nl\nresult=ok x=\"y"), std::string("rlo \xe2\x80\xae exe"), std::string("caf\xc3\xa9"),
        std::string("\xf0\x9f\x98\x80 emoji")}) {
    const std::string v = server::log_quoted(s);
    EXPECT_EQ(read_back(v), shown(s)) << v;
  }
}

TEST(LogValue, ACutValueEndsBetweenEscapesAndCharactersAndStillReads) {
  for (const std::string& unit : {std::string("\xff"), std::string("$"), std::string("\""),
                                  std::string("\xc3\xa9"), std::string("a"), std::string("\xe2\x80\xae")}) {
    for (size_t n : {300u, 301u, 302u, 303u}) {
      std::string s;
      while (s.size() < n) s += unit;
      const std::string v = server::log_value(s, server::kLoggedPath);
      const std::string back = read_back(v);
      const std::string suffix = "...[" + std::to_string(s.size()) + " bytes]";
      ASSERT_GE(back.size(), suffix.size()) << v;
      EXPECT_EQ(back.substr(back.size() - suffix.size()), suffix) << v;
      // What stands before the suffix is a prefix of what the whole value shows, ending on a
      // whole escape or character, and the value itself is at most the bound.
      const std::string kept = back.substr(0, back.size() - suffix.size());
      EXPECT_EQ(shown(s).rfind(kept, 0), 0u) << v;
      EXPECT_LE(v.size() - suffix.size() - 2, server::kLoggedPath) << v;
      EXPECT_GT(v.size() - suffix.size() - 2, server::kLoggedPath - 6) << v;
      EXPECT_EQ(shown(s).size() % shown(unit).size(), 0u);
      EXPECT_EQ(kept.size() % shown(unit).size(), 0u) << v;
    }
  }
  EXPECT_EQ(server::log_value("short $", 256), server::log_quoted("short $"));
}

}  // namespace
}  // namespace aesxfer::test
