// The man page keeps up with the binary: SYNOPSIS names every command that --help lists, and the
// OPTIONS FOR SPEED and OPTIONS FOR BENCH sections name every long option of those commands.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "tests/harness.h"

namespace aesxfer::test {
namespace {

std::string man_section(const std::string& man, const std::string& heading) {
  const std::string start = ".SH " + heading + "\n";
  const size_t from = man.find(start);
  if (from == std::string::npos) return "";
  const size_t to = man.find("\n.SH ", from + start.size());
  return man.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

// The long options --help prints for a command ("  -c,--cipher LIST ..." -> "cipher").
std::set<std::string> long_options(const std::string& help) {
  std::set<std::string> out;
  static const std::regex opt(R"(^\s+(?:-[A-Za-z],)?--([a-z][a-z0-9-]*))");
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, opt) && m[1] != "help") out.insert(m[1]);
  }
  return out;
}

std::string man_escaped(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

TEST(ManPage, SynopsisNamesEveryCommand) {
  Workspace ws;
  const std::string man = read_text_file(fs::path(AESXFER_SOURCE_DIR) / "docs/aesxfer.1");
  const std::string synopsis = man_section(man, "SYNOPSIS");
  ASSERT_FALSE(synopsis.empty());
  auto r = run_aesxfer({"--help"}, ws.home, 30);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const size_t subs = r.out.find("Subcommands:");
  ASSERT_NE(subs, std::string::npos) << r.out;
  std::istringstream in(r.out.substr(subs));
  int commands = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, std::regex(R"(^  ([a-z]+)\s)"))) continue;
    ++commands;
    EXPECT_NE(synopsis.find(".B aesxfer " + m[1].str() + "\n"), std::string::npos) << m[1] << "\n"
                                                                                   << synopsis;
  }
  EXPECT_GE(commands, 7) << r.out;
  // recv takes several sources, as its --help line says.
  EXPECT_NE(synopsis.find(".B aesxfer recv\n.RI [ options ]\n.IB HOST : SRC ...\n"), std::string::npos)
      << synopsis;
}

TEST(ManPage, LabSectionsNameEveryOption) {
  Workspace ws;
  const std::string man = read_text_file(fs::path(AESXFER_SOURCE_DIR) / "docs/aesxfer.1");
  for (const char* cmd : {"speed", "bench"}) {
    SCOPED_TRACE(cmd);
    const std::string section =
        man_section(man, std::string("\"OPTIONS FOR ") + (cmd[0] == 's' ? "SPEED" : "BENCH") + "\"");
    ASSERT_FALSE(section.empty()) << cmd;
    auto r = run_aesxfer({cmd, "--help"}, ws.home, 30);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const auto opts = long_options(r.out);
    EXPECT_GE(opts.size(), 5u) << r.out;
    for (const auto& o : opts)
      EXPECT_NE(section.find("\\-\\-" + man_escaped(o)), std::string::npos) << "--" << o;
  }
}

}  // namespace
}  // namespace aesxfer::test
