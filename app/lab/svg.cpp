// SVG charts, written by hand. See app/lab/svg.h.
#include "app/lab/svg.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

namespace aesxfer::app::svg {
namespace {

// Colour-blind-friendly enough (Tableau 10), then darker variants.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
                                    "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1f4e79", "#b35806",
                                    "#2d6a2d", "#8c1d1f", "#3b7f7a", "#7a5c00"};
constexpr size_t kPaletteN = sizeof kPalette / sizeof kPalette[0];
constexpr const char* kDashes[] = {"", "7 4", "2 3", "9 3 2 3"};
constexpr const char* kFont = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

// The look of each series of a line chart: series with the same colour key share a colour; the
// members of a key, and keys beyond the palette, get different dash patterns, so no two series
// look alike (up to 16 keys of 4 members, or 64 single series).
struct Look {
  const char* colour;
  const char* dash;
};
std::vector<Look> looks(const std::vector<Series>& series) {
  std::vector<std::string> keys;
  std::vector<std::set<size_t>> dashes_used(kPaletteN);  // per colour: the dash patterns taken
  std::vector<Look> out;
  for (const auto& se : series) {
    const std::string& key = se.colour_key.empty() ? se.label : se.colour_key;
    size_t ci = size_t(std::find(keys.begin(), keys.end(), key) - keys.begin());
    if (ci == keys.size()) keys.push_back(key);
    auto& used = dashes_used[ci % kPaletteN];
    size_t d = 0;
    while (d < 4 && used.count(d)) ++d;  // the first pattern this colour has not drawn yet
    used.insert(d % 4);
    out.push_back({kPalette[ci % kPaletteN], kDashes[d % 4]});
  }
  return out;
}

// Width of a text in the chart's 12 px sans-serif font, generously (DejaVu Sans averages about
// 0.6 em): legends are laid out with it so that nothing is clipped.
double text_width(const std::string& t, double px = 12) { return 0.62 * px * double(t.size()); }

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// A figure as a label: 3 significant digits for small values, integers for large ones.
std::string value_label(double v) {
  char b[32];
  if (v >= 100)
    std::snprintf(b, sizeof b, "%.0f", v);
  else if (v >= 10)
    std::snprintf(b, sizeof b, "%.1f", v);
  else
    std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

// A "nice" tick step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` intervals up to max.
double nice_step(double max, int ticks) {
  if (!(max > 0) || !std::isfinite(max)) return 1;
  const double raw = max / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::string header(double w, double h) {
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(w) + "\" height=\"" +
       num(h) + "\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\" " + kFont + ">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + num(w) + "\" height=\"" + num(h) + "\" fill=\"#ffffff\"/>\n";
  return s;
}

std::string text(double x, double y, const std::string& t, const std::string& attrs) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" " + attrs + ">" + escape(t) + "</text>\n";
}

// Title, subtitle, horizontal grid lines with y tick labels and the rotated y-axis label.
// Returns the y-axis maximum actually used.
double y_axis(std::string& s, double x0, double x1, double top, double bottom, double data_max,
              const std::string& y_label) {
  const double step = nice_step(data_max > 0 ? data_max * 1.08 : 1, 6);
  const double ymax = std::max(step, std::ceil(data_max * 1.08 / step) * step);
  s += "<g class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  for (double v = 0; v <= ymax + step / 2; v += step) {
    const double y = bottom - (bottom - top) * v / ymax;
    s +=
        "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y) + "\"/>\n";
  }
  s += "</g>\n<g class=\"yticks\" font-size=\"11\" fill=\"#333333\" text-anchor=\"end\">\n";
  for (double v = 0; v <= ymax + step / 2; v += step) {
    const double y = bottom - (bottom - top) * v / ymax;
    char b[32];
    std::snprintf(b, sizeof b, step < 1 ? "%.2g" : "%.0f", v);
    s += text(x0 - 6, y + 4, b, "");
  }
  s += "</g>\n";
  const double cy = (top + bottom) / 2;
  s += "<text class=\"ylabel\" x=\"" + num(x0 - 58) + "\" y=\"" + num(cy) +
       "\" font-size=\"13\" fill=\"#222222\" " + "text-anchor=\"middle\" transform=\"rotate(-90 " +
       num(x0 - 58) + " " + num(cy) + ")\">" + escape(y_label) + "</text>\n";
  s += "<line class=\"axis\" x1=\"" + num(x0) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(x1) + "\" y2=\"" +
       num(bottom) + "\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
  s += "<line class=\"axis\" x1=\"" + num(x0) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x0) + "\" y2=\"" +
       num(bottom) + "\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
  return ymax;
}

