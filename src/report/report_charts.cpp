#include "report/report_charts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace copytask::charts {
namespace {
using html::attr;
using html::element;
using html::empty_element;
using html::text_element;
using html::tooltip;
using html::LinearScale;

constexpr double kTickFont = 12;   // tick labels
constexpr double kLabelFont = 13;  // axis titles and legends
constexpr const char* kAxisColour = "#555";
constexpr const char* kGridColour = "#e4e4e4";

std::string svg_root(const ChartMeta& meta, double width, double height, const std::string& content) {
  const std::string view = "0 0 " + html::compact(std::ceil(width)) + " " + html::compact(std::ceil(height));
  return element("svg",
                 attr("xmlns", "http://www.w3.org/2000/svg") + attr("class", "chart " + meta.kind) +
                     attr("id", meta.id) + attr("viewBox", view) + attr("width", std::ceil(width)) +
                     attr("height", std::ceil(height)) + attr("role", "img") + attr("aria-label", meta.label),
                 content);
}

std::string line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
                 const std::string& extra = "") {
  return empty_element("line", attr("x1", x1) + attr("y1", y1) + attr("x2", x2) + attr("y2", y2) +
                                   attr("stroke", stroke) + attr("stroke-width", width) + extra);
}

std::string text(double x, double y, std::string_view content, const std::string& extra) {
  return text_element("text", attr("x", x) + attr("y", y) + extra, content);
}

// Horizontal grid lines and tick labels of a y axis, its title written vertically at `title_x`.
std::string y_axis(const LinearScale& y, const std::vector<double>& ticks, double left, double right,
                   const std::string& title, double title_x) {
  std::string out;
  for (const double tick : ticks) {
    const double py = y(tick);
    out += line(left, py, right, py, kGridColour, 1);
    out += text(left - 6, py + 4, html::compact(tick),
                attr("text-anchor", "end") + attr("font-size", kTickFont) + attr("fill", kAxisColour));
  }
  out += line(left, y.r0, left, y.r1, kAxisColour, 1);
  const double middle = (y.r0 + y.r1) / 2;
  out += text(title_x, middle, title,
              attr("text-anchor", "middle") + attr("font-size", kLabelFont) + attr("fill", "#333") +
                  attr("transform", "rotate(-90 " + html::compact(title_x) + " " + html::compact(middle) + ")"));
  return out;
}

