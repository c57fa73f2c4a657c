// The attention section of the report: for every probe and scheme, the first seed's
// attention weights as a grid of layers x heads, tokens on the axes, the causal mask
// hatched, and the predicted output beside the probe.
#include <cmath>

#include "report/report_charts.h"
#include "report/report_sections.h"

namespace copytask::report {
using nlohmann::json;

namespace {
std::vector<int64_t> tokens_of(const json* row) {
  std::vector<int64_t> out;
  if (!row || !row->is_array()) return out;
  for (const auto& token : *row) out.push_back(token.is_number() ? token.get<int64_t>() : -1);
  return out;
}

// The copy-task target of an input (docs/design.md section 1): the input up to <copy>, then the
// content again, cut at the context end, then padding. Empty when there is no <copy>.
std::vector<int64_t> target_of(const std::vector<int64_t>& input, int64_t copy_token) {
  size_t copy_at = input.size();
  for (size_t i = 0; i < input.size(); ++i)
    if (input[i] == copy_token) {
      copy_at = i;
      break;
    }
  if (copy_at == input.size()) return {};
  std::vector<int64_t> target(input.size(), 0);
  for (size_t i = 0; i <= copy_at; ++i) target[i] = input[i];
  for (size_t m = 0; m < copy_at && copy_at + 1 + m < input.size(); ++m) target[copy_at + 1 + m] = input[m];
  return target;
}

// Tokens as spans; those differing from `expected` (when known) are marked wrong.
std::string token_spans(const StudyView& view, const std::vector<int64_t>& tokens,
                        const std::vector<int64_t>& expected) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool wrong = i < expected.size() && expected[i] != tokens[i];
    const std::string title = wrong ? "position " + std::to_string(i) + ": expected " + view.token_name(expected[i])
                                    : "position " + std::to_string(i);
    out += html::text_element("span", html::attr("class", wrong ? "tok wrong" : "tok") + html::attr("title", title),
                              view.token_name(tokens[i]));
  }
  return html::element("span", " class=\"tokens\"", out);
}

// attention[member][layer][head] as (layer -> head -> T x T); empty when malformed.
std::vector<std::vector<std::vector<std::vector<double>>>> first_member_maps(const json* attention) {
  std::vector<std::vector<std::vector<std::vector<double>>>> layers;
  if (!attention || !attention->is_array() || attention->empty() || !(*attention)[0].is_array()) return layers;
  for (const auto& layer : (*attention)[0]) {
    std::vector<std::vector<std::vector<double>>> heads;
    if (!layer.is_array()) return {};
    for (const auto& head : layer) heads.push_back(matrix(&head));
    layers.push_back(std::move(heads));
  }
  return layers;
}
}  // namespace

