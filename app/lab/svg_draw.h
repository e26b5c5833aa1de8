// The drawing pieces the bar chart (app/lab/svg.cpp) and the line charts (app/lab/svg_line.cpp)
// share. Internal to app/lab/svg*.cpp.
#pragma once
#include <string>

namespace aesxfer::app::svg::draw {

inline constexpr const char* kFont = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";

// Width of a text in the chart's sans-serif font of px pixels, generously (DejaVu Sans averages
// about 0.6 em): legends are laid out with it so that nothing is clipped.
double text_width(const std::string& t, double px = 12);
std::string num(double v);  // one decimal, for coordinates
// A figure as a label: 3 significant digits for small values, integers for large ones.
std::string value_label(double v);
// The XML declaration, the <svg> element of w x h and a white background.
std::string header(double w, double h);
// A <text> element at (x, y) with the text escaped.
std::string text(double x, double y, const std::string& t, const std::string& attrs);
// Title and subtitle, centred on a document of width w.
void titles(std::string& s, double w, const std::string& title, const std::string& subtitle);
// Horizontal grid lines with y tick labels, the rotated y-axis label (none when empty) and the two
// axes, for a linear scale from 0; returns the y-axis maximum actually used.
double y_axis(std::string& s, double x0, double x1, double top, double bottom, double data_max,
              const std::string& y_label);
// The same for a log10 axis from 10^dec_lo to 10^dec_hi: decades labelled, 2x and 5x as minor lines.
void log_y_axis(std::string& s, double x0, double x1, double top, double bottom, double dec_lo, double dec_hi,
                const std::string& y_label);
// The legend's sample of a mark's look: a short line in colour (dashed when portable).
std::string key_line(double x, double y, const std::string& family, bool portable, double len = 30);

}  // namespace aesxfer::app::svg::draw
