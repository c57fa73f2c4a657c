#pragma once
// The chart kinds of the HTML report, each one inline SVG built from plain data (no JSON
// here: the sections in report_sections.h turn the study files into these structs).
// Every chart is `<svg class="chart KIND" id=...>`, every mark carries its numbers in an
// SVG <title> (shown on hover), and colour scales come with a labelled colour bar.
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/svg.h"

namespace copytask::charts {

// What identifies a chart in the page: `kind` becomes its class ("chart KIND"), `id` its
// element id (unique in the page), `label` its accessible name.
struct ChartMeta {
  std::string kind;
  std::string id;
  std::string label;
};

// ---- Bars with every seed as a dot and the 95% CI as an error bar --------------------------
struct DotBar {
  std::string name;
  std::string colour;
  double mean = 0;
  std::optional<std::pair<double, double>> ci95;  // absent with one seed
  std::vector<std::pair<std::string, double>> points;  // (hover label, value), one per seed
  std::string tip;  // hover text of the bar
};
std::string dot_bar_chart(const std::vector<DotBar>& bars, const ChartMeta& meta, const std::string& y_label,
                          double y_min, double y_max);

// ---- Lines (optionally with a band and markers) ---------------------------------------------
struct Series {
  std::string name;
  std::string colour;
  std::vector<double> x, y;
  std::vector<double> band_lo, band_hi;  // empty: no band
  std::vector<std::string> tips;          // hover text per point; empty: none
  bool markers = false;                   // a dot at every point
};
struct Axes {
  std::string x_label, y_label;
  std::optional<std::pair<double, double>> x_domain, y_domain;  // absent: from the data, widened to ticks
  bool zero_line = false;  // a horizontal rule at y = 0
  // A vertical rule at x with its label at the top (e.g. the longest trained length).
  std::optional<std::pair<double, std::string>> x_marker;
  bool whole_x = false;  // x counts something (a length, an index): ticks at whole numbers only
};
std::string line_chart(const std::vector<Series>& series, const ChartMeta& meta, const Axes& axes, double width,
                       double height);

// ---- Heatmaps -----------------------------------------------------------------------------------
struct ColourScale {
  enum class Kind { sequential, diverging };
  Kind kind = Kind::sequential;
  double lo = 0, hi = 1;   // diverging: symmetric around 0 by max(|lo|, |hi|)
  std::string title;       // what the colours mean, written beside the colour bar
  html::Rgb operator()(double value) const;
  // The colour of the nearest of kSteps + 1 evenly spaced values from lo to hi (heatmap
  // cells: colours the eye cannot tell apart share one path).
  static constexpr int kSteps = 64;
  html::Rgb step(double value) const;
};

struct Heatmap {
  std::string heading;                        // above the map, e.g. "layer 1, head 1"
  std::vector<std::vector<double>> values;    // rows x columns
  std::vector<std::string> row_labels, col_labels;
  std::string row_title, col_title;           // axis titles, e.g. "query", "key"
  std::function<bool(size_t, size_t)> masked;  // cells drawn hatched instead of coloured; empty: none
};

// A grid of heatmaps sharing one colour scale (e.g. layers x heads of attention), each map
// under its heading, with the colour bar, and the hatch legend (`mask_legend`, a trailing
// " (...)" on a second line) when any cell is masked. No hover text per cell: each map's
// says which study file holds its values (`values_in`, e.g. "attention.json").
std::string heatmap_grid(const std::vector<std::vector<Heatmap>>& grid, const ColourScale& scale,
                         const ChartMeta& meta, const std::string& values_in, double cell_px,
                         const std::string& mask_legend = "masked");

// ---- Scatter (PCA of positions) -----------------------------------------------------------------
struct ScatterPoint {
  double x = 0, y = 0;
  std::string label;   // written beside the point
  std::string colour;
  std::string tip;
};
struct ScatterPath {
  std::vector<std::pair<double, double>> points;
  std::string colour;
  double opacity = 1;
  double stroke_width = 1;
  std::string tip;
  bool start_marker = false;  // a small open circle where the path starts
};
// Both axes on one scale (distances in a PCA plane mean something). `legend` adds a
// colour bar (e.g. position -> colour).
std::string scatter_chart(const std::vector<ScatterPoint>& points, const std::vector<ScatterPath>& paths,
                          const ChartMeta& meta, const Axes& axes, double size,
                          const std::optional<ColourScale>& legend = std::nullopt);

}  // namespace copytask::charts