// About `target` ticks at whole numbers of lo..hi: the nice ticks when they are whole, else
// every n-th whole number (a length of 2.5 tokens means nothing).
std::vector<double> whole_ticks(double lo, double hi, int target) {
  std::vector<double> ticks = html::nice_ticks(lo, hi, target);
  if (std::all_of(ticks.begin(), ticks.end(), [](double t) { return t == std::round(t); })) return ticks;
  const double step = std::max(1.0, std::ceil((hi - lo) / target));
  ticks.clear();
  for (double t = std::ceil(lo); t <= hi + 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

// Vertical grid lines, tick labels and title of an x axis along `bottom`.
std::string x_axis(const LinearScale& x, const std::vector<double>& ticks, double bottom, double top,
                   const std::string& title) {
  std::string out;
  for (const double tick : ticks) {
    const double px = x(tick);
    out += line(px, top, px, bottom, kGridColour, 1);
    out += line(px, bottom, px, bottom + 4, kAxisColour, 1);
    out += text(px, bottom + 17, html::compact(tick),
                attr("text-anchor", "middle") + attr("font-size", kTickFont) + attr("fill", kAxisColour));
  }
  out += line(x.r0, bottom, x.r1, bottom, kAxisColour, 1);
  out += text((x.r0 + x.r1) / 2, bottom + 36, title,
              attr("text-anchor", "middle") + attr("font-size", kLabelFont) + attr("fill", "#333"));
  return out;
}

std::vector<double> colour_bar_ticks(const ColourScale& scale) {
  if (scale.kind == ColourScale::Kind::diverging) {
    const double m = std::max(std::abs(scale.lo), std::abs(scale.hi));
    if (!(m > 0)) return {0.0};
    // Ends and middle: the ends are the exact extremes the colours were scaled to.
    return {-m, 0.0, m};
  }
  if (!(scale.hi > scale.lo)) return {scale.lo};
  auto ticks = html::nice_ticks(scale.lo, scale.hi, 4);
  // Always label both ends, so the range of the colours is explicit.
  std::vector<double> out = {scale.lo};
  const double min_gap = (scale.hi - scale.lo) * 0.18;
  for (const double tick : ticks)
    if (tick - scale.lo > min_gap && scale.hi - tick > min_gap) out.push_back(tick);
  out.push_back(scale.hi);
  return out;
}

std::string tick_text(double tick) { return html::compact(std::round(tick * 1000) / 1000); }

// Width the colour bar needs: the bar, its tick labels, and its title written vertically
// beside them (vertical, so a long title does not widen every heatmap's legend).
double colour_bar_width(const ColourScale& scale) {
  double widest = 0;
  for (const double tick : colour_bar_ticks(scale)) widest = std::max(widest, html::text_width(tick_text(tick), 11));
  return 16 + 8 + widest + 8 + 14;
}

// A vertical colour bar, high values at the top, ticks on its right, its title beside them.
std::string colour_bar(const ColourScale& scale, double x, double y, double height) {
  const double lo = scale.kind == ColourScale::Kind::diverging ? -std::max(std::abs(scale.lo), std::abs(scale.hi))
                                                               : scale.lo;
  const double hi = scale.kind == ColourScale::Kind::diverging ? -lo : scale.hi;
  constexpr int kSteps = 48;
  constexpr double kBar = 16;
  const double step_h = height / kSteps;
  std::string out;
  for (int s = 0; s < kSteps; ++s) {
    const double value = hi - (hi - lo) * (s + 0.5) / kSteps;
    out += empty_element("rect", attr("x", x) + attr("y", y + s * step_h) + attr("width", kBar) +
                                     attr("height", step_h + 0.6) + attr("fill", html::hex(scale(value))));
  }
  out += empty_element("rect", attr("x", x) + attr("y", y) + attr("width", kBar) + attr("height", height) +
                                   attr("fill", "none") + attr("stroke", "#888") + attr("stroke-width", 0.8));
  const LinearScale to_y{lo, hi, y + height, y};
  double widest = 0;
  for (const double tick : colour_bar_ticks(scale)) {
    const double py = to_y(tick);
    widest = std::max(widest, html::text_width(tick_text(tick), 11));
    out += line(x + kBar, py, x + kBar + 4, py, "#555", 1);
    out += text(x + kBar + 7, py + 4, tick_text(tick), attr("font-size", 11) + attr("fill", kAxisColour));
  }
  const double tx = x + kBar + 8 + widest + 12, ty = y + height / 2;
  out += text(tx, ty, scale.title,
              attr("text-anchor", "middle") + attr("font-size", 12) + attr("fill", "#333") +
                  attr("transform", "rotate(-90 " + html::compact(tx) + " " + html::compact(ty) + ")"));
  return out;
}

// The hatch pattern of masked cells; `id` must be unique in the page.
std::string hatch_pattern(const std::string& id) {
  return element("defs", "",
                 element("pattern",
                         attr("id", id) + attr("patternUnits", "userSpaceOnUse") + attr("width", 5) +
                             attr("height", 5) + attr("patternTransform", "rotate(45)"),
                         empty_element("rect", attr("width", 5) + attr("height", 5) + attr("fill", "#ececec")) +
                             line(1, 0, 1, 5, "#a8a8a8", 1.6)));
}

double finite_or(double value, double fallback) { return std::isfinite(value) ? value : fallback; }

}  // namespace

// ------------------------------------------------------------------------------------------------

std::string dot_bar_chart(const std::vector<DotBar>& bars, const ChartMeta& meta, const std::string& y_label,
                          double y_min, double y_max) {
  const size_t n = std::max<size_t>(bars.size(), 1);
  const double slot = std::clamp(880.0 / static_cast<double>(n), 56.0, 150.0);
  const double left = 66, right = 16, top = 22;
  const double plot_w = slot * static_cast<double>(n);
  // Scheme names that do not fit under their bar are written at a slant, cut at 28 characters.
  double widest = 0;
  for (const auto& bar : bars) widest = std::max(widest, html::text_width(html::truncate(bar.name, 28), kLabelFont));
  const bool slanted = widest > slot - 10;
  const double bottom = slanted ? std::min(widest * 0.6 + 34, 190.0) : 46;
  const double plot_h = 300;
  const double width = left + plot_w + right, height = top + plot_h + bottom;
  const LinearScale y{y_min, y_max, top + plot_h, top};

  std::string out = y_axis(y, html::nice_ticks(y_min, y_max, 5), left, left + plot_w, y_label, 18);
  const double bar_w = std::min(slot * 0.58, 84.0);
  for (size_t i = 0; i < bars.size(); ++i) {
    const DotBar& bar = bars[i];
    const double cx = left + slot * (static_cast<double>(i) + 0.5);
    std::string group;
    const double mean = finite_or(bar.mean, y_min);
    const double bar_top = y(std::clamp(mean, y_min, y_max));
    group += element("rect",
                     attr("class", "bar") + attr("x", cx - bar_w / 2) + attr("y", bar_top) + attr("width", bar_w) +
                         attr("height", std::max(0.0, y.r0 - bar_top)) + attr("fill", bar.colour) +
                         attr("fill-opacity", 0.3) + attr("stroke", bar.colour) + attr("stroke-width", 1.5),
                     tooltip(bar.tip));
    double label_top = bar_top;
    if (bar.ci95) {
      const double lo = y(std::clamp(bar.ci95->first, y_min, y_max));
      const double hi = y(std::clamp(bar.ci95->second, y_min, y_max));
      const std::string tip = bar.name + ": 95% CI of the mean [" + html::fixed(bar.ci95->first, 4) + ", " +
                              html::fixed(bar.ci95->second, 4) + "]";
      group += element("g", attr("class", "ci") + attr("stroke", "#222") + attr("stroke-width", 1.6),
                       tooltip(tip) + line(cx, lo, cx, hi, "#222", 1.6) + line(cx - 8, lo, cx + 8, lo, "#222", 1.6) +
                           line(cx - 8, hi, cx + 8, hi, "#222", 1.6));
      label_top = std::min(label_top, hi);
    }
    const size_t k = bar.points.size();
    for (size_t p = 0; p < k; ++p) {
      // Seeds spread evenly across the bar so equal values stay distinguishable.
      const double offset = k > 1 ? (static_cast<double>(p) / static_cast<double>(k - 1) - 0.5) * bar_w * 0.62 : 0;
      const double py = y(std::clamp(finite_or(bar.points[p].second, y_min), y_min, y_max));
      label_top = std::min(label_top, py - 5);
      group += element("circle",
                       attr("class", "seed") + attr("cx", cx + offset) + attr("cy", py) + attr("r", 4.5) +
                           attr("fill", bar.colour) + attr("stroke", "#222") + attr("stroke-width", 1),
                       tooltip(bar.points[p].first));
    }
    group += text(cx, label_top - 6, html::fixed(bar.mean, 3),
                  attr("text-anchor", "middle") + attr("font-size", 12) + attr("font-weight", "600") +
                      attr("fill", "#222"));
    const std::string name = html::truncate(bar.name, 28);
    if (slanted) {
      const double ly = top + plot_h + 14;
      group += element("text",
                       attr("x", cx) + attr("y", ly) + attr("text-anchor", "end") + attr("font-size", kLabelFont) +
                           attr("fill", "#222") +
                           attr("transform", "rotate(-35 " + html::compact(cx) + " " + html::compact(ly) + ")"),
                       tooltip(bar.name) + html::escape(name));
    } else {
      group += element("text",
                       attr("x", cx) + attr("y", top + plot_h + 20) + attr("text-anchor", "middle") +
                           attr("font-size", kLabelFont) + attr("fill", "#222"),
                       tooltip(bar.name) + html::escape(name));
    }
    out += element("g", attr("class", "scheme"), group);
  }
  return svg_root(meta, width, height, out);
}

// ------------------------------------------------------------------------------------------------

std::string line_chart(const std::vector<Series>& series, const ChartMeta& meta, const Axes& axes, double width,
                       double height) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
      if (i < s.band_lo.size() && std::isfinite(s.band_lo[i])) y_lo = std::min(y_lo, s.band_lo[i]);
      if (i < s.band_hi.size() && std::isfinite(s.band_hi[i])) y_hi = std::max(y_hi, s.band_hi[i]);
    }
  }
  const auto x_domain = axes.x_domain ? *axes.x_domain : html::nice_domain(x_lo, x_hi, 8);
  const auto y_domain = axes.y_domain ? *axes.y_domain : html::nice_domain(y_lo, y_hi, 5);

  // A legend only where there is more than one line to tell apart.
  const bool show_legend = series.size() > 1;
  double legend_w = 0;
  for (const auto& s : series)
    legend_w = std::max(legend_w, html::text_width(html::truncate(s.name, 30), kLabelFont) + 34);
  legend_w = show_legend ? std::min(legend_w, 250.0) : 0;
  const double left = 64, top = 14, bottom = 48, right = legend_w + 18;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const LinearScale x{x_domain.first, x_domain.second, left, left + plot_w};
  const LinearScale y{y_domain.first, y_domain.second, top + plot_h, top};

  std::string out = y_axis(y, html::nice_ticks(y_domain.first, y_domain.second, 5), left, left + plot_w,
                           axes.y_label, 18);
  out += x_axis(x, axes.whole_x ? whole_ticks(x_domain.first, x_domain.second, 8) : html::nice_ticks(x_domain.first, x_domain.second, 8),
                top + plot_h, top, axes.x_label);
  if (axes.zero_line && y_domain.first < 0 && y_domain.second > 0)
    out += line(left, y(0), left + plot_w, y(0), "#999", 1, attr("stroke-dasharray", "4 3"));
  if (axes.x_marker && axes.x_marker->first >= x_domain.first && axes.x_marker->first <= x_domain.second) {
    const double mx = x(axes.x_marker->first);
    out += element("g", attr("class", "x-marker"),
                   line(mx, top, mx, top + plot_h, "#555", 1.2, attr("stroke-dasharray", "6 4")) +
                       text(mx + 4, top + 12, axes.x_marker->second,
                            attr("font-size", kLabelFont) + attr("fill", "#333")));
  }

  // Bands first, so every line stays on top of every band.
  for (const auto& s : series) {
    if (s.band_lo.empty() || s.band_hi.empty()) continue;
    std::string points;
    for (size_t i = 0; i < s.x.size() && i < s.band_hi.size(); ++i)
      points += html::compact(std::round(x(s.x[i]) * 10) / 10) + "," +
                html::compact(std::round(y(finite_or(s.band_hi[i], s.y[i])) * 10) / 10) + " ";
    for (size_t i = std::min(s.x.size(), s.band_lo.size()); i-- > 0;)
      points += html::compact(std::round(x(s.x[i]) * 10) / 10) + "," +
                html::compact(std::round(y(finite_or(s.band_lo[i], s.y[i])) * 10) / 10) + " ";
    out += empty_element("polygon", attr("class", "band") + attr("points", points) + attr("fill", s.colour) +
                                        attr("fill-opacity", 0.16) + attr("stroke", "none"));
  }
  for (const auto& s : series) {
    std::string points, marks;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      const double px = x(s.x[i]), py = y(s.y[i]);
      points += html::compact(std::round(px * 10) / 10) + "," + html::compact(std::round(py * 10) / 10) + " ";
      if (s.markers || i < s.tips.size())
        marks += element("circle",
                         attr("cx", px) + attr("cy", py) + attr("r", s.markers ? 3.5 : 2.5) + attr("fill", s.colour) +
                             attr("stroke", "#fff") + attr("stroke-width", 0.8),
                         i < s.tips.size() ? tooltip(s.tips[i]) : "");
    }
    out += element("g", attr("class", "series"),
                   tooltip(s.name) +
                       empty_element("polyline", attr("points", points) + attr("fill", "none") +
                                                     attr("stroke", s.colour) + attr("stroke-width", 2.2) +
                                                     attr("stroke-linejoin", "round")) +
                       marks);
  }
  // Legend at the right, one row per series.
  auto legend_row_y = [&](size_t i) { return top + 8 + 20 * static_cast<double>(i); };
  std::string legend;
  for (size_t i = 0; show_legend && i < series.size(); ++i) {
    const double ly = legend_row_y(i);
    const double lx = left + plot_w + 18;
    legend += element("g", "",
                      tooltip(series[i].name) + line(lx, ly, lx + 22, ly, series[i].colour, 3) +
                          text(lx + 28, ly + 4, html::truncate(series[i].name, 30),
                               attr("font-size", kLabelFont) + attr("fill", "#222")));
  }
  out += element("g", attr("class", "legend"), legend);
  // A legend of many series (a study of 42 arms) is taller than the plot: the chart grows
  // to hold it, below the x axis, instead of running over what follows it on the page.
  const double legend_bottom = show_legend ? legend_row_y(series.size()) : 0;
  return svg_root(meta, width, std::max(height, legend_bottom), out);
}

