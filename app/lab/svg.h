// Handwritten SVG charts for `aesxfer bench --plot` (bar chart) and `aesxfer speed --plot` (line
// chart). No library: the output is a self-contained SVG 1.1 document, well-formed XML, every piece
// of text escaped, every attribute double-quoted. Bars carry class="bar" and lines are one
// <polyline class="line"> per series, so tests and scripts can count them.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aesxfer::app::svg {

// XML text/attribute escaping: & < > " ' and control characters other than tab/newline dropped.
std::string escape(std::string_view s);

struct Bar {
  std::string label;       // x-axis label (cipher name)
  std::string series;      // legend entry, picks the colour ("AES-NI on", "--no-aesni", ...)
  double value = 0;        // bar height (median)
  double lo = 0, hi = 0;   // whisker (min, max); lo == hi == 0: no whisker
  std::string note;        // small text under the group's label (the group's notes joined by " / ")
  std::string group_note;  // a line under the group (each distinct one of the group on its own line)
  std::string absent;  // non-empty: no bar (a row without a figure); this text stands upright in its place
  bool contended = false;  // the run waited for the CPU (other processes): marked "*" and explained
};

struct BarChart {
  std::string title;
  std::string subtitle;  // CPU model and date, say
  std::string y_label;   // "MB/s (10^6 bytes/s)"
  std::string x_label;
  std::string whisker_legend;  // legend text for the whiskers ("min-max of 3 runs"); empty: none
  std::vector<Bar> bars;       // left to right; bars with the same label and adjacent are grouped
};

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), x > 0 for a log2 axis
  // Series with the same key share a colour and differ by dash pattern (speed --no-aesni-too:
  // one colour per cipher, dashed without AES-NI); empty: the label is the key.
  std::string colour_key;
};

struct LineChart {
  std::string title;
  std::string subtitle;
  std::string x_label;
  std::string y_label;
  bool log2_x = true;    // x axis on a log2 scale, ticks at each distinct x of the data
  bool log10_y = false;  // y axis on a log10 scale (decades labelled, 2 and 5 as minor lines)
  std::vector<Series> series;
};

std::string bar_chart(const BarChart& c);
std::string line_chart(const LineChart& c);

// "16", "1K", "8K", "1M", "1G" for byte counts that are powers of two times 1024^k, else the number.
std::string bytes_label(double bytes);

// Writes the document; returns false with a one-line reason in `why`.
bool write_file(const std::filesystem::path& p, const std::string& doc, std::string& why);

}  // namespace aesxfer::app::svg
