// Handwritten SVG charts for `aesxfer bench --plot` (bar chart) and `aesxfer speed --plot` (line
// chart, with small multiples: one panel per family). No library: the output is a self-contained
// SVG document, well-formed XML, every piece of text escaped, every attribute double-quoted. Bars
// carry class="bar" and lines are one <polyline class="line"> per series, so tests and scripts can
// count them. The line charts are drawn by app/lab/svg_line.cpp.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aesxfer::app::svg {

// XML text/attribute escaping: & < > " ' and control characters other than tab/newline dropped.
std::string escape(std::string_view s);

// The one visual encoding of every chart (`speed`, `bench`, `bench --record-size`, `bench
// --vs-scp`), written down in docs/DESIGN.md ("Charts"):
//   colour   the family: a cipher, MAC or checksum of aesxfer's tables, or the tool scp. The same
//            family has the same colour in every chart; no two families share one (family_colour).
//   dash     the portable code of a cipher that also has hardware code (AES without AES-NI), and
//            nothing else: a dashed line, or a bar with a dashed outline and a pale fill.
//   marker   in line charts, the operation: enc circle, dec square, enc xN lanes triangle (the
//            widest lanes: diamond); a series without an operation has circles.
//   "*"      a figure measured while other processes had the CPU (contended); "+" a figure where
//            the set-up (connect, key exchange, authentication) took longer than the transfer.
// Every bar, line and legend key carries data-family="..." (and data-portable="1" when dashed),
// so tests and scripts can check the encoding.
const char* family_colour(std::string_view family);
inline constexpr const char* kPortableDash = "6 3";
enum class Marker { circle, square, triangle, diamond };

struct Bar {
  std::string label;       // x-axis label (cipher name)
  std::string family;      // picks the colour (family_colour): a cipher name, "scp", ...
  std::string legend;      // the family's legend entry (the first bar of a family gives it); empty: family
  bool portable = false;   // the portable code of a cipher with hardware code: dashed outline
  double value = 0;        // bar height (median)
  double lo = 0, hi = 0;   // whisker (min, max); lo == hi == 0: no whisker
  std::string note;        // small text under the group's label (the group's notes joined by " / ")
  std::string group_note;  // a line under the group (each distinct one of the group on its own line)
  std::string absent;  // non-empty: no bar (a row without a figure); this text stands upright in its place
  bool contended = false;  // the run waited for the CPU (other processes): marked "*" and explained
  bool setup = false;      // set-up took longer than the transfer: marked "+" and explained
};

struct BarChart {
  std::string title;
  std::string subtitle;  // CPU model and date, say
  std::string y_label;   // "MB/s (10^6 bytes/s)"
  std::string x_label;
  std::string whisker_legend;  // legend text for the whiskers ("min-max of 3 runs"); empty: none
  std::string contended_legend = "* CPU contended: other processes had the cores (see the verdicts)";
  std::string setup_legend = "+ set-up took longer than the transfer: too small to compare";
  std::vector<Bar> bars;  // left to right; bars with the same label and adjacent are grouped
};

struct Series {
  std::string label;                              // tooltip, and the legend of a single plot
  std::vector<std::pair<double, double>> points;  // (x, y), x > 0 for a log2 axis
  std::string family;                             // picks the colour (family_colour); empty: the label
  bool portable = false;                          // dashed
  Marker marker = Marker::circle;
  std::string op;                  // what the marker stands for in the key ("enc", "dec"); empty: no key
  std::vector<std::string> marks;  // per point (empty: none): "*", "+", "*+" written beside it
  std::string panel;  // small multiples: series of one panel share a plot; empty everywhere: one plot
};

struct LineChart {
  std::string title;
  std::string subtitle;
  std::string x_label;
  std::string y_label;
  bool log2_x = true;    // x axis on a log2 scale, ticks at each distinct x of the data
  bool log10_y = false;  // y axis on a log10 scale (decades labelled, 2 and 5 as minor lines)
  // What each mark means, one line each ("* CPU contended: ..."); a line is shown when a point
  // carries the mark it starts with.
  std::vector<std::string> mark_legend = {"* CPU contended: other processes had the cores"};
  std::vector<Series> series;
};

std::string bar_chart(const BarChart& c);
std::string line_chart(const LineChart& c);

// "16", "1K", "8K", "1M", "1G" for byte counts that are powers of two times 1024^k, else the number.
std::string bytes_label(double bytes);

// Writes the document; returns false with a one-line reason in `why`.
bool write_file(const std::filesystem::path& p, const std::string& doc, std::string& why);

}  // namespace aesxfer::app::svg