// ------------------------------------------------------------------------------------------------

html::Rgb ColourScale::operator()(double value) const {
  if (!std::isfinite(value)) return {0xcc, 0xcc, 0xcc};
  if (kind == Kind::diverging) {
    const double m = std::max(std::abs(lo), std::abs(hi));
    return html::diverging(m > 0 ? value / m : 0.0);
  }
  return html::viridis(hi > lo ? (value - lo) / (hi - lo) : 0.5);
}

html::Rgb ColourScale::step(double value) const {
  if (!std::isfinite(value)) return (*this)(value);
  if (kind == Kind::diverging) {
    const double m = std::max(std::abs(lo), std::abs(hi));
    const double u = std::clamp(m > 0 ? value / m : 0.0, -1.0, 1.0);
    return (*this)(std::round(u * kSteps / 2) / (kSteps / 2) * m);
  }
  if (!(hi > lo)) return (*this)(value);
  const double t = std::clamp((value - lo) / (hi - lo), 0.0, 1.0);
  return (*this)(lo + std::round(t * kSteps) / kSteps * (hi - lo));
}

namespace {

// One map's cells at (x, y): one path per colour of unit squares, scaled to cell_px (a
// <rect> and hover text per cell made a study's attention maps 5 MB; this is a tenth of
// it), white lines between the cells, and the masked cells hatched on top (one square each
// in one path). The colours are the scale's 64 steps (ColourScale::step); the hover text names
// the study file that holds the values (`values_in`).
std::string heatmap_cells(const Heatmap& map, const ColourScale& scale, double x, double y, double cell_px,
                          const std::string& hatch_id, const std::string& values_in) {
  const size_t rows = map.values.size();
  size_t cols = 0;
  for (const auto& row : map.values) cols = std::max(cols, row.size());
  if (rows == 0 || cols == 0) return "";
  std::map<std::string, std::string> squares;  // colour -> path of its cells, in cell units
  std::string masked;  // path of the masked cells, in page units (the hatch is in page units)
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < map.values[i].size(); ++j) {
      if (map.masked && map.masked(i, j)) {
        masked += "M" + html::compact(x + cell_px * static_cast<double>(j)) + " " +
                  html::compact(y + cell_px * static_cast<double>(i)) + "h" + html::compact(cell_px) + "v" +
                  html::compact(cell_px) + "h" + html::compact(-cell_px) + "z";
        continue;
      }
      squares[html::hex(scale.step(map.values[i][j]))] += "M" + std::to_string(j) + " " + std::to_string(i) + "h1v1h-1z";
    }
  }
  std::string paths;
  for (const auto& [colour, d] : squares) paths += empty_element("path", attr("fill", colour) + attr("d", d));
  const double width = cell_px * static_cast<double>(cols), height = cell_px * static_cast<double>(rows);
  std::string lines;
  for (size_t j = 1; j < cols; ++j) lines += "M" + html::compact(x + cell_px * static_cast<double>(j)) + " " +
                                             html::compact(y) + "v" + html::compact(height);
  for (size_t i = 1; i < rows; ++i) lines += "M" + html::compact(x) + " " +
                                             html::compact(y + cell_px * static_cast<double>(i)) + "h" + html::compact(width);
  const std::string cells =
      element("g",
              attr("class", "cells") +
                  attr("transform", "translate(" + html::compact(x) + " " + html::compact(y) + ") scale(" +
                                        html::compact(cell_px) + ")"),
              tooltip(map.heading + ": the values are in " + values_in) + paths);
  return cells + (lines.empty() ? "" : empty_element("path", attr("d", lines) + attr("stroke", "#fff") +
                                                                   attr("stroke-width", 0.5) + attr("fill", "none"))) +
         (masked.empty() ? "" : empty_element("path", attr("class", "masked") + attr("fill", "url(#" + hatch_id + ")") +
                                                          attr("d", masked)));
}

}  // namespace

