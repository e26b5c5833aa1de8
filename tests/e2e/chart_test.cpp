// The charts as a person sees them: each is rendered to PNG with rsvg-convert (librsvg2-bin) and
// nothing may touch the image's border (a clipped legend or label would); the bench legend's
// swatches are the colours of the bars they name; the speed chart is one panel per family, and
// --no-aesni-too twins are dashed in their cipher's colour; marked runs are marked; every chart holds
// the one encoding of app/lab/svg.h (chart_encoding_problems).
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "app/lab/speed.h"
#include "app/lab/svg.h"
#include "crypto/suite.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

namespace svg = app::svg;

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

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
  struct {
    const char* family;
    const char* legend;
    bool portable;
  } kinds[] = {
      {"aes128-gcm", "aesxfer aes128-gcm", false},
      {"aes128-gcm", "aesxfer aes128-gcm", true},
      {"none", "none (no cipher)", false},
      {"scp", "scp (OpenSSH_9.2p1, a long version string to force the legend onto two rows)", false}};
  for (int i = 0; i < 8; ++i) {
    svg::Bar b;
    b.label = "cipher" + std::to_string(i / 2);
    b.family = kinds[i % 4].family;
    b.legend = kinds[i % 4].legend;
    b.portable = kinds[i % 4].portable;
    b.value = 100 + 50 * i;
    b.lo = b.value - 10;
    b.hi = b.value + 10;
    b.contended = i == 3;
    b.setup = i == 5;
    c.bars.push_back(b);
  }
  const std::string doc = svg::bar_chart(c);
  EXPECT_EQ(render_problem(doc, "bars"), "");
  EXPECT_EQ(chart_encoding_problems({doc}), std::vector<std::string>{});
  // Each family's swatch has the fill of that family's bars; the dashed swatch says what dashes mean.
  std::map<std::string, std::string> swatch;  // family -> fill
  std::regex sw("<rect class=\"swatch\"[^>]*fill=\"(#[0-9a-f]{6})\"[^>]*data-family=\"([^\"]+)\"/>");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), sw); it != std::sregex_iterator(); ++it)
    swatch[(*it)[2]] = (*it)[1];
  ASSERT_EQ(swatch.size(), 3u) << doc;
  std::regex bar("<rect class=\"bar\"[^>]*fill=\"(#[0-9a-f]{6})\"[^>]*data-family=\"([^\"]+)\">");
  size_t bars = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), bar); it != std::sregex_iterator();
       ++it, ++bars)
    EXPECT_EQ(swatch[(*it)[2]], (*it)[1]) << (*it)[2];
  EXPECT_EQ(bars, 8u);
  EXPECT_EQ(count(doc, "stroke-dasharray=\""), 2u + 1u) << "two portable bars and the legend's dashed swatch";
  EXPECT_NE(doc.find(">dashed: portable code (AES without AES-NI)<"), std::string::npos);
  // The marked runs: the value carries "*" or "+", and the legend says what each means.
  EXPECT_NE(doc.find("class=\"value contended\""), std::string::npos);
  EXPECT_NE(doc.find("class=\"value setup\""), std::string::npos);
  EXPECT_NE(doc.find("* CPU contended"), std::string::npos);
  EXPECT_NE(doc.find("+ set-up took longer"), std::string::npos);
}

// Every family of the tables (ciphers, MACs, checksums) and the tool scp has a colour of its own.
TEST(Charts, EveryFamilyHasItsOwnColour) {
  std::map<std::string, std::string> family_of;  // colour -> family
  std::vector<std::string> families = {"scp", "sha256", "xxh128"};
  for (const auto& c : crypto::ciphers()) families.push_back(c.name);
  for (const auto& m : crypto::macs())
    if (m.make) families.push_back(m.name);
  for (const auto& f : families) {
    auto [it, fresh] = family_of.emplace(svg::family_colour(f), f);
    EXPECT_TRUE(fresh) << f << " has the colour of " << it->second;
  }
}

