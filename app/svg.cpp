// SVG charts, written by hand. See app/svg.h.
#include "app/svg.h"

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
constexpr const char* kDashes[] = {"", "6 3", "2 3", "8 3 2 3"};
constexpr const char* kFont = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

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
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(w) + "\" height=\"" + num(h) +
       "\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\" " + kFont + ">\n";
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
    s += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y) + "\"/>\n";
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
  s += "<text class=\"ylabel\" x=\"" + num(x0 - 58) + "\" y=\"" + num(cy) + "\" font-size=\"13\" fill=\"#222222\" " +
       "text-anchor=\"middle\" transform=\"rotate(-90 " + num(x0 - 58) + " " + num(cy) + ")\">" + escape(y_label) +
       "</text>\n";
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
      s += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y) + "\"/>\n";
    }
  s += "</g>\n<g class=\"grid\" stroke=\"#d8d8d8\" stroke-width=\"1\">\n";
  for (double d = dec_lo; d <= dec_hi + 0.5; d += 1) {
    const double y = ypos(d);
    s += "<line x1=\"" + num(x0) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x1) + "\" y2=\"" + num(y) + "\"/>\n";
  }
  s += "</g>\n<g class=\"yticks\" font-size=\"11\" fill=\"#333333\" text-anchor=\"end\">\n";
  for (double d = dec_lo; d <= dec_hi + 0.5; d += 1) {
    char b[32];
    std::snprintf(b, sizeof b, d >= 0 ? "%.0f" : "%g", std::pow(10.0, d));
    s += text(x0 - 6, ypos(d) + 4, b, "");
  }
  s += "</g>\n";
  const double cy = (top + bottom) / 2;
  s += "<text class=\"ylabel\" x=\"" + num(x0 - 58) + "\" y=\"" + num(cy) + "\" font-size=\"13\" fill=\"#222222\" " +
       "text-anchor=\"middle\" transform=\"rotate(-90 " + num(x0 - 58) + " " + num(cy) + ")\">" + escape(y_label) +
       "</text>\n";
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
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
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
  const double legend_y = 70, top = 100, bottom = 400, h = 490 + extra_lines;
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

  // Legend: one swatch per series, then the whisker.
  {
    std::vector<std::string> items;
    double total = 0;
    for (const auto& sname : series) total += 22 + 7.0 * double(sname.size()) + 24;
    if (!c.whisker_legend.empty()) total += 22 + 7.0 * double(c.whisker_legend.size());
    double x = std::max(10.0, (w - total) / 2);
    s += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
    for (size_t i = 0; i < series.size(); ++i) {
      s += "<rect class=\"swatch\" x=\"" + num(x) + "\" y=\"" + num(legend_y - 10) +
           "\" width=\"14\" height=\"12\" fill=\"" + kPalette[i % kPaletteN] + "\"/>\n";
      s += text(x + 20, legend_y, series[i], "");
      x += 22 + 7.0 * double(series[i].size()) + 24;
    }
    if (!c.whisker_legend.empty()) {
      s += "<line x1=\"" + num(x + 7) + "\" y1=\"" + num(legend_y - 12) + "\" x2=\"" + num(x + 7) + "\" y2=\"" +
           num(legend_y + 3) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
      s += "<line x1=\"" + num(x + 3) + "\" y1=\"" + num(legend_y - 12) + "\" x2=\"" + num(x + 11) + "\" y2=\"" +
           num(legend_y - 12) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
      s += "<line x1=\"" + num(x + 3) + "\" y1=\"" + num(legend_y + 3) + "\" x2=\"" + num(x + 11) + "\" y2=\"" +
           num(legend_y + 3) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
      s += text(x + 20, legend_y, c.whisker_legend, "");
    }
    s += "</g>\n";
  }

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
           escape(bar.label + " (" + bar.series + "): " + value_label(bar.value) + " MB/s") + "</title></rect>\n";
      double label_top = by;
      if (bar.hi > 0 || bar.lo > 0) {
        const double cx = bx + kBarW / 2, ylo = ypos(bar.lo), yhi = ypos(bar.hi);
        s += "<g class=\"whisker\" stroke=\"#222222\" stroke-width=\"1.5\">";
        s += "<line x1=\"" + num(cx) + "\" y1=\"" + num(ylo) + "\" x2=\"" + num(cx) + "\" y2=\"" + num(yhi) + "\"/>";
        s += "<line x1=\"" + num(cx - 6) + "\" y1=\"" + num(ylo) + "\" x2=\"" + num(cx + 6) + "\" y2=\"" + num(ylo) +
             "\"/>";
        s += "<line x1=\"" + num(cx - 6) + "\" y1=\"" + num(yhi) + "\" x2=\"" + num(cx + 6) + "\" y2=\"" + num(yhi) +
             "\"/></g>\n";
        label_top = std::min(label_top, yhi);
      }
      s += text(bx + kBarW / 2, label_top - 5, value_label(bar.value),
                "class=\"value\" font-size=\"10\" fill=\"#222222\" text-anchor=\"middle\"");
    }
    s += text(x + gw / 2, bottom + 16, c.bars[a].label,
              "class=\"xlabel\" font-size=\"12\" fill=\"#222222\" text-anchor=\"middle\"");
    std::string notes;
    for (size_t i = a; i < b; ++i)
      if (!c.bars[i].note.empty()) notes += (notes.empty() ? "" : " / ") + c.bars[i].note;
    if (!notes.empty())
      s += text(x + gw / 2, bottom + 30, notes, "class=\"note\" font-size=\"10\" fill=\"#555555\" text-anchor=\"middle\"");
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
  const double w = 1000, h = 650, x0 = 90, x1 = 700, top = 70, bottom = 570;
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
    s += "<line x1=\"" + num(px) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(px) + "\" y2=\"" + num(bottom + 5) +
         "\" stroke=\"#333333\"/>\n";
    s += text(px, bottom + 18, c.log2_x ? bytes_label(v) : value_label(v), "");
  }
  s += "</g>\n";
  if (!c.x_label.empty())
    s += text((x0 + x1) / 2, bottom + 42, c.x_label,
              "class=\"xtitle\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"");

  for (size_t i = 0; i < c.series.size(); ++i) {
    const auto& se = c.series[i];
    const char* colour = kPalette[i % kPaletteN];
    const char* dash = kDashes[(i / kPaletteN) % 4];
    std::string pts;
    for (const auto& [px, py] : se.points) {
      if (c.log2_x && !(px > 0)) continue;
      if (!pts.empty()) pts += ' ';
      pts += num(xpos(px)) + "," + num(ypos(py));
    }
    s += "<polyline class=\"line\" fill=\"none\" stroke=\"" + std::string(colour) + "\" stroke-width=\"2\"";
    if (*dash) s += " stroke-dasharray=\"" + std::string(dash) + "\"";
    s += " points=\"" + pts + "\"><title>" + escape(se.label) + "</title></polyline>\n";
    for (const auto& [px, py] : se.points) {
      if (c.log2_x && !(px > 0)) continue;
      s += "<circle cx=\"" + num(xpos(px)) + "\" cy=\"" + num(ypos(py)) + "\" r=\"2.5\" fill=\"" + colour + "\"/>\n";
    }
  }

  // Legend to the right of the plot.
  s += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
  const double ly0 = top + 6, lstep = std::min(22.0, (bottom - top) / std::max<double>(1, double(c.series.size())));
  for (size_t i = 0; i < c.series.size(); ++i) {
    const double ly = ly0 + lstep * double(i);
    const char* dash = kDashes[(i / kPaletteN) % 4];
    s += "<line x1=\"" + num(x1 + 24) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(x1 + 54) + "\" y2=\"" + num(ly) +
         "\" stroke=\"" + kPalette[i % kPaletteN] + "\" stroke-width=\"2.5\"";
    if (*dash) s += " stroke-dasharray=\"" + std::string(dash) + "\"";
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