std::string heatmap_grid(const std::vector<std::vector<Heatmap>>& grid, const ColourScale& scale,
                         const ChartMeta& meta, const std::string& values_in, double cell_px,
                         const std::string& mask_legend) {
  size_t rows = 0, cols = 0, grid_cols = 0;
  double row_label_w = 0;
  bool any_mask = false;
  const double font = cell_px >= 14 ? 11 : 9;
  for (const auto& grid_row : grid) {
    grid_cols = std::max(grid_cols, grid_row.size());
    for (const auto& map : grid_row) {
      rows = std::max(rows, map.values.size());
      for (const auto& row : map.values) cols = std::max(cols, row.size());
      for (const auto& label : map.row_labels) row_label_w = std::max(row_label_w, html::text_width(label, font));
      any_mask = any_mask || static_cast<bool>(map.masked);
    }
  }
  // Labels thinned out when cells are smaller than a line of text.
  const size_t label_every = static_cast<size_t>(std::ceil(12.0 / cell_px));
  const double title_w = 16, left = title_w + row_label_w + 6, head = 22;
  const double map_w = cell_px * static_cast<double>(cols), map_h = cell_px * static_cast<double>(rows);
  const double panel_w = left + map_w + 18, panel_h = head + map_h + 36;
  const double grid_w = panel_w * static_cast<double>(grid_cols);
  const double grid_h = panel_h * static_cast<double>(grid.size());
  const double bar_h = std::clamp(map_h, 110.0, 200.0);
  const double legend_x = grid_w + 4;
  // The mask's legend in two lines ("masked", "(causal)") to keep the legend narrow.
  const size_t split = mask_legend.find(" (");
  const std::vector<std::string> mask_lines =
      split == std::string::npos ? std::vector<std::string>{mask_legend}
                                 : std::vector<std::string>{mask_legend.substr(0, split), mask_legend.substr(split + 1)};
  double legend_w = colour_bar_width(scale);
  if (any_mask)
    for (const auto& text_line : mask_lines) legend_w = std::max(legend_w, 22 + html::text_width(text_line, 11));
  const double width = legend_x + legend_w + 4;
  const double height = std::max(grid_h, head + bar_h + (any_mask ? 52 : 10));
  const std::string hatch_id = meta.id + "-hatch";

  std::string out = any_mask ? hatch_pattern(hatch_id) : "";
  for (size_t gr = 0; gr < grid.size(); ++gr) {
    for (size_t gc = 0; gc < grid[gr].size(); ++gc) {
      const Heatmap& map = grid[gr][gc];
      const double ox = panel_w * static_cast<double>(gc), oy = panel_h * static_cast<double>(gr);
      const double mx = ox + left, my = oy + head;
      std::string panel = text(mx + map_w / 2, oy + 14, map.heading,
                               attr("text-anchor", "middle") + attr("font-size", 12) + attr("font-weight", "600") +
                                   attr("fill", "#222"));
      panel += heatmap_cells(map, scale, mx, my, cell_px, hatch_id, values_in);
      // The labels' shared attributes once per axis (a study's report has thousands of labels).
      std::string row_labels, col_labels;
      for (size_t i = 0; i < map.row_labels.size() && i < rows; i += label_every)
        row_labels += text(mx - 4, my + cell_px * (static_cast<double>(i) + 0.5) + font * 0.36, map.row_labels[i], "");
      for (size_t j = 0; j < map.col_labels.size() && j < cols; j += label_every)
        col_labels += text(mx + cell_px * (static_cast<double>(j) + 0.5), my + map_h + 4 + font, map.col_labels[j], "");
      const std::string label_style = attr("font-size", font) + attr("fill", "#333");
      panel += element("g", attr("text-anchor", "end") + label_style, row_labels) +
               element("g", attr("text-anchor", "middle") + label_style, col_labels);
      if (!map.col_title.empty())
        panel += text(mx + map_w / 2, my + map_h + 30, map.col_title,
                      attr("text-anchor", "middle") + attr("font-size", 11) + attr("fill", "#666"));
      if (!map.row_title.empty()) {
        const double tx = ox + 11, ty = my + map_h / 2;
        panel += text(tx, ty, map.row_title,
                      attr("text-anchor", "middle") + attr("font-size", 11) + attr("fill", "#666") +
                          attr("transform", "rotate(-90 " + html::compact(tx) + " " + html::compact(ty) + ")"));
      }
      out += element("g", attr("class", "heatmap"), panel);
    }
  }
  std::string legend = colour_bar(scale, legend_x, head, bar_h);
  if (any_mask) {
    const double sy = head + bar_h + 18;
    legend += element("rect",
                      attr("class", "mask-key") + attr("x", legend_x) + attr("y", sy) + attr("width", 18) +
                          attr("height", 18) + attr("fill", "url(#" + hatch_id + ")") + attr("stroke", "#888") +
                          attr("stroke-width", 0.8),
                      tooltip(mask_legend));
    for (size_t k = 0; k < mask_lines.size(); ++k)
      legend += text(legend_x + 22, sy + 8 + 13 * static_cast<double>(k), mask_lines[k],
                     attr("font-size", 11) + attr("fill", "#333"));
  }
  out += element("g", attr("class", "legend"), legend);
  return svg_root(meta, width, height, out);
}

