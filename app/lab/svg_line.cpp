// Line charts, written by hand: one plot with a legend at its right, or small multiples (one panel
// per Series::panel, on shared axes) under a key of the marks. See app/lab/svg.h.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "app/lab/svg.h"
#include "app/lab/svg_draw.h"

namespace aesxfer::app::svg {
namespace {

using namespace draw;  // NOLINT(google-build-using-namespace): the charts' shared helpers

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

// The y scale of a line chart, linear or log10, over the data of every series (panels share it).
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

// Draws the y axis (grid, ticks, label when y_label is not empty) and returns its scale.
LineY line_y_axis(std::string& s, const LineChart& c, double x0, double x1, double top, double bottom,
                  double data_max, const std::string& y_label) {
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
    log_y_axis(s, x0, x1, top, bottom, y.dec_lo, y.dec_hi, y_label);
  } else {
    y.ymax = y_axis(s, x0, x1, top, bottom, data_max, y_label);
  }
  return y;
}

// x ticks at each distinct x of the data, and the x-axis title when x_label is not empty.
void draw_x_ticks(std::string& s, const LineChart& c, const XScale& xpos, double bottom,
                  const std::string& x_label) {
  s += "<g class=\"xticks\" font-size=\"11\" fill=\"#333333\" text-anchor=\"middle\">\n";
  double last_end = -1e9;  // right end of the last label drawn: a label that would touch it is left out
  for (double v : xpos.xs) {
    const double px = xpos(v);
    s += "<line x1=\"" + num(px) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(px) + "\" y2=\"" +
         num(bottom + 5) + "\" stroke=\"#333333\"/>\n";
    const std::string label = c.log2_x ? bytes_label(v) : value_label(v);
    const double half = text_width(label, 11) / 2;
    if (px - half < last_end + 4) continue;
    s += text(px, bottom + 18, label, "");
    last_end = px + half;
  }
  s += "</g>\n";
  if (!x_label.empty())
    s += text((xpos.x0 + xpos.x1) / 2, bottom + 42, x_label,
              "class=\"xtitle\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"");
}

// A marker of the operation at (x, y).
std::string marker(Marker m, double x, double y, const std::string& colour) {
  const std::string fill = "\" fill=\"" + colour + "\"/>\n";
  switch (m) {
    case Marker::square:
      return "<rect class=\"marker\" x=\"" + num(x - 3) + "\" y=\"" + num(y - 3) +
             "\" width=\"6\" height=\"6" + fill;
    case Marker::triangle:
      return "<polygon class=\"marker\" points=\"" + num(x) + "," + num(y - 4) + " " + num(x + 4) + "," +
             num(y + 3) + " " + num(x - 4) + "," + num(y + 3) + fill;
    case Marker::diamond:
      return "<polygon class=\"marker\" points=\"" + num(x) + "," + num(y - 4.5) + " " + num(x + 4) + "," +
             num(y) + " " + num(x) + "," + num(y + 4.5) + " " + num(x - 4) + "," + num(y) + fill;
    case Marker::circle:
      break;
  }
  return "<circle class=\"marker\" cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"3" + fill;
}

const std::string& family_of(const Series& se) { return se.family.empty() ? se.label : se.family; }

// One polyline, its markers and its "*" marks per series of `idx`.
void draw_series(std::string& s, const LineChart& c, const std::vector<size_t>& idx, const XScale& xpos,
                 const LineY& ypos) {
  for (size_t i : idx) {
    const auto& se = c.series[i];
    const std::string colour = family_colour(family_of(se));
    std::string pts, marks;
    for (size_t k = 0; k < se.points.size(); ++k) {
      const auto [px, py] = se.points[k];
      if (c.log2_x && !(px > 0)) continue;
      if (!pts.empty()) pts += ' ';
      pts += num(xpos(px)) + "," + num(ypos(py));
      marks += marker(se.marker, xpos(px), ypos(py), colour);
      if (k < se.marks.size() && !se.marks[k].empty())
        marks += text(xpos(px) + 4, ypos(py) - 4, se.marks[k],
                      "class=\"mark\" font-size=\"13\" font-weight=\"bold\" fill=\"#111111\"");
    }
    s += "<polyline class=\"line\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2\"";
    if (se.portable) s += " stroke-dasharray=\"" + std::string(kPortableDash) + "\"";
    s += " data-family=\"" + escape(family_of(se)) + "\"" + (se.portable ? " data-portable=\"1\"" : "");
    s += " points=\"" + pts + "\"><title>" + escape(se.label) + "</title></polyline>\n" + marks;
  }
}

// The lines of c.mark_legend whose mark some point carries.
std::vector<std::string> marks_used(const LineChart& c) {
  std::vector<std::string> out;
  for (const auto& line : c.mark_legend) {
    if (line.empty()) continue;
    bool used = false;
    for (const auto& se : c.series)
      for (size_t k = 0; k < se.marks.size() && k < se.points.size(); ++k)
        used = used || se.marks[k].find(line[0]) != std::string::npos;
    if (used) out.push_back(line);
  }
  return out;
}

// One plot, the legend to its right (per series its line, marker and label), the "*" and "+"
// notes under the plot: long sentences beside the legend would widen the canvas and shrink it all.
std::string single_plot(const LineChart& c) {
  const std::vector<std::string> notes = marks_used(c);
  double legend_w = 0;
  for (const auto& se : c.series) legend_w = std::max(legend_w, text_width(se.label) + 36);
  const double x0 = 90, x1 = 700, top = 70, bottom = 570, lstep = 18, notes_y = bottom + 66;
  const double w = std::max(1000.0, x1 + 24 + legend_w + 24);
  const double h = std::max({650.0, top + 6 + lstep * double(c.series.size() + 1) + 24,
                             notes_y + lstep * double(notes.size()) + 8});
  const XScale xpos = x_scale(c, x0, x1);
  std::string s = header(w, h);
  titles(s, w, c.title, c.subtitle);
  const LineY ypos = line_y_axis(s, c, x0, x1, top, bottom, xpos.data_max, c.y_label);
  draw_x_ticks(s, c, xpos, bottom, c.x_label);
  std::vector<size_t> all(c.series.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  draw_series(s, c, all, xpos, ypos);
  s += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
  double ly = top + 6;
  for (const auto& se : c.series) {
    s += key_line(x1 + 24, ly, family_of(se), se.portable);
    s += marker(se.marker, x1 + 39, ly, family_colour(family_of(se)));
    s += text(x1 + 60, ly + 4, se.label, "");
    ly += lstep;
  }
  s += "</g>\n";
  double ny = notes_y;
  for (const auto& n : notes) {
    s += text(x0, ny, n, "class=\"mark-note\" font-size=\"12\" fill=\"#222222\"");
    ny += lstep;
  }
  return s;
}

// The key above the panels: each operation's marker, the dash of portable code, the "*" mark.
// Returns the height it took.
double panel_key(std::string& s, const LineChart& c, double w, double y) {
  std::vector<std::pair<Marker, std::string>> ops;  // per marker, the operations it stands for
  bool portable = false;
  for (const auto& se : c.series) {
    portable = portable || se.portable;
    if (se.op.empty()) continue;
    auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == se.marker; });
    if (it == ops.end())
      ops.emplace_back(se.marker, se.op);
    else if ((", " + it->second + ",").find(", " + se.op + ",") == std::string::npos)
      it->second += ", " + se.op;
  }
  double x = 20;
  s += "<g class=\"legend\" font-size=\"12\" fill=\"#222222\">\n";
  auto room = [&](double iw) {
    if (x + iw > w - 20) {
      x = 20;
      y += 18;
    }
  };
  for (const auto& [m, op] : ops) {
    const double iw = 18 + text_width(op) + 20;
    room(iw);
    s += marker(m, x + 5, y - 4, "#333333") + text(x + 14, y, op, "");
    x += iw;
  }
  if (portable) {
    const std::string t = "dashed: portable code (AES without AES-NI)";
    room(40 + text_width(t) + 20);
    s += "<line class=\"key\" x1=\"" + num(x) + "\" y1=\"" + num(y - 4) + "\" x2=\"" + num(x + 30) +
         "\" y2=\"" + num(y - 4) + "\" stroke=\"#333333\" stroke-width=\"2.5\" stroke-dasharray=\"" +
         kPortableDash + "\"/>\n";
    s += text(x + 36, y, t, "");
    x += 40 + text_width(t) + 20;
  }
  for (const auto& n : marks_used(c)) {
    room(text_width(n) + 20);
    s += text(x, y, n, "class=\"mark-note\"");
    x += text_width(n) + 20;
  }
  s += "</g>\n";
  return y;
}

// Small multiples: one panel per Series::panel (in order of first appearance), three to a row, on
// shared axes, each titled in its first series' family colour.
std::string panels(const LineChart& c) {
  std::vector<std::string> names;
  for (const auto& se : c.series)
    if (std::find(names.begin(), names.end(), se.panel) == names.end()) names.push_back(se.panel);
  const size_t cols = std::min<size_t>(3, names.size()), rows = (names.size() + cols - 1) / cols;
  constexpr double kPlotW = 300, kPlotH = 190, kCellW = kPlotW + 90, kCellH = kPlotH + 80, kLeft = 80;
  const double w = std::max(900.0, kLeft + double(cols) * kCellW + 10);
  std::string body;
  const double key_end = panel_key(body, c, w, 70);
  const double top0 = key_end + 30, h = top0 + double(rows) * kCellH + 40;
  std::string s = header(w, h);
  titles(s, w, c.title, c.subtitle);
  s += body;
  const XScale all = x_scale(c, 0, 1);
  for (size_t p = 0; p < names.size(); ++p) {
    const double x0 = kLeft + double(p % cols) * kCellW, x1 = x0 + kPlotW;
    const double top = top0 + double(p / cols) * kCellH + 24, bottom = top + kPlotH;
    std::vector<size_t> idx;
    for (size_t i = 0; i < c.series.size(); ++i)
      if (c.series[i].panel == names[p]) idx.push_back(i);
    XScale xpos = all;
    xpos.x0 = x0;
    xpos.x1 = x1;
    s += "<g class=\"panel\">\n";
    s += text((x0 + x1) / 2, top - 8, names[p],
              "class=\"panel-title\" font-size=\"13\" font-weight=\"bold\" fill=\"" +
                  std::string(family_colour(family_of(c.series[idx[0]]))) + "\" text-anchor=\"middle\"");
    const LineY ypos = line_y_axis(s, c, x0, x1, top, bottom, all.data_max, p % cols == 0 ? c.y_label : "");
    draw_x_ticks(s, c, xpos, bottom, "");
    draw_series(s, c, idx, xpos, ypos);
    s += "</g>\n";
  }
  if (!c.x_label.empty())
    s += text(w / 2, h - 14, c.x_label,
              "class=\"xtitle\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"");
  return s;
}

}  // namespace

std::string line_chart(const LineChart& c) {
  const bool paneled =
      std::any_of(c.series.begin(), c.series.end(), [](const Series& se) { return !se.panel.empty(); });
  std::string s = paneled ? panels(c) : single_plot(c);
  s += "</svg>\n";
  return s;
}

}  // namespace aesxfer::app::svg