// A log10 y axis from 10^dec_lo to 10^dec_hi: decade lines labelled, 2x and 5x as minor lines.
void log_y_axis(std::string& s, double x0, double x1, double top, double bottom, double dec_lo, double dec_hi,
                const std::string& y_label) {
  auto ypos = [&](double l) { return bottom - (bottom - top) * (l - dec_lo) / (dec_hi - dec_lo); };
  s += "<g class=\"grid\" stroke=\"#f0f0f0\" stroke-width=\"1\">\n";
  for (double d = dec_lo; d < dec_hi; d += 1)
    for (double m : {2.0, 5.0}) {
      const double y = ypos(d + std::log10(m));
      s += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y) +
           "\"/>\n";
    }
  s += "</g>\n<g class=\"grid\" stroke=\"#d8d8d8\" stroke-width=\"1\">\n";
  for (double d = dec_lo; d <= dec_hi + 0.5; d += 1) {
    const double y = ypos(d);
    s +=
        "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y) + "\"/>\n";
  }
  s += "</g>\n<g class=\"yticks\" font-size=\"11\" fill=\"#333333\" text-anchor=\"end\">\n";
  for (double d = dec_lo; d <= dec_hi + 0.5; d += 1) {
    char b[32];
    std::snprintf(b, sizeof b, d >= 0 ? "%.0f" : "%g", std::pow(10.0, d));
    s += text(x0 - 6, ypos(d) + 4, b, "");
  }
  s += "</g>\n";
  const double cy = (top + bottom) / 2;
  s += "<text class=\"ylabel\" x=\"" + num(x0 - 58) + "\" y=\"" + num(cy) +
       "\" font-size=\"13\" fill=\"#222222\" " + "text-anchor=\"middle\" transform=\"rotate(-90 " +
       num(x0 - 58) + " " + num(cy) + ")\">" + escape(y_label) + "</text>\n";
  s += "<line class=\"axis\" x1=\"" + num(x0) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(x1) + "\" y2=\"" +
       num(bottom) + "\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
  s += "<line class=\"axis\" x1=\"" + num(x0) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x0) + "\" y2=\"" +
       num(bottom) + "\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
}

void titles(std::string& s, double w, const std::string& title, const std::string& subtitle) {
  s += "<text class=\"title\" x=\"" + num(w / 2) + "\" y=\"26\" font-size=\"17\" font-weight=\"bold\" " +
       "fill=\"#111111\" text-anchor=\"middle\">" + escape(title) + "</text>\n";
  if (!subtitle.empty())
    s += "<text class=\"subtitle\" x=\"" + num(w / 2) + "\" y=\"46\" font-size=\"12\" fill=\"#555555\" " +
         "text-anchor=\"middle\">" + escape(subtitle) + "</text>\n";
}

// Length of the valid UTF-8 sequence starting at in[i] (1..4), or 0 if it is not valid UTF-8.
size_t utf8_len(std::string_view in, size_t i) {
  const auto c = static_cast<unsigned char>(in[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > in.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(in[i + k]) & 0xc0) != 0x80) return 0;
  if (n == 2 && c < 0xc2) return 0;  // overlong
  return n;
}

}  // namespace

std::string escape(std::string_view in) {
  std::string o;
  o.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c >= 0x80) {  // non-ASCII: kept when valid UTF-8 (the document says UTF-8), else '?'
      const size_t n = utf8_len(in, i);
      if (n == 0) {
        o += '?';
      } else {
        o.append(in.substr(i, n));
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n') break;  // not allowed in XML 1.0
        o += char(c);
    }
  }
  return o;
}

std::string bytes_label(double bytes) {
  const char* units[] = {"", "K", "M", "G", "T"};
  double v = bytes;
  int u = 0;
  while (u < 4 && v >= 1024 && std::fmod(v, 1024) == 0) {
    v /= 1024;
    ++u;
  }
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%s", v, units[u]);
  return b;
}

