// SVG charts, written by hand. See app/lab/svg.h.
#include "app/lab/svg.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "app/lab/svg_draw.h"
#include "files/atomic_file.h"
#include "files/guarded_path.h"
#include "files/io.h"
#include "proto/failure.h"

namespace aesxfer::app::svg {
namespace {

// One colour per family (svg.h), colour-blind-friendly enough (Tableau 10); orange is scp's alone.
struct FamilyColour {
  const char* family;
  const char* colour;
};
constexpr FamilyColour kFamilies[] = {
    {"aes128-gcm", "#4e79a7"},   {"aes128-ctr", "#76b7b2"}, {"aes128-cbc", "#59a14f"},
    {"blowfish-cbc", "#9c755f"}, {"arcfour", "#e377c2"},    {"none", "#7f7f7f"},
    {"hmac-sha256", "#b07aa1"},  {"sha256", "#b8860b"},     {"xxh128", "#e15759"},
    {"scp", "#f28e2b"},
};
// A family the table does not know yet (a new cipher before its colour is chosen): one of these,
// by a hash of its name. None is in the table above.
constexpr const char* kSpare[] = {"#1f4e79", "#2d6a2d", "#8c1d1f", "#3b7f7a", "#7a5c00", "#5a3d7a"};

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

namespace draw {

double text_width(const std::string& t, double px) { return 0.62 * px * double(t.size()); }

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

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
// The y-axis label (none when empty) and the two axes.
static void axes_and_label(std::string& s, double x0, double x1, double top, double bottom,
                           const std::string& y_label) {
  const double cy = (top + bottom) / 2;
  if (!y_label.empty())
    s += "<text class=\"ylabel\" x=\"" + num(x0 - 58) + "\" y=\"" + num(cy) +
         "\" font-size=\"13\" fill=\"#222222\" " + "text-anchor=\"middle\" transform=\"rotate(-90 " +
         num(x0 - 58) + " " + num(cy) + ")\">" + escape(y_label) + "</text>\n";
  s += "<line class=\"axis\" x1=\"" + num(x0) + "\" y1=\"" + num(bottom) + "\" x2=\"" + num(x1) + "\" y2=\"" +
       num(bottom) + "\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
  s += "<line class=\"axis\" x1=\"" + num(x0) + "\" y1=\"" + num(top) + "\" x2=\"" + num(x0) + "\" y2=\"" +
       num(bottom) + "\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
}

static double nice_step(double max, int ticks) {
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
       num(h) + "\" viewBox=\"0 0 " + num(w) + " " + num(h) + "\" " + std::string(kFont) + ">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + num(w) + "\" height=\"" + num(h) + "\" fill=\"#ffffff\"/>\n";
  return s;
}

std::string text(double x, double y, const std::string& t, const std::string& attrs) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" " + attrs + ">" + escape(t) + "</text>\n";
}

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
  axes_and_label(s, x0, x1, top, bottom, y_label);
  return ymax;
}

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
  axes_and_label(s, x0, x1, top, bottom, y_label);
}

void titles(std::string& s, double w, const std::string& title, const std::string& subtitle) {
  s += "<text class=\"title\" x=\"" + num(w / 2) + "\" y=\"26\" font-size=\"17\" font-weight=\"bold\" " +
       "fill=\"#111111\" text-anchor=\"middle\">" + escape(title) + "</text>\n";
  if (!subtitle.empty())
    s += "<text class=\"subtitle\" x=\"" + num(w / 2) + "\" y=\"46\" font-size=\"12\" fill=\"#555555\" " +
         "text-anchor=\"middle\">" + escape(subtitle) + "</text>\n";
}

std::string key_line(double x, double y, const std::string& family, bool portable, double len) {
  std::string k = "<line class=\"key\" x1=\"" + num(x) + "\" y1=\"" + num(y) + "\" x2=\"" + num(x + len) +
                  "\" y2=\"" + num(y) + "\" stroke=\"" + family_colour(family) + "\" stroke-width=\"2.5\"";
  if (portable) k += " stroke-dasharray=\"" + std::string(kPortableDash) + "\"";
  return k + " data-family=\"" + escape(family) + "\"" + (portable ? " data-portable=\"1\"" : "") + "/>\n";
}

}  // namespace draw

using namespace draw;  // NOLINT(google-build-using-namespace): this file's own helpers

const char* family_colour(std::string_view family) {
  for (const auto& f : kFamilies)
    if (family == f.family) return f.colour;
  size_t h = 0;
  for (char ch : family) h = h * 31 + static_cast<unsigned char>(ch);
  return kSpare[h % (sizeof kSpare / sizeof kSpare[0])];
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
  enum Kind { swatch, whisker, mark } kind;
  std::string family;  // swatch: its colour ("" with portable: the dashed outline in grey)
  bool portable = false;
  std::string label;
  double x = 0, y = 0;
};

// The legend's items: a swatch per family, the dashed outline of portable code, the whisker, the
// marks.
std::vector<LegendItem> legend_items(const BarChart& c) {
  bool contended = false, setup = false, portable = false;
  std::vector<LegendItem> items;
  for (const auto& b : c.bars) {
    contended = contended || (b.contended && b.absent.empty());
    setup = setup || (b.setup && b.absent.empty());
    portable = portable || (b.portable && b.absent.empty());
    if (b.absent.empty() &&
        std::none_of(items.begin(), items.end(), [&](const LegendItem& i) { return i.family == b.family; }))
      items.push_back({LegendItem::swatch, b.family, false, b.legend.empty() ? b.family : b.legend});
  }
  if (portable) items.push_back({LegendItem::swatch, "", true, "dashed: portable code (AES without AES-NI)"});
  if (!c.whisker_legend.empty()) items.push_back({LegendItem::whisker, "", false, c.whisker_legend});
  if (contended) items.push_back({LegendItem::mark, "", false, c.contended_legend});
  if (setup) items.push_back({LegendItem::mark, "", false, c.setup_legend});
  return items;
}

