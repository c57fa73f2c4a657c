// The positional-encoding section of the report, from positional.json: for each scheme's
// first seed, what its hooks record. Additive tables (sinusoidal, learned): dot-product and
// cosine similarity between positions and a 2-D PCA (for learned, also its path over
// training); rotation (RoPE, xpos): the relative kernel; the q/k scale (xpos): its factor
// against the distance; score biases (ALiBi, T5, dynamic, KERPLE, FIRE): each head's bias,
// as a map and against the signed distance, and the values the scheme reports (slopes,
// ...); content terms (CoPE, FoX, DAPE): the term on the first probe per block and head. What is drawn follows the
// keys present, not the scheme's name, so a new scheme that records the same kind of data
// is drawn without changes here.
#include <algorithm>
#include <cmath>
#include <functional>

#include "report/report_charts.h"
#include "report/report_sections.h"

namespace copytask::report {
using nlohmann::json;

namespace {
std::vector<std::string> position_labels(size_t count) {
  std::vector<std::string> labels;
  for (size_t i = 0; i < count; ++i) labels.push_back(std::to_string(i));
  return labels;
}

double cell_size(size_t positions) {
  return positions <= 12 ? 16 : std::max(5.0, 192.0 / static_cast<double>(positions));
}

// A position x position similarity heatmap on a diverging scale centred at 0.
std::string similarity_map(const std::vector<std::vector<double>>& values, const std::string& what,
                           double bound, const std::string& id) {
  charts::Heatmap map;
  map.heading = what;
  map.values = values;
  map.row_labels = map.col_labels = position_labels(values.size());
  map.row_title = "position i";
  map.col_title = "position j";
  const charts::ColourScale scale{charts::ColourScale::Kind::diverging, -bound, bound, what};
  return charts::heatmap_grid({{map}}, scale, {"heatmap-" + std::string(what == "cosine similarity" ? "cosine" : "dot"), id, what},
                              "positional.json", cell_size(values.size()));
}

std::vector<std::pair<double, double>> points_of(const json* j) {
  std::vector<std::pair<double, double>> out;
  for (const auto& row : matrix(j)) out.emplace_back(row.size() > 0 ? row[0] : NAN, row.size() > 1 ? row[1] : NAN);
  return out;
}

std::vector<charts::ScatterPoint> position_points(const std::vector<std::pair<double, double>>& points) {
  std::vector<charts::ScatterPoint> out;
  const double last = std::max<double>(1, static_cast<double>(points.size()) - 1);
  for (size_t p = 0; p < points.size(); ++p)
    out.push_back({points[p].first, points[p].second, std::to_string(p),
                   html::hex(html::viridis(static_cast<double>(p) / last)),
                   "position " + std::to_string(p) + ": (" + html::fixed(points[p].first, 3) + ", " +
                       html::fixed(points[p].second, 3) + ")"});
  return out;
}

// Additive tables: similarity heatmaps, PCA scatter, and (learned) the path over training.
std::string vectors_block(const json& vectors, const json* path, const std::string& id) {
  std::string row;
  const auto cosine = matrix(member(vectors, "cosine"));
  const auto dot = matrix(member(vectors, "dot"));
  if (!cosine.empty()) row += figure(similarity_map(cosine, "cosine similarity", 1.0, id + "-cosine"), "");
  if (!dot.empty()) {
    double bound = 0;
    for (const auto& r : dot)
      for (const double v : r)
        if (std::isfinite(v)) bound = std::max(bound, std::abs(v));
    row += figure(similarity_map(dot, "dot product", bound > 0 ? bound : 1.0, id + "-dot"), "");
  }
  const json* pca = member(vectors, "pca");
  const auto final_points = points_of(pca ? member(*pca, "points") : nullptr);
  const std::vector<double> ratio = numbers(pca ? member(*pca, "explained_variance_ratio") : nullptr);
  auto axis_name = [&ratio](size_t k) {
    return "PC" + std::to_string(k + 1) +
           (k < ratio.size() && std::isfinite(ratio[k]) ? " (" + html::fixed(100 * ratio[k], 1) + "% of variance)" : "");
  };
  const charts::Axes axes{axis_name(0), axis_name(1), std::nullopt, std::nullopt, false, std::nullopt};
  const charts::ColourScale position_scale{charts::ColourScale::Kind::sequential, 0,
                                           std::max<double>(1, static_cast<double>(final_points.size()) - 1), "position"};
  if (!final_points.empty()) {
    // A thin line through the positions in order shows the curve they lie on.
    const charts::ScatterPath order{final_points, "#888", 0.7, 1.2, "positions in order", false};
    row += figure(charts::scatter_chart(position_points(final_points), {order},
                                        {"pca", id + "-pca", "PCA of the position vectors"}, axes, 270, position_scale),
                  "");
  }
  std::string out = html::element("div", " class=\"fig-row\"", row) +
                    html::element("p", " class=\"caption\"",
                                  "Similarity of the position vectors of positions i and j: cosine on a fixed "
                                  "&minus;1 to 1 scale, dot product on a scale symmetric around 0 up to its largest "
                                  "magnitude. Right: the positions on their first two principal components "
                                  "(colour = position, the grey line joins them in order). The values are in "
                                  "positional.json.");
  if (path && path->is_array() && !path->empty()) {
    // One line per position through its projections at each evaluation, oldest first.
    std::vector<double> steps;
    std::vector<std::vector<std::pair<double, double>>> tracks(final_points.size());
    for (const auto& snapshot : *path) {
      const auto points = points_of(member(snapshot, "points"));
      steps.push_back(number_at(snapshot, "step"));
      for (size_t p = 0; p < points.size() && p < tracks.size(); ++p) tracks[p].push_back(points[p]);
    }
    const std::string span = "step " + html::compact(steps.front()) + " to " + html::compact(steps.back());
    std::vector<charts::ScatterPath> lines;
    const double last = std::max<double>(1, static_cast<double>(tracks.size()) - 1);
    for (size_t p = 0; p < tracks.size(); ++p)
      lines.push_back({tracks[p], html::hex(html::viridis(static_cast<double>(p) / last)), 0.75, 1.6,
                       "position " + std::to_string(p) + ", " + span, true});
    // The labelled dots: each position at its last recorded evaluation.
    std::vector<std::pair<double, double>> last_points;
    for (const auto& track : tracks)
      last_points.push_back(track.empty() ? std::pair<double, double>(NAN, NAN) : track.back());
    out += figure(charts::scatter_chart(position_points(last_points), lines, {"pca-path", id + "-path", "Learned positions over training"},
                                        axes, 340, position_scale),
                  html::escape("The learned position vectors at each of " + std::to_string(steps.size()) +
                               " evaluations (" + span + "), projected on the final PCA axes: each line is one "
                               "position's path, from the open circle (first) to the labelled dot (last). The "
                               "points at every evaluation are in positional.json."));
  }
  return out;
}

// One value by distance (the RoPE kernel's score, the q/k scale): the line and its hover text
// "<distance label><d>: <value name> <v>", at the distances `keep` says.
charts::Series distance_line(const json& entry, const char* value_key, const std::string& value_name,
                             const std::string& distance_label, const std::string& colour,
                             const std::function<bool(double)>& keep = {}) {
  const std::vector<double> distance = numbers(member(entry, "distance"));
  const std::vector<double> value = numbers(member(entry, value_key));
  charts::Series out;
  out.name = value_name;
  out.colour = colour;
  out.markers = true;
  for (size_t k = 0; k < distance.size() && k < value.size(); ++k) {
    if (keep && !keep(distance[k])) continue;
    out.x.push_back(distance[k]);
    out.y.push_back(value[k]);
    out.tips.push_back(distance_label + html::compact(distance[k]) + ": " + value_name + " " + html::fixed(value[k], 4));
  }
  return out;
}

std::string kernel_block(const json& kernel, const std::string& colour, const std::string& id) {
  const double head_dim = number_at(kernel, "head_dim");
  const charts::Series series = distance_line(kernel, "score", "score", "distance ", colour);
  charts::Axes axes;
  axes.x_label = "relative distance between query and key positions";
  axes.y_label = "kernel score";
  axes.zero_line = true;
  const std::string chart =
      charts::line_chart({series}, {"rope-kernel", id + "-kernel", "RoPE relative kernel"}, axes, 760, 300);
  return figure(chart, html::escape("RoPE's relative kernel: the score a rotated query and key get as a function of "
                                    "their distance alone" +
                                    (std::isfinite(head_dim) ? " (head dimension " + html::compact(head_dim) + ")" : "") +
                                    "."));
}

// The values a scheme reports beside its maps (ALiBi's slopes, KERPLE's r1 and r2, FIRE's c
// and threshold, ...): every list of numbers in the run but those drawn.
std::vector<std::pair<std::string, std::vector<double>>> reported_values(const json& run) {
  static const std::vector<std::string> drawn = {"seed", "vectors", "path", "relative_kernel", "bias",
                                                 "bias_by_distance", "hooks", "content_score", "qk_scale"};
  std::vector<std::pair<std::string, std::vector<double>>> out;
  for (const auto& item : run.items())
    if (std::find(drawn.begin(), drawn.end(), item.key()) == drawn.end() && item.value().is_array())
      out.emplace_back(item.key(), numbers(&item.value()));
  return out;
}

// The bias of each head against the signed distance d = i - j, one line per head.
std::string bias_distance_chart(const json& by_distance, const std::string& id) {
  const std::vector<double> distance = numbers(member(by_distance, "distance"));
  const json* heads = member(by_distance, "heads");
  if (distance.empty() || !heads || !heads->is_array()) return "";
  std::vector<charts::Series> series;
  const double last = std::max<double>(1, static_cast<double>(heads->size()) - 1);
  for (size_t h = 0; h < heads->size(); ++h) {
    const std::vector<double> values = numbers(&(*heads)[h]);
    charts::Series line;
    line.name = "head " + std::to_string(h + 1);
    line.colour = html::hex(html::viridis(heads->size() == 1 ? 0.3 : 0.85 * static_cast<double>(h) / last));
    line.markers = true;
    for (size_t k = 0; k < distance.size() && k < values.size(); ++k) {
      line.x.push_back(distance[k]);
      line.y.push_back(values[k]);
      line.tips.push_back(line.name + ", d = " + html::compact(distance[k]) + ": bias " + html::fixed(values[k], 4));
    }
    series.push_back(std::move(line));
  }
  charts::Axes axes;
  axes.x_label = "signed distance d = i - j (query minus key; d > 0: the key is to the left)";
  axes.y_label = "score bias";
  axes.zero_line = true;
  return figure(charts::line_chart(series, {"bias-distance", id + "-distance", "Score bias against the distance"}, axes,
                                   760, 300),
                "Each head's bias as a function of the signed distance between query and key at the end of training "
                "(the mean over the pairs at that distance; a purely relative bias is the same for all of them).");
}

std::string bias_block(const json& run, const std::string& positional, bool causal, const std::string& id) {
  const std::vector<double> slopes = numbers(member(run, "slopes"));
  const json* bias = member(run, "bias");
  std::vector<std::vector<std::vector<double>>> heads;
  if (bias && bias->is_array())
    for (const auto& head : *bias) heads.push_back(matrix(&head));
  double lo = 0, hi = 0;
  for (const auto& head : heads)
    for (const auto& r : head)
      for (const double v : r)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  // Heads in rows of at most four maps, so many heads stay inside the page width.
  std::vector<std::vector<charts::Heatmap>> grid;
  for (size_t h = 0; h < heads.size(); ++h) {
    if (h % 4 == 0) grid.emplace_back();
    charts::Heatmap map;
    const std::string slope = h < slopes.size() ? ", slope " + html::compact(std::round(slopes[h] * 1e4) / 1e4) : "";
    map.heading = "head " + std::to_string(h + 1) + slope;
    map.values = heads[h];
    map.row_labels = map.col_labels = position_labels(heads[h].size());
    map.row_title = "query position i";
    map.col_title = "key position j";
    if (causal) map.masked = [](size_t i, size_t j) { return j > i; };
    grid.back().push_back(std::move(map));
  }
  std::string out;
  if (!grid.empty()) {
    const std::string what = positional == "alibi"
                                 ? "ALiBi adds <code>-slope &times; |i - j|</code> (by its direction) to the attention "
                                   "score of query i on key j"
                                 : html::escape(positional) + " adds this learned bias to the attention score of "
                                                              "query i on key j";
    const charts::ColourScale scale{charts::ColourScale::Kind::sequential, lo, hi, "score bias"};
    out += figure(charts::heatmap_grid(grid, scale, {"score-bias", id + "-bias", "Score bias per head"},
                                       "positional.json", cell_size(heads[0].size()), "masked (causal)"),
                  what + std::string(causal ? "; under the causal mask the keys after the query are masked." : ".") +
                      " The values are in positional.json.");
  }
  if (const json* by_distance = member(run, "bias_by_distance")) out += bias_distance_chart(*by_distance, id);
  // The reported values, one row per head.
  const auto values = reported_values(run);
  size_t rows_needed = 0;
  for (const auto& [key, list] : values) rows_needed = std::max(rows_needed, list.size());
  if (!values.empty()) {
    std::vector<std::string> header = {"head"};
    for (const auto& [key, list] : values) header.push_back(key);
    std::vector<std::vector<Cell>> rows;
    for (size_t h = 0; h < rows_needed; ++h) {
      std::vector<Cell> row = {number_cell(static_cast<double>(h + 1), 0)};
      for (const auto& [key, list] : values) row.push_back(h < list.size() ? number_cell(list[h], 6) : text_cell(""));
      rows.push_back(std::move(row));
    }
    out += table(header, rows, "slopes");
  }
  return out;
}
// The q/k scale (xpos): the factor on q_i . k_j against i - j, averaged over the pairs.
std::string qk_scale_block(const json& scale, const std::string& colour, bool causal, const std::string& id) {
  // Under the causal mask, the negative distances are keys the mask hides.
  const charts::Series series = distance_line(scale, "scale", "scale", "i - j = ", colour,
                                              [causal](double d) { return !causal || d >= 0; });
  charts::Axes axes;
  axes.x_label = "signed distance d = i - j (query minus key)";
  axes.y_label = "scale of q.k";
  const std::string chart =
      charts::line_chart({series}, {"qk-scale", id + "-qk-scale", "The scale of q.k by distance"}, axes, 760, 300);
  return figure(chart, "The factor the q/k scale puts on q_i . k_j at each distance, averaged over the rotated pairs "
                       "(xpos: zeta^((i - j) / gamma), a decay towards keys further left).");
}

// A content term (cope, fox, dape) on the study's first probe: per block and head, the
// term the scheme added to the attention logits.
std::string content_block(const json& blocks, bool causal, const std::string& id) {
  std::vector<std::vector<charts::Heatmap>> grid;
  double bound = 1e-9;
  for (size_t l = 0; l < blocks.size(); ++l) {
    grid.emplace_back();
    for (size_t h = 0; h < blocks[l].size(); ++h) {
      charts::Heatmap map;
      map.heading = "block " + std::to_string(l + 1) + ", head " + std::to_string(h + 1);
      map.values = matrix(&blocks[l][h]);
      for (const auto& row : map.values)
        for (const double v : row)
          if (std::isfinite(v)) bound = std::max(bound, std::abs(v));
      map.row_labels = map.col_labels = position_labels(map.values.size());
      map.row_title = "query position i";
      map.col_title = "key position j";
      if (causal) map.masked = [](size_t i, size_t j) { return j > i; };
      grid.back().push_back(std::move(map));
    }
  }
  if (grid.empty()) return "";
  const charts::ColourScale scale{charts::ColourScale::Kind::diverging, -bound, bound, "content term"};
  return figure(charts::heatmap_grid(grid, scale, {"content-score", id + "-content", "Content term on the first probe"},
                                     "positional.json", cell_size(grid[0][0].values.size()), "masked (causal)"),
                "The term the scheme computed from the content and added to each block's attention logits, on the "
                "study's first probe (report.probes): it depends on the tokens, unlike a position-only bias. The "
                "values are in positional.json.");
}

// The values a scheme reports when no bias table shows them (CoPE's embedding norms, FoX's
// gate biases, the length scale's s): one row per value list.
std::string values_block(const json& run) {
  const auto values = reported_values(run);
  if (values.empty()) return "";
  std::vector<std::vector<Cell>> rows;
  for (const auto& [key, list] : values) {
    std::string text;
    for (size_t i = 0; i < list.size(); ++i) text += (i ? ", " : "") + html::fixed(list[i], 4);
    rows.push_back({text_cell(key), text_cell(text)});
  }
  return table({"value", "per block (and head or row), in order"}, rows, "reported-values");
}
}  // namespace

std::string section_positional(const StudyView& view) {
  const auto& positional = view.inputs().positional;
  const std::string title = "Positional encodings";
  if (!positional)
    return section("positional", title, not_recorded("positional.json", "no positional encodings to show."));
  std::string content;
  for (size_t s = 0; s < view.schemes().size(); ++s) {
    const std::string& name = view.schemes()[s];
    const auto entry = positional->schemes.find(name);
    if (entry == positional->schemes.end()) continue;
    const std::vector<json>& runs = entry->second.runs;
    const bool causal = view.causal(name);
    const std::string kind = view.positional(name);
    std::string heading = "<span class=\"swatch\" style=\"background:" + html::escape(view.colour(name)) + "\"></span>" +
                          html::escape(name);
    std::string sub = kind.empty() ? "" : kind;
    if (causal) sub += sub.empty() ? "causal" : ", causal";
    if (runs.empty()) {
      content += html::element("h3", "", heading) + note("No run recorded.");
      continue;
    }
    const json& run = runs[0];
    sub += (sub.empty() ? "" : " \u00b7 ") + std::string("seed ") + display_at(run, "seed") +
           " (first of " + std::to_string(runs.size()) + ")";
    content += html::element("h3", "", heading + html::text_element("span", " class=\"sub\"", sub));
    const std::string id = "chart-positional-" + id_part(name, s);
    std::string body;
    if (const json* vectors = member(run, "vectors")) body += vectors_block(*vectors, member(run, "path"), id);
    if (const json* kernel = member(run, "relative_kernel")) body += kernel_block(*kernel, view.colour(name), id);
    if (const json* scale = member(run, "qk_scale")) body += qk_scale_block(*scale, view.colour(name), causal, id);
    const bool bias = member(run, "bias") || member(run, "slopes");
    if (bias) body += bias_block(run, kind, causal, id);
    if (const json* content = member(run, "content_score"); content && content->is_array())
      body += content_block(*content, causal, id);
    if (!bias) body += values_block(run);
    if (body.empty())
      body = note(kind == "none" ? "No positional encoding: the model sees the tokens as an unordered set, "
                                   "nothing to draw."
                                 : "Nothing recorded for this scheme's positions.");
    content += body;
  }
  if (content.empty()) content = note("positional.json holds none of this study's schemes.");
  return section("positional", title, content);
}

}  // namespace copytask::report