namespace {

// Runs of adjacent bars with the same label, as [first, last).
using Groups = std::vector<std::pair<size_t, size_t>>;
Groups bar_groups(const std::vector<Bar>& bars) {
  Groups groups;
  for (size_t i = 0; i < bars.size();) {
    size_t j = i + 1;
    while (j < bars.size() && bars[j].label == bars[i].label) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  return groups;
}

// Lines under each group: the distinct group notes of its bars.
std::vector<std::vector<std::string>> group_note_lines(const std::vector<Bar>& bars, const Groups& groups) {
  std::vector<std::vector<std::string>> out;
  for (const auto& [a, b] : groups) {
    std::vector<std::string> lines;
    for (size_t i = a; i < b; ++i)
      if (!bars[i].group_note.empty() &&
          std::find(lines.begin(), lines.end(), bars[i].group_note) == lines.end())
        lines.push_back(bars[i].group_note);
    out.push_back(std::move(lines));
  }
  return out;
}

// One entry of the bar chart's legend, placed by layout_legend.
struct LegendItem {
  int kind;  // 0 swatch (series index in `idx`), 1 whisker, 2 contended marker
  size_t idx;
  std::string label;
  double x = 0, y = 0;
};

// The legend's items: a swatch per series, the whisker, the contended marker.
std::vector<LegendItem> legend_items(const BarChart& c, const std::vector<std::string>& series) {
  bool any_contended = false;
  for (const auto& b : c.bars) any_contended = any_contended || (b.contended && b.absent.empty());
  std::vector<LegendItem> items;
  for (size_t i = 0; i < series.size(); ++i) items.push_back({0, i, series[i]});
  if (!c.whisker_legend.empty()) items.push_back({1, 0, c.whisker_legend});
  if (any_contended)
    items.push_back({2, 0, "* CPU contended: other processes had the cores (see the verdicts)"});
  return items;
}

// Wraps the items into centred rows that fit the width w, from y = 70 down, 18 px a row.
void layout_legend(std::vector<LegendItem>& items, double w) {
  double x = 10, y = 70;
  std::vector<std::vector<size_t>> rows(1);
  std::vector<double> row_w(1, 0);
  for (size_t k = 0; k < items.size(); ++k) {
    const double iw = 20 + text_width(items[k].label) + 24;
    if (!rows.back().empty() && row_w.back() + iw > w - 20) {
      rows.emplace_back();
      row_w.push_back(0);
    }
    rows.back().push_back(k);
    row_w.back() += iw;
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    x = std::max(10.0, (w - row_w[r]) / 2);
    for (size_t k : rows[r]) {
      items[k].x = x;
      items[k].y = y;
      x += 20 + text_width(items[k].label) + 24;
    }
    y += 18;
  }
}

void draw_legend(std::string& s, const std::vector<LegendItem>& items) {
  s += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
  for (const LegendItem& it : items) {
    const double lx = it.x, ly = it.y;
    if (it.kind == 0) {
      s += "<rect class=\"swatch\" x=\"" + num(lx) + "\" y=\"" + num(ly - 10) +
           "\" width=\"14\" height=\"12\" fill=\"" + kPalette[it.idx % kPaletteN] + "\"/>\n";
    } else if (it.kind == 1) {
      s += "<line x1=\"" + num(lx + 7) + "\" y1=\"" + num(ly - 12) + "\" x2=\"" + num(lx + 7) + "\" y2=\"" +
           num(ly + 3) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
      s += "<line x1=\"" + num(lx + 3) + "\" y1=\"" + num(ly - 12) + "\" x2=\"" + num(lx + 11) + "\" y2=\"" +
           num(ly - 12) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
      s += "<line x1=\"" + num(lx + 3) + "\" y1=\"" + num(ly + 3) + "\" x2=\"" + num(lx + 11) + "\" y2=\"" +
           num(ly + 3) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
    }
    s += text(lx + (it.kind == 2 ? 0 : 20), ly, it.label, it.kind == 2 ? "class=\"contended-note\"" : "");
  }
  s += "</g>\n";
}

constexpr double kBarW = 34, kInGap = 3, kGroupGap = 44;

// The linear y scale of the plot area: value to y.
struct YScale {
  double top, bottom, ymax;
  double operator()(double v) const { return bottom - (bottom - top) * std::clamp(v, 0.0, ymax) / ymax; }
};

// One bar at x = bx (with its whisker and value label), or the upright text of an absent one.
void draw_bar(std::string& s, const Bar& bar, const char* colour, double bx, const YScale& ypos) {
  const double bottom = ypos.bottom;
  if (!bar.absent.empty()) {  // upright text from the axis up, where the bar would be
    const double tx = bx + kBarW / 2 + 4, ty = bottom - 6;
    s += "<text class=\"absent\" x=\"" + num(tx) + "\" y=\"" + num(ty) +
         "\" font-size=\"10\" fill=\"#555555\" transform=\"rotate(-90 " + num(tx) + " " + num(ty) + ")\">" +
         escape(bar.absent) + "<title>" + escape(bar.label + " (" + bar.series + "): " + bar.absent) +
         "</title></text>\n";
    return;
  }
  const double by = ypos(bar.value);
  s += "<rect class=\"bar\" x=\"" + num(bx) + "\" y=\"" + num(by) + "\" width=\"" + num(kBarW) +
       "\" height=\"" + num(bottom - by) + "\" fill=\"" + colour + "\"><title>" +
       escape(bar.label + " (" + bar.series + "): " + value_label(bar.value) + " MB/s") + "</title></rect>\n";
  double label_top = by;
  if (bar.hi > 0 || bar.lo > 0) {
    const double cx = bx + kBarW / 2, ylo = ypos(bar.lo), yhi = ypos(bar.hi);
    s += "<g class=\"whisker\" stroke=\"#222222\" stroke-width=\"1.5\">";
    s += "<line x1=\"" + num(cx) + "\" y1=\"" + num(ylo) + "\" x2=\"" + num(cx) + "\" y2=\"" + num(yhi) +
         "\"/>";
    s += "<line x1=\"" + num(cx - 6) + "\" y1=\"" + num(ylo) + "\" x2=\"" + num(cx + 6) + "\" y2=\"" +
         num(ylo) + "\"/>";
    s += "<line x1=\"" + num(cx - 6) + "\" y1=\"" + num(yhi) + "\" x2=\"" + num(cx + 6) + "\" y2=\"" +
         num(yhi) + "\"/></g>\n";
    label_top = std::min(label_top, yhi);
  }
  s += text(bx + kBarW / 2, label_top - 5, value_label(bar.value) + (bar.contended ? "*" : ""),
            std::string("class=\"value") + (bar.contended ? " contended" : "") +
                "\" font-size=\"10\" fill=\"#222222\" text-anchor=\"middle\"");
}

// Under a group of width gw at x: its label, the bars' notes joined, and its note lines.
void draw_group_labels(std::string& s, const std::vector<Bar>& bars, std::pair<size_t, size_t> group,
                       double x, double gw, double bottom, const std::vector<std::string>& lines) {
  const auto [a, b] = group;
  s += text(x + gw / 2, bottom + 16, bars[a].label,
            "class=\"xlabel\" font-size=\"12\" fill=\"#222222\" text-anchor=\"middle\"");
  std::string notes;
  for (size_t i = a; i < b; ++i)
    if (!bars[i].note.empty()) notes += (notes.empty() ? "" : " / ") + bars[i].note;
  if (!notes.empty())
    s += text(x + gw / 2, bottom + 30, notes,
              "class=\"note\" font-size=\"10\" fill=\"#555555\" text-anchor=\"middle\"");
  for (size_t k = 0; k < lines.size(); ++k)
    s += text(x + gw / 2, bottom + 43 + 13 * double(k), lines[k],
              "class=\"note\" font-size=\"10\" font-weight=\"bold\" fill=\"#333333\" text-anchor=\"middle\"");
}

}  // namespace

std::string bar_chart(const BarChart& c) {
  // Series in order of first appearance: one colour and one legend entry each.
  std::vector<std::string> series;
  for (const auto& b : c.bars)
    if (std::find(series.begin(), series.end(), b.series) == series.end()) series.push_back(b.series);

  constexpr double kLeft = 90, kRight = 30;
  const Groups groups = bar_groups(c.bars);
  double plot_w = kGroupGap;
  for (const auto& [a, b] : groups) plot_w += double(b - a) * kBarW + double(b - a - 1) * kInGap + kGroupGap;
  const double w = std::max(720.0, kLeft + plot_w + kRight);
  const double x0 = kLeft, x1 = w - kRight;
  const auto group_lines = group_note_lines(c.bars, groups);
  size_t max_lines = 1;
  for (const auto& lines : group_lines) max_lines = std::max(max_lines, lines.size());
  const double extra_lines = 13.0 * double(max_lines - 1);
  std::vector<LegendItem> items = legend_items(c, series);
  layout_legend(items, w);
  const double legend_rows_h = 18.0 * double(items.empty() ? 0 : (items.back().y - 70) / 18 + 1);
  const double top = 82 + legend_rows_h, bottom = top + 300, h = bottom + 90 + extra_lines;
  // Spread the groups over the plot width when the minimum width left space.
  const double extra = groups.empty() ? 0 : ((x1 - x0) - plot_w) / double(groups.size() + 1);
  const double gap = kGroupGap + extra;

  double data_max = 0;
  for (const auto& b : c.bars)
    if (b.absent.empty()) data_max = std::max({data_max, b.value, b.hi});

  std::string s = header(w, h);
  titles(s, w, c.title, c.subtitle);
  const YScale ypos{top, bottom, y_axis(s, x0, x1, top, bottom, data_max, c.y_label)};
  draw_legend(s, items);
  double x = x0 + gap;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [a, b] = groups[g];
    const double gw = double(b - a) * kBarW + double(b - a - 1) * kInGap;
    for (size_t i = a; i < b; ++i) {
      const size_t si = size_t(std::find(series.begin(), series.end(), c.bars[i].series) - series.begin());
      draw_bar(s, c.bars[i], kPalette[si % kPaletteN], x + double(i - a) * (kBarW + kInGap), ypos);
    }
    draw_group_labels(s, c.bars, groups[g], x, gw, bottom, group_lines[g]);
    x += gw + gap;
  }
  if (!c.x_label.empty())
    s += text((x0 + x1) / 2, bottom + 66 + extra_lines, c.x_label,
              "class=\"xtitle\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"");
  s += "</svg>\n";
  return s;
}

namespace {

// The x axis of a line chart: every distinct x of the data (x > 0 on a log2 axis), and the scale.
struct XScale {
  bool log2 = true;
  double x0 = 0, x1 = 0, lo = 0, span = 1;
  std::set<double> xs;
  double data_max = 0;  // the largest y among the points drawn
  double t(double v) const { return log2 ? std::log2(v) : v; }
  double operator()(double v) const { return x0 + 20 + (x1 - x0 - 40) * (t(v) - lo) / span; }
};

XScale x_scale(const LineChart& c, double x0, double x1) {
  XScale xs;
  xs.log2 = c.log2_x;
  xs.x0 = x0;
  xs.x1 = x1;
  double xmin = 0, xmax = 0;
  bool first = true;
  for (const auto& se : c.series)
    for (const auto& [px, py] : se.points) {
      if (c.log2_x && !(px > 0)) continue;
      xs.data_max = std::max(xs.data_max, py);
      xs.xs.insert(px);
      if (first || px < xmin) xmin = px;
      if (first || px > xmax) xmax = px;
      first = false;
    }
  xs.lo = first ? 0 : xs.t(xmin);
  const double hi = first ? 1 : xs.t(xmax);
  xs.span = hi > xs.lo ? hi - xs.lo : 1;
  return xs;
}

// The y scale of a line chart, linear or log10.
struct LineY {
  bool log10 = false;
  double top = 0, bottom = 0, ymax = 0, dec_lo = 0, dec_hi = 1;
  double operator()(double v) const {
    if (log10) {
      const double l = v > 0 ? std::clamp(std::log10(v), dec_lo, dec_hi) : dec_lo;
      return bottom - (bottom - top) * (l - dec_lo) / (dec_hi - dec_lo);
    }
    return bottom - (bottom - top) * std::clamp(v, 0.0, ymax) / ymax;
  }
};

// Draws the y axis (grid, ticks, label) and returns its scale.
LineY line_y_axis(std::string& s, const LineChart& c, double x0, double x1, double top, double bottom,
                  double data_max) {
  LineY y;
  y.log10 = c.log10_y;
  y.top = top;
  y.bottom = bottom;
  double data_min = 0;
  for (const auto& se : c.series)
    for (const auto& [px, py] : se.points)
      if (py > 0 && (data_min == 0 || py < data_min)) data_min = py;
  if (c.log10_y) {
    y.dec_lo = data_min > 0 ? std::floor(std::log10(data_min)) : 0;
    y.dec_hi = data_max > 0 ? std::ceil(std::log10(data_max)) : y.dec_lo + 1;
    if (y.dec_hi <= y.dec_lo) y.dec_hi = y.dec_lo + 1;
    y.ymax = std::pow(10.0, y.dec_hi);
    log_y_axis(s, x0, x1, top, bottom, y.dec_lo, y.dec_hi, c.y_label);
  } else {
    y.ymax = y_axis(s, x0, x1, top, bottom, data_max, c.y_label);
  }
  return y;
}

// x ticks at each distinct x of the data, and the x-axis title.
void draw_x_ticks(std::string& s, const LineChart& c, const XScale& xpos, double bottom) {
  s += "<g class=\"xticks\" font-size=\"11\" fill=\"#333333\" text-anchor=\"middle\">\n";
  for (double v : xpos.xs) {
    const double px = xpos(v);
    s += "<line x1=\"" + num(px) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(px) + "\" y2=\"" +
         num(bottom + 5) + "\" stroke=\"#333333\"/>\n";
    s += text(px, bottom + 18, c.log2_x ? bytes_label(v) : value_label(v), "");
  }
  s += "</g>\n";
  if (!c.x_label.empty())
    s += text((xpos.x0 + xpos.x1) / 2, bottom + 42, c.x_label,
              "class=\"xtitle\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"");
}

// One polyline and its point markers per series.
void draw_series(std::string& s, const LineChart& c, const std::vector<Look>& look, const XScale& xpos,
                 const LineY& ypos) {
  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& se = c.series[i];
    std::string pts;
    for (const auto& [px, py] : se.points) {
      if (c.log2_x && !(px > 0)) continue;
      if (!pts.empty()) pts += ' ';
      pts += num(xpos(px)) + "," + num(ypos(py));
    }
    s += "<polyline class=\"line\" fill=\"none\" stroke=\"" + std::string(look[i].colour) +
         "\" stroke-width=\"2\"";
    if (*look[i].dash) s += " stroke-dasharray=\"" + std::string(look[i].dash) + "\"";
    s += " points=\"" + pts + "\"><title>" + escape(se.label) + "</title></polyline>\n";
    for (const auto& [px, py] : se.points) {
      if (c.log2_x && !(px > 0)) continue;
      s += "<circle cx=\"" + num(xpos(px)) + "\" cy=\"" + num(ypos(py)) + "\" r=\"2.5\" fill=\"" +
           look[i].colour + "\"/>\n";
    }
  }
}

// Legend to the right of the plot, as wide and as tall as its labels need.
void draw_line_legend(std::string& s, const LineChart& c, const std::vector<Look>& look, double x1,
                      double ly0, double lstep) {
  s += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
  for (size_t i = 0; i < c.series.size(); ++i) {
    const double ly = ly0 + lstep * double(i);
    s += "<line class=\"key\" x1=\"" + num(x1 + 24) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(x1 + 54) +
         "\" y2=\"" + num(ly) + "\" stroke=\"" + look[i].colour + "\" stroke-width=\"2.5\"";
    if (*look[i].dash) s += " stroke-dasharray=\"" + std::string(look[i].dash) + "\"";
    s += "/>\n";
    s += text(x1 + 60, ly + 4, c.series[i].label, "");
  }
  s += "</g>\n";
}

}  // namespace

std::string line_chart(const LineChart& c) {
  double legend_w = 0;
  for (const auto& se : c.series) legend_w = std::max(legend_w, text_width(se.label));
  const double x0 = 90, x1 = 700, top = 70, bottom = 570, lstep = 18;
  const double w = std::max(1000.0, x1 + 60 + legend_w + 24);
  const double h = std::max(650.0, top + 6 + lstep * double(c.series.size()) + 24);
  const XScale xpos = x_scale(c, x0, x1);

  std::string s = header(w, h);
  titles(s, w, c.title, c.subtitle);
  const LineY ypos = line_y_axis(s, c, x0, x1, top, bottom, xpos.data_max);
  draw_x_ticks(s, c, xpos, bottom);
  const std::vector<Look> look = looks(c.series);
  draw_series(s, c, look, xpos, ypos);
  draw_line_legend(s, c, look, x1, top + 6, lstep);
  s += "</svg>\n";
  return s;
}

bool write_file(const std::filesystem::path& p, const std::string& doc, std::string& why) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f) {
    why = p.string() + ": " + std::strerror(errno);
    return false;
  }
  f << doc;
  f.flush();
  if (!f) {
    why = p.string() + ": write failed";
    return false;
  }
  return true;
}

}  // namespace aesxfer::app::svg