// speed --plot: small multiples, one panel per cipher, MAC and checksum, under one key; the
// --no-aesni-too twins dashed in their cipher's colour; `none` is not legacy.
TEST(Charts, SpeedChartIsOnePanelPerFamily) {
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
  EXPECT_EQ(chart_encoding_problems({doc}), std::vector<std::string>{});
  std::regex title("<text [^>]*class=\"panel-title\"[^>]*>([^<]*)</text>");
  std::set<std::string> panels;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), title); it != std::sregex_iterator(); ++it)
    panels.insert((*it)[1]);
  std::set<std::string> want = {"hmac-sha256", "sha256", "xxh128"};
  for (const auto& c : crypto::ciphers()) want.insert(std::string(c.name) + (c.legacy ? " (legacy)" : ""));
  EXPECT_EQ(panels, want);
  EXPECT_EQ(panels.count("none"), 1u) << "none is not legacy";
  EXPECT_GT(count(doc, "<polyline"), 16u) << "every cipher, MAC and checksum, AES twice";
  size_t twins = 0;
  std::regex line("<polyline [^>]*stroke=\"(#[0-9a-f]{6})\"[^>]*><title>([^<]*)</title>");
  std::map<std::string, std::string> colour_of;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), line); it != std::sregex_iterator(); ++it)
    colour_of[(*it)[2]] = (*it)[1];
  for (const auto& [label, colour] : colour_of)
    if (label.find(" (no AES-NI)") != std::string::npos) {
      ++twins;
      EXPECT_EQ(colour, svg::family_colour(label.substr(0, label.find(' ')))) << label;
    }
  EXPECT_GE(twins, 4u);
  // The key: the operations' markers and the dash.
  for (const char* k :
       {">enc, MAC, hash<", ">dec<", ">enc xN lanes<", ">dashed: portable code (AES without AES-NI)<"})
    EXPECT_NE(doc.find(k), std::string::npos) << k;
}

// The bar chart, the record-size chart and the speed chart hold one encoding together.
TEST(Charts, BenchChartsHoldTheEncodingOfSpeed) {
  Workspace ws;
  const fs::path bars = ws.local / "bars.svg", lines = ws.local / "lines.svg", speed = ws.local / "speed.svg";
  auto r = run_aesxfer({"bench", "--size", "2M", "--repeat", "1", "-c", "aes128-gcm,blowfish-cbc,none",
                        "--no-aesni-too", "--plot", bars.string(), "-q"},
                       ws.home, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string doc = read_text_file(bars);
  EXPECT_EQ(render_problem(doc, "bench-bars"), "");
  for (const char* s : {">aes128-gcm<", ">blowfish-cbc<", ">none (no cipher)<", ">dashed: portable code"})
    EXPECT_NE(doc.find(s), std::string::npos) << s;
  auto s = run_aesxfer({"bench", "--size", "1M", "--repeat", "1", "-c", "aes128-gcm,none", "--record-size",
                        "4K,1M", "--no-aesni-too", "--plot", lines.string(), "-q"},
                       ws.home, 120);
  ASSERT_EQ(s.exit_code, 0) << s.describe();
  const std::string sweep = read_text_file(lines);
  EXPECT_EQ(render_problem(sweep, "bench-lines"), "");
  EXPECT_NE(sweep.find("MAC: hmac-sha256"), std::string::npos) << "the MAC, as the bar chart names it";
  auto p = run_aesxfer({"speed", "--seconds", "0.002", "-c", "aes128-gcm,blowfish-cbc,none,xxh128,sha256",
                        "--no-aesni-too", "--plot", speed.string()},
                       ws.home, 120);
  ASSERT_EQ(p.exit_code, 0) << p.describe();
  EXPECT_EQ(chart_encoding_problems({doc, sweep, read_text_file(speed)}), std::vector<std::string>{});
}

}  // namespace
}  // namespace aesxfer::test
