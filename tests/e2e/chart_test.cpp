// The charts as a person sees them: each is rendered to PNG with rsvg-convert (librsvg2-bin) and
// nothing may touch the image's border (a clipped legend or label would); the bench legend's
// swatches are the colours of the bars they name; every line of the speed chart has a look of its
// own, and --no-aesni-too twins share their cipher's colour; a contended run is marked.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "app/lab/speed.h"
#include "app/lab/svg.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

namespace svg = app::svg;

// Renders the SVG and runs tests/png_border.py on it; "" when the border is clear.
std::string render_problem(const std::string& doc, const std::string& tag) {
  TempDir t("aesxfer-chart");
  write_text_file(t / (tag + ".svg"), doc);
  auto r = run_process(
      {"/usr/bin/rsvg-convert", (t / (tag + ".svg")).string(), "-o", (t / (tag + ".png")).string()}, {}, 60);
  if (r.exit_code != 0) return "rsvg-convert failed (package librsvg2-bin): " + r.describe();
  auto c = run_process({"/usr/bin/env", "python3", std::string(AESXFER_SOURCE_DIR) + "/tests/png_border.py",
                        (t / (tag + ".png")).string()},
                       {}, 120);
  return c.exit_code == 0 ? "" : tag + ": " + c.out + c.err;
}

TEST(Charts, BarChartLegendMatchesTheBarsAndFitsWhenLong) {
  svg::BarChart c;
  c.title = "t";
  c.y_label = "MB/s";
  c.whisker_legend = "min-max of 3 runs";
  const char* series[] = {"AES in hardware (AES-NI, VAES)", "portable code", "no cipher",
                          "scp (OpenSSH_9.2p1, a long version string to force the legend onto two rows)"};
  for (int i = 0; i < 8; ++i) {
    svg::Bar b;
    b.label = "cipher" + std::to_string(i / 2);
    b.series = series[i % 4];
    b.value = 100 + 50 * i;
    b.lo = b.value - 10;
    b.hi = b.value + 10;
    b.contended = i == 3;
    c.bars.push_back(b);
  }
  const std::string doc = svg::bar_chart(c);
  EXPECT_EQ(render_problem(doc, "bars"), "");
  // Each series' swatch colour is the fill of that series' bars.
  std::map<std::string, std::string> swatch;  // series -> fill
  std::regex sw("<rect class=\"swatch\"[^>]*fill=\"(#[0-9a-f]{6})\"/>\\n<text[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), sw); it != std::sregex_iterator(); ++it)
    swatch[(*it)[2]] = (*it)[1];
  ASSERT_EQ(swatch.size(), 4u) << doc;
  std::regex bar("<rect class=\"bar\"[^>]*fill=\"(#[0-9a-f]{6})\"><title>[^(]*\\(([^)]*\\)?)\\)");
  size_t bars = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), bar); it != std::sregex_iterator();
       ++it, ++bars) {
    std::string name = (*it)[2];
    if (!swatch.count(name)) name += ")";  // a series name with its own parentheses
    EXPECT_EQ(swatch[name], (*it)[1]) << name;
  }
  EXPECT_EQ(bars, 8u);
  // The contended run: its value carries "*", and the legend says what that means.
  EXPECT_NE(doc.find("class=\"value contended\""), std::string::npos);
  EXPECT_NE(doc.find("* CPU contended"), std::string::npos);
}

TEST(Charts, SpeedChartEveryLineHasItsOwnLookAndTheLegendFits) {
  std::ostringstream out, err;
  TempDir t;
  app::SpeedOptions o;
  o.seconds = 0.002;
  o.sizes = {16, 1024, 16384};
  o.no_aesni_too = true;
  o.plot = (t / "speed.svg").string();
  ASSERT_EQ(app::run_speed(o, out, err), 0) << err.str();
  const std::string doc = read_text_file(t / "speed.svg");
  EXPECT_EQ(render_problem(doc, "speed"), "");
  std::regex line(
      "<polyline class=\"line\" fill=\"none\" stroke=\"(#[0-9a-f]{6})\" stroke-width=\"2\""
      "(?: stroke-dasharray=\"([0-9 ]+)\")? points=\"[^\"]*\"><title>([^<]*)</title>");
  std::set<std::pair<std::string, std::string>> looks;
  std::map<std::string, std::string> colour_of;
  size_t n = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), line); it != std::sregex_iterator();
       ++it, ++n) {
    EXPECT_TRUE(looks.insert({(*it)[1], (*it)[2]}).second) << "two lines look alike: " << (*it)[3];
    colour_of[(*it)[3]] = (*it)[1];
  }
  EXPECT_GT(n, 16u) << "every cipher, MAC and checksum, AES twice";
  // A no-AES-NI twin has its cipher's colour (and so a different dash).
  size_t twins = 0;
  for (const auto& [label, colour] : colour_of) {
    const size_t at = label.find(" (no AES-NI)");
    if (at == std::string::npos) continue;
    for (const auto& [other, c2] : colour_of)
      if (other.rfind(label.substr(0, at) + " [", 0) == 0) {
        EXPECT_EQ(c2, colour) << label << " vs " << other;
        ++twins;
      }
  }
  EXPECT_GE(twins, 4u);
}

TEST(Charts, BenchChartsRender) {
  Workspace ws;
  const fs::path bars = ws.local / "bars.svg", lines = ws.local / "lines.svg";
  auto r = run_aesxfer({"bench", "--size", "2M", "--repeat", "1", "-c", "aes128-gcm,blowfish-cbc,none",
                        "--no-aesni-too", "--plot", bars.string(), "-q"},
                       ws.home, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string doc = read_text_file(bars);
  EXPECT_EQ(render_problem(doc, "bench-bars"), "");
  for (const char* s : {">AES in hardware (AES-NI, VAES)<", ">portable code<", ">no cipher<"})
    EXPECT_NE(doc.find(s), std::string::npos) << s;
  auto s = run_aesxfer({"bench", "--size", "1M", "--repeat", "1", "-c", "aes128-gcm,none", "--record-size",
                        "4K,1M", "--plot", lines.string(), "-q"},
                       ws.home, 120);
  ASSERT_EQ(s.exit_code, 0) << s.describe();
  EXPECT_EQ(render_problem(read_text_file(lines), "bench-lines"), "");
}

}  // namespace
}  // namespace aesxfer::test