// ------------------------------------------------------------------------------------------------

std::string scatter_chart(const std::vector<ScatterPoint>& points, const std::vector<ScatterPath>& paths,
                          const ChartMeta& meta, const Axes& axes, double size,
                          const std::optional<ColourScale>& legend) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  auto extend = [&](double px, double py) {
    if (!std::isfinite(px) || !std::isfinite(py)) return;
    x_lo = std::min(x_lo, px);
    x_hi = std::max(x_hi, px);
    y_lo = std::min(y_lo, py);
    y_hi = std::max(y_hi, py);
  };
  for (const auto& p : points) extend(p.x, p.y);
  for (const auto& path : paths)
    for (const auto& [px, py] : path.points) extend(px, py);
  if (!std::isfinite(x_lo)) x_lo = -1, x_hi = 1, y_lo = -1, y_hi = 1;
  // One scale for both axes: the larger span, centred on each axis's data, plus a margin.
  const double span = std::max({x_hi - x_lo, y_hi - y_lo, 1e-9}) * 1.12;
  const double cx = (x_lo + x_hi) / 2, cy = (y_lo + y_hi) / 2;
  const double left = 62, top = 14, bottom = 48;
  const double right = legend ? colour_bar_width(*legend) + 20 : 16;
  const LinearScale x{cx - span / 2, cx + span / 2, left, left + size};
  const LinearScale y{cy - span / 2, cy + span / 2, top + size, top};

  std::string out = y_axis(y, html::nice_ticks(y.d0, y.d1, 5), left, left + size, axes.y_label, 16);
  out += x_axis(x, html::nice_ticks(x.d0, x.d1, 5), top + size, top, axes.x_label);
  out += empty_element("rect", attr("x", left) + attr("y", top) + attr("width", size) + attr("height", size) +
                                   attr("fill", "none") + attr("stroke", "#bbb"));
  for (const auto& path : paths) {
    std::string coordinates;
    for (const auto& [px, py] : path.points)
      if (std::isfinite(px) && std::isfinite(py))
        coordinates += html::compact(std::round(x(px) * 10) / 10) + "," + html::compact(std::round(y(py) * 10) / 10) + " ";
    out += element("polyline",
                   attr("class", "path") + attr("points", coordinates) + attr("fill", "none") +
                       attr("stroke", path.colour) + attr("stroke-opacity", path.opacity) +
                       attr("stroke-width", path.stroke_width) + attr("stroke-linejoin", "round"),
                   path.tip.empty() ? "" : tooltip(path.tip));
    if (path.start_marker && !path.points.empty() && std::isfinite(path.points[0].first) &&
        std::isfinite(path.points[0].second))
      out += empty_element("circle", attr("cx", x(path.points[0].first)) + attr("cy", y(path.points[0].second)) +
                                         attr("r", 2.8) + attr("fill", "#fff") + attr("stroke", path.colour) +
                                         attr("stroke-width", 1.4));
  }
  // Labels go beside their point, on the first side where they overlap no other label or
  // point (close points, e.g. positions that barely moved, would otherwise print over each other).
  struct Box {
    double x0, y0, x1, y1;
    bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  };
  std::vector<Box> taken;
  for (const auto& p : points)
    if (std::isfinite(p.x) && std::isfinite(p.y)) taken.push_back({x(p.x) - 5, y(p.y) - 5, x(p.x) + 5, y(p.y) + 5});
  struct Place {
    double dx, dy;
    const char* anchor;
  };
  static const Place places[] = {{7, -6, "start"}, {7, 15, "start"}, {-7, -6, "end"},
                                 {-7, 15, "end"},  {0, -10, "middle"}, {0, 21, "middle"}};
  for (const auto& p : points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    const double px = x(p.x), py = y(p.y), w = html::text_width(p.label, 12);
    auto box_at = [&](const Place& place) {
      const double left_x = place.anchor[0] == 's' ? px + place.dx : place.anchor[0] == 'e' ? px + place.dx - w
                                                                                            : px - w / 2;
      return Box{left_x, py + place.dy - 11, left_x + w, py + place.dy + 1};
    };
    const Place* chosen = &places[0];
    for (const Place& place : places) {
      const Box box = box_at(place);
      const Box own = {px - 5, py - 5, px + 5, py + 5};
      bool free = true;
      for (const Box& other : taken)
        if (!(other.x0 == own.x0 && other.y0 == own.y0) && box.overlaps(other)) free = false;
      if (free) {
        chosen = &place;
        break;
      }
    }
    taken.push_back(box_at(*chosen));
    out += element("g", attr("class", "point"),
                   element("circle",
                           attr("cx", px) + attr("cy", py) + attr("r", 5.5) + attr("fill", p.colour) +
                               attr("stroke", "#222") + attr("stroke-width", 0.8),
                           tooltip(p.tip)) +
                       text(px + chosen->dx, py + chosen->dy, p.label,
                            attr("text-anchor", chosen->anchor) + attr("font-size", 12) + attr("font-weight", "600") +
                                attr("fill", "#222") + attr("paint-order", "stroke") + attr("stroke", "#fff") +
                                attr("stroke-width", 3)));
  }
  if (legend) out += element("g", attr("class", "legend"), colour_bar(*legend, left + size + 16, top, std::min(size, 180.0)));
  return svg_root(meta, left + size + right, top + size + bottom, out);
}

}  // namespace copytask::charts