// The fill and outline of a bar (or its swatch) of `family`: dashed and pale for portable code.
std::string bar_paint(const std::string& family, bool portable) {
  const std::string colour = family.empty() ? "#555555" : family_colour(family);
  std::string p = "fill=\"" + (family.empty() ? std::string("#ffffff") : colour) + "\"";
  if (portable)
    p += " fill-opacity=\"0.35\" stroke=\"" + colour + "\" stroke-width=\"2\" stroke-dasharray=\"" +
         kPortableDash + "\" data-portable=\"1\"";
  return p + " data-family=\"" + escape(family) + "\"";
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
    if (it.kind == LegendItem::swatch) {
      s += "<rect class=\"swatch\" x=\"" + num(lx) + "\" y=\"" + num(ly - 10) +
           "\" width=\"14\" height=\"12\" " + bar_paint(it.family, it.portable) + "/>\n";
    } else if (it.kind == LegendItem::whisker) {
      s += "<line x1=\"" + num(lx + 7) + "\" y1=\"" + num(ly - 12) + "\" x2=\"" + num(lx + 7) + "\" y2=\"" +
           num(ly + 3) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
      s += "<line x1=\"" + num(lx + 3) + "\" y1=\"" + num(ly - 12) + "\" x2=\"" + num(lx + 11) + "\" y2=\"" +
           num(ly - 12) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
      s += "<line x1=\"" + num(lx + 3) + "\" y1=\"" + num(ly + 3) + "\" x2=\"" + num(lx + 11) + "\" y2=\"" +
           num(ly + 3) + "\" stroke=\"#222222\" stroke-width=\"1.5\"/>\n";
    }
    const bool mark = it.kind == LegendItem::mark;
    s += text(lx + (mark ? 0 : 20), ly, it.label, mark ? "class=\"mark-note\"" : "");
  }
  s += "</g>\n";
}

constexpr double kBarW = 34, kInGap = 3, kGroupGap = 44;

std::string legend_of(const Bar& b) { return b.legend.empty() ? b.family : b.legend; }

// The linear y scale of the plot area: value to y.
struct YScale {
  double top, bottom, ymax;
  double operator()(double v) const { return bottom - (bottom - top) * std::clamp(v, 0.0, ymax) / ymax; }
};

// One bar at x = bx (with its whisker and value label), or the upright text of an absent one.
void draw_bar(std::string& s, const Bar& bar, double bx, const YScale& ypos) {
  const double bottom = ypos.bottom;
  if (!bar.absent.empty()) {  // upright text from the axis up, where the bar would be
    const double tx = bx + kBarW / 2 + 4, ty = bottom - 6;
    s += "<text class=\"absent\" x=\"" + num(tx) + "\" y=\"" + num(ty) +
         "\" font-size=\"10\" fill=\"#555555\" transform=\"rotate(-90 " + num(tx) + " " + num(ty) + ")\">" +
         escape(bar.absent) + "<title>" + escape(bar.label + " (" + legend_of(bar) + "): " + bar.absent) +
         "</title></text>\n";
    return;
  }
  const double by = ypos(bar.value);
  s += "<rect class=\"bar\" x=\"" + num(bx) + "\" y=\"" + num(by) + "\" width=\"" + num(kBarW) +
       "\" height=\"" + num(bottom - by) + "\" " + bar_paint(bar.family, bar.portable) + "><title>" +
       escape(bar.label + " (" + legend_of(bar) + (bar.portable ? ", portable code" : "") +
              "): " + value_label(bar.value) + " MB/s") +
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
  s += text(bx + kBarW / 2, label_top - 5,
            value_label(bar.value) + (bar.contended ? "*" : "") + (bar.setup ? "+" : ""),
            std::string("class=\"value") + (bar.contended ? " contended" : "") + (bar.setup ? " setup" : "") +
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
  std::vector<LegendItem> items = legend_items(c);
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
    for (size_t i = a; i < b; ++i) draw_bar(s, c.bars[i], x + double(i - a) * (kBarW + kInGap), ypos);
    draw_group_labels(s, c.bars, groups[g], x, gw, bottom, group_lines[g]);
    x += gw + gap;
  }
  if (!c.x_label.empty())
    s += text((x0 + x1) / 2, bottom + 66 + extra_lines, c.x_label,
              "class=\"xtitle\" font-size=\"13\" fill=\"#222222\" text-anchor=\"middle\"");
  s += "</svg>\n";
  return s;
}

// Written as the port file is: a temporary file made in the chart's directory and renamed over
// the name (a link planted there is replaced, never followed), the directory reached by the
// kernel's rule for links in sticky directories whatever the sysctls say (files/guarded_path.h; a
// twenty-sixth re-attack's note: an ofstream opened the name and followed another user's link in
// /tmp into the victim's file).
bool write_file(const std::filesystem::path& p, const std::string& doc, std::string& why) {
  try {
    const files::UniqueFd dir = files::open_guarded_parent(p);
    files::AtomicFile out(dir.get(), p.filename().string(), p);
    files::write_full(out.fd(), reinterpret_cast<const uint8_t*>(doc.data()), doc.size());
    out.commit(files::FileMode(0644));
  } catch (const proto::Failure& f) {
    why = f.what();
    return false;
  }
  return true;
}

}  // namespace aesxfer::app::svg