std::string section_attention(const StudyView& view) {
  const json& attention = view.inputs().attention;
  const std::string title = "Attention maps";
  if (attention.is_null()) return section("attention", title, not_recorded("attention.json", "no attention maps to show."));
  const json* probes = member(attention, "probes");
  const json* inputs = member(attention, "inputs");
  const json* schemes = member(attention, "schemes");
  if (!probes || !probes->is_array() || probes->empty())
    return section("attention", title, note("attention.json holds no probe (report.probes is empty)."));

  std::string content = html::element(
      "p", " class=\"intro\"",
      "Attention weights of each scheme's <em>first seed</em> on each probe input: one map per layer (rows) and "
      "head (columns); row = query position, column = key position, each row sums to 1. Tokens: "
      "<code>_</code> padding, <code>\u25B8</code> &lt;copy&gt;. Under a causal mask the cells above the diagonal "
      "are masked (hatched). The output is the model's prediction at every position; tokens that differ from the "
      "copy target are marked <span class=\"tok wrong\">red</span>. The weights themselves are in "
      "attention.json.");
  const charts::ColourScale scale{charts::ColourScale::Kind::sequential, 0, 1, "attention weight"};
  for (size_t p = 0; p < probes->size(); ++p) {
    const std::vector<int64_t> probe_input = inputs && inputs->is_array() && p < inputs->size() ? tokens_of(&(*inputs)[p])
                                                                                                : std::vector<int64_t>{};
    const std::vector<int64_t> probe_expected = target_of(probe_input, view.vocab_size() - 1);
    const std::vector<int64_t>& input = probe_input;
    const std::vector<int64_t>& expected = probe_expected;
    std::string probe_block =
        html::element("h3", "", "Probe " + std::to_string(p + 1) + ": " +
                                    html::text_element("code", "", display((*probes)[p]))) +
        html::element("p", " class=\"probe-line\"",
                      "input " + token_spans(view, input, {}) +
                          (expected.empty() ? "" : " &nbsp; target " + token_spans(view, expected, {})));
    std::string figures;
    for (size_t s = 0; s < view.schemes().size(); ++s) {
      const std::string& name = view.schemes()[s];
      const json* entry = schemes ? member(*schemes, name) : nullptr;
      if (!entry) continue;
      const json* per_probe = member(*entry, "probes");
      if (!per_probe || !per_probe->is_array() || p >= per_probe->size()) continue;
      const auto maps = first_member_maps(member((*per_probe)[p], "attention"));
      if (maps.empty()) continue;
      const std::vector<double> seeds = numbers(member(*entry, "seeds"));
      // The scheme's own input and target where its task differs (attention.json's schemes[name]):
      // selective adds noise, reverse reverses the target.
      std::vector<int64_t> input = probe_input, expected = probe_expected;
      const json* own_inputs = member(*entry, "inputs");
      const json* own_targets = member(*entry, "targets");
      if (own_inputs && own_inputs->is_array() && p < own_inputs->size()) input = tokens_of(&(*own_inputs)[p]);
      if (own_targets && own_targets->is_array() && p < own_targets->size()) expected = tokens_of(&(*own_targets)[p]);
      else if (own_inputs) expected = target_of(input, view.vocab_size() - 1);
      const json* kind = member(*entry, "task");
      const std::string task_text = kind && kind->is_string() && kind->get<std::string>() != "copy"
                                        ? " \u00b7 task " + kind->get<std::string>() : "";
      const bool own_probe = input != probe_input || expected != probe_expected;
      const json* outputs = member((*per_probe)[p], "output");
      const std::vector<int64_t> output =
          outputs && outputs->is_array() && !outputs->empty() ? tokens_of(&(*outputs)[0]) : std::vector<int64_t>{};
      const bool causal = view.causal(name);

      std::vector<std::string> labels;
      for (size_t i = 0; i < input.size(); ++i) labels.push_back(view.token_name(input[i]));
      std::vector<std::vector<charts::Heatmap>> grid;
      for (size_t l = 0; l < maps.size(); ++l) {
        std::vector<charts::Heatmap> row;
        for (size_t h = 0; h < maps[l].size(); ++h) {
          charts::Heatmap map;
          map.heading = "layer " + std::to_string(l + 1) + ", head " + std::to_string(h + 1);
          map.values = maps[l][h];
          map.row_labels = labels;
          map.col_labels = labels;
          map.row_title = "query";
          map.col_title = "key";
          if (causal) map.masked = [](size_t i, size_t j) { return j > i; };
          row.push_back(std::move(map));
        }
        grid.push_back(std::move(row));
      }
      const size_t positions = input.empty() ? maps[0][0].size() : input.size();
      const double cell = positions <= 12 ? 16 : std::max(6.0, 192.0 / static_cast<double>(positions));
      const std::string id = "chart-attention-" + std::to_string(p) + "-" + id_part(name, s);
      const std::string svg = charts::heatmap_grid(grid, scale, {"attention", id, "Attention maps of " + name},
                                                   "attention.json", cell, "masked (causal)");
      const std::string seed_text =
          seeds.empty() ? "first seed" : "seed " + html::compact(seeds[0]) + " (first of " + std::to_string(seeds.size()) + ")";
      const std::string caption =
          html::element("span", " class=\"fig-title\"",
                        "<span class=\"swatch\" style=\"background:" + html::escape(view.colour(name)) + "\"></span>" +
                            html::escape(name)) +
          html::escape(" \u00b7 " + seed_text + (causal ? " \u00b7 causal" : "") + task_text) +
          (own_probe ? "<br>input " + token_spans(view, input, {}) + "<br>target " + token_spans(view, expected, {}) : "") +
          "<br>output " + token_spans(view, output, expected);
      figures += figure(svg, caption, "attention-figure");
    }
    if (figures.empty()) figures = note("No scheme recorded attention for this probe.");
    content += html::element("div", " class=\"probe\"", probe_block + html::element("div", " class=\"fig-row\"", figures));
  }
  return section("attention", title, content);
}

}  // namespace copytask::report
