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

std::string bar_chart(const BarChart& c) {
  // Series in order of first appearance: one colour and one legend entry each.
  std::vector<std::string> series;
  for (const auto& b : c.bars)
    if (std::find(series.begin(), series.end(), b.series) == series.end()) series.push_back(b.series);

  // Groups: runs of adjacent bars with the same label.
  constexpr double kBarW = 34, kInGap = 3, kGroupGap = 44, kLeft = 90, kRight = 30;
  std::vector<std::pair<size_t, size_t>> groups;  // [first, last)
  for (size_t i = 0; i < c.bars.size();) {
    size_t j = i + 1;
    while (j < c.bars.size() && c.bars[j].label == c.bars[i].label) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  double plot_w = kGroupGap;
  for (const auto& [a, b] : groups) plot_w += double(b - a) * kBarW + double(b - a - 1) * kInGap + kGroupGap;
  const double w = std::max(720.0, kLeft + plot_w + kRight);
  const double x0 = kLeft, x1 = w - kRight;
  // Lines under the groups: the distinct group notes of each group.
  std::vector<std::vector<std::string>> group_lines;
  size_t max_lines = 1;
  for (const auto& [a, b] : groups) {
    std::vector<std::string> lines;
    for (size_t i = a; i < b; ++i)
      if (!c.bars[i].group_note.empty() &&
          std::find(lines.begin(), lines.end(), c.bars[i].group_note) == lines.end())
        lines.push_back(c.bars[i].group_note);
    max_lines = std::max(max_lines, lines.size());
    group_lines.push_back(std::move(lines));
  }
  const double extra_lines = 13.0 * double(max_lines - 1);
  // Legend items (swatches, the whisker, the contended marker), wrapped into rows that fit.
  bool any_contended = false;
  for (const auto& b : c.bars) any_contended = any_contended || (b.contended && b.absent.empty());
  const std::string contended_text = "* CPU contended: other processes had the cores (see the verdicts)";
  struct Item {
    int kind;  // 0 swatch (series index in `idx`), 1 whisker, 2 contended marker
    size_t idx;
    std::string label;
    double x = 0, y = 0;
  };
  std::vector<Item> items;
  for (size_t i = 0; i < series.size(); ++i) items.push_back({0, i, series[i]});
  if (!c.whisker_legend.empty()) items.push_back({1, 0, c.whisker_legend});
  if (any_contended) items.push_back({2, 0, contended_text});
  {
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
  const double ymax = y_axis(s, x0, x1, top, bottom, data_max, c.y_label);
  auto ypos = [&](double v) { return bottom - (bottom - top) * std::clamp(v, 0.0, ymax) / ymax; };

  // Legend: one swatch per series, the whisker, the contended marker (laid out above).
  s += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
  for (const Item& it : items) {
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

  double x = x0 + gap;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [a, b] = groups[g];
    const double gw = double(b - a) * kBarW + double(b - a - 1) * kInGap;
    for (size_t i = a; i < b; ++i) {
      const Bar& bar = c.bars[i];
      const size_t si = size_t(std::find(series.begin(), series.end(), bar.series) - series.begin());
      const double bx = x + double(i - a) * (kBarW + kInGap);
      if (!bar.absent.empty()) {  // upright text from the axis up, where the bar would be
        const double tx = bx + kBarW / 2 + 4, ty = bottom - 6;
        s += "<text class=\"absent\" x=\"" + num(tx) + "\" y=\"" + num(ty) +
             "\" font-size=\"10\" fill=\"#555555\" transform=\"rotate(-90 " + num(tx) + " " + num(ty) +
             ")\">" + escape(bar.absent) + "<title>" +
             escape(bar.label + " (" + bar.series + "): " + bar.absent) + "</title></text>\n";
        continue;
      }
      const double by = ypos(bar.value);
      s += "<rect class=\"bar\" x=\"" + num(bx) + "\" y=\"" + num(by) + "\" width=\"" + num(kBarW) +
           "\" height=\"" + num(bottom - by) + "\" fill=\"" + kPalette[si % kPaletteN] + "\"><title>" +
           escape(bar.label + " (" + bar.series + "): " + value_label(bar.value) + " MB/s") +
           "</title></rect>\n";
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
    s += text(x + gw / 2, bottom + 16, c.bars[a].label,
              "class=\"xlabel\" font-size=\"12\" fill=\"#222222\" text-anchor=\"middle\"");
    std::string notes;
    for (size_t i = a; i < b; ++i)
      if (!c.bars[i].note.empty()) notes += (notes.empty() ? "" : " / ") + c.bars[i].note;
    if (!notes.empty())
      s += text(x + gw / 2, bottom + 30, notes,
                "class=\"note\" font-size=\"10\" fill=\"#555555\" text-anchor=\"middle\"");
    const auto& lines = group_lines[g];
    for (size_t k = 0; k < lines.size(); ++k)
      s += text(
          x + gw / 2, bottom + 43 + 13 * double(k), lines[k],
          "class=\"note\" font-size=\"10\" font-weight=\"bold\" fill=\"#333333\" text-anchor=\"middle\"");
    x += gw + gap;
  }
  if (!c.x_label.empty())
    s += text((x0 + x1) / 2, bottom + 66 + extra_lines, c.x_label,
              "class=\"xtitle\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"");
  s += "</svg>\n";
  return s;
}

std::string line_chart(const LineChart& c) {
  double legend_w = 0;
  for (const auto& se : c.series) legend_w = std::max(legend_w, text_width(se.label));
  const double x0 = 90, x1 = 700, top = 70, bottom = 570, lstep = 18;
  const double w = std::max(1000.0, x1 + 60 + legend_w + 24);
  const double h = std::max(650.0, top + 6 + lstep * double(c.series.size()) + 24);
  double data_max = 0, xmin = 0, xmax = 0;
  std::set<double> xs;
  bool first = true;
  for (const auto& se : c.series)
    for (const auto& [px, py] : se.points) {
      if (c.log2_x && !(px > 0)) continue;
      data_max = std::max(data_max, py);
      xs.insert(px);
      if (first || px < xmin) xmin = px;
      if (first || px > xmax) xmax = px;
      first = false;
    }
  auto tx = [&](double v) { return c.log2_x ? std::log2(v) : v; };
  const double lo = first ? 0 : tx(xmin), hi = first ? 1 : tx(xmax);
  const double span = hi > lo ? hi - lo : 1;
  auto xpos = [&](double v) { return x0 + 20 + (x1 - x0 - 40) * (tx(v) - lo) / span; };

  std::string s = header(w, h);
  titles(s, w, c.title, c.subtitle);
  double data_min = 0;
  for (const auto& se : c.series)
    for (const auto& [px, py] : se.points)
      if (py > 0 && (data_min == 0 || py < data_min)) data_min = py;
  double ymax = 0, dec_lo = 0, dec_hi = 1;
  if (c.log10_y) {
    dec_lo = data_min > 0 ? std::floor(std::log10(data_min)) : 0;
    dec_hi = data_max > 0 ? std::ceil(std::log10(data_max)) : dec_lo + 1;
    if (dec_hi <= dec_lo) dec_hi = dec_lo + 1;
    ymax = std::pow(10.0, dec_hi);
    log_y_axis(s, x0, x1, top, bottom, dec_lo, dec_hi, c.y_label);
  } else {
    ymax = y_axis(s, x0, x1, top, bottom, data_max, c.y_label);
  }
  auto ypos = [&](double v) {
    if (c.log10_y) {
      const double l = v > 0 ? std::clamp(std::log10(v), dec_lo, dec_hi) : dec_lo;
      return bottom - (bottom - top) * (l - dec_lo) / (dec_hi - dec_lo);
    }
    return bottom - (bottom - top) * std::clamp(v, 0.0, ymax) / ymax;
  };

  // x ticks at each distinct x of the data.
  s += "<g class=\"xticks\" font-size=\"11\" fill=\"#333333\" text-anchor=\"middle\">\n";
  for (double v : xs) {
    const double px = xpos(v);
    s += "<line x1=\"" + num(px) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(px) + "\" y2=\"" +
         num(bottom + 5) + "\" stroke=\"#333333\"/>\n";
    s += text(px, bottom + 18, c.log2_x ? bytes_label(v) : value_label(v), "");
  }
  s += "</g>\n";
  if (!c.x_label.empty())
    s += text((x0 + x1) / 2, bottom + 42, c.x_label,
              "class=\"xtitle\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"");

  const std::vector<Look> look = looks(c.series);
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

  // Legend to the right of the plot, as wide and as tall as its labels need.
  s += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
  const double ly0 = top + 6;
  for (size_t i = 0; i < c.series.size(); ++i) {
    const double ly = ly0 + lstep * double(i);
    s += "<line class=\"key\" x1=\"" + num(x1 + 24) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(x1 + 54) +
         "\" y2=\"" + num(ly) + "\" stroke=\"" + look[i].colour + "\" stroke-width=\"2.5\"";
    if (*look[i].dash) s += " stroke-dasharray=\"" + std::string(look[i].dash) + "\"";
    s += "/>\n";
    s += text(x1 + 60, ly + 4, c.series[i].label, "");
  }
  s += "</g>\n</svg>\n";
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
