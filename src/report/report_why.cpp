// The section on why a scheme copies or fails at each length (results.json's
// length_generalization, mean over seeds): the attention on each output's source, the
// entropy of the output rows, the accuracy by output position at the longest length, and
// the wrong outputs by kind, stacked.
#include <algorithm>
#include <cmath>
#include <map>

#include "report/report_charts.h"
#include "report/report_sections.h"

namespace copytask::report {
using nlohmann::json;

namespace {

// A scheme's length_generalization.by_length (the mean over seeds), or nullptr.
const json* lengths_of(const StudyView& view, const std::string& scheme, double* train_max_len) {
  const auto& results = view.inputs().results;
  if (!results) return nullptr;
  const auto entry = results->schemes.find(scheme);
  const json* lengths = entry == results->schemes.end() ? nullptr : member(entry->second.summaries, "length_generalization");
  if (!lengths) return nullptr;
  if (train_max_len) *train_max_len = number_at(*lengths, "train_max_len");
  const json* by_length = member(*lengths, "by_length");
  return by_length && by_length->is_object() ? by_length : nullptr;
}

// The task kind a scheme trained on ("copy" unless attention.json or its override says
// otherwise): the charts' captions name it.
std::string task_of(const StudyView& view, const std::string& scheme) {
  const json* schemes = member(view.inputs().attention, "schemes");
  const json* entry = schemes ? member(*schemes, scheme) : nullptr;
  const json* kind = entry ? member(*entry, "task") : nullptr;
  return kind && kind->is_string() ? kind->get<std::string>() : "copy";
}

// (k, entry) of a by_length object in increasing k.
std::vector<std::pair<int, const json*>> sorted_lengths(const json& by_length) {
  std::vector<std::pair<int, const json*>> out;
  for (const auto& item : by_length.items()) {
    try {
      out.emplace_back(std::stoi(item.key()), &item.value());
    } catch (const std::exception&) {
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

// The head that copies: the (block, head) with the most attention on the source, summed
// over the trained lengths. {-1, -1} when none is recorded.
std::pair<int, int> copying_head(const std::vector<std::pair<int, const json*>>& lengths, double train_max_len) {
  std::map<std::pair<int, int>, double> total;
  for (const auto& [k, entry] : lengths) {
    if (std::isfinite(train_max_len) && k > train_max_len) continue;
    const auto blocks = member(*entry, "source_attention");
    if (!blocks || !blocks->is_array()) continue;
    for (size_t b = 0; b < blocks->size(); ++b) {
      const std::vector<double> heads = numbers(&(*blocks)[b]);
      for (size_t h = 0; h < heads.size(); ++h)
        if (std::isfinite(heads[h])) total[{static_cast<int>(b), static_cast<int>(h)}] += heads[h];
    }
  }
  std::pair<int, int> best{-1, -1};
  double most = -1;
  for (const auto& [head, sum] : total)
    if (sum > most) most = sum, best = head;
  return best;
}

double at_head(const json& entry, const char* key, std::pair<int, int> head) {
  const auto matrix_values = matrix(member(entry, key));
  if (head.first < 0 || head.first >= static_cast<int>(matrix_values.size()) ||
      head.second >= static_cast<int>(matrix_values[head.first].size()))
    return NAN;
  return matrix_values[head.first][head.second];
}

double mean_over_heads(const json& entry, const char* key) {
  double sum = 0;
  int count = 0;
  for (const auto& heads : matrix(member(entry, key)))
    for (double v : heads)
      if (std::isfinite(v)) sum += v, ++count;
  return count ? sum / count : NAN;
}

charts::Series scheme_series(const StudyView& view, const std::string& name) {
  charts::Series s;
  s.name = name;
  s.colour = view.colour(name);
  s.markers = true;
  return s;
}

// Colours of the error kinds, in results.json's order.
const std::vector<std::pair<std::string, std::string>>& error_colours() {
  static const std::vector<std::pair<std::string, std::string>> colours = {
      {"stop", "#7f7f7f"}, {"neighbour", "#ff7f0e"}, {"content", "#1f77b4"}, {"noise", "#9467bd"}, {"absent", "#d62728"}};
  return colours;
}

// One arm's part of the section: its lines (attention on the source and entropy by length,
// accuracy by output at the longest length), its wrong outputs stacked by kind, and its row
// of the table.
struct ArmWhy {
  charts::Series attention, entropy, position;
  std::vector<charts::Series> stacks;  // one per error kind, stacked from the bottom
  std::vector<Cell> row;
  int longest = 0;  // the longest length evaluated
};

ArmWhy arm_why(const StudyView& view, const std::string& name, const std::vector<std::pair<int, const json*>>& lengths,
               const std::pair<int, int>& head, const std::string& task) {
  ArmWhy out;
  out.attention = scheme_series(view, name);
  out.entropy = scheme_series(view, name);
  out.position = scheme_series(view, name);
  for (const auto& [kind, colour] : error_colours()) {
    charts::Series s;
    s.name = kind;
    s.colour = colour;
    out.stacks.push_back(s);
  }
  for (const auto& [k, entry] : lengths) {
    const double on_source = at_head(*entry, "source_attention", head), spread = mean_over_heads(*entry, "entropy");
    if (std::isfinite(on_source)) {
      out.attention.x.push_back(k);
      out.attention.y.push_back(on_source);
      out.attention.tips.push_back(name + " (" + task + "), k = " + std::to_string(k) + ": weight on the source " +
                                   html::fixed(on_source, 3) + " (block " + std::to_string(head.first + 1) + ", head " +
                                   std::to_string(head.second + 1) + ")");
    }
    if (std::isfinite(spread)) {
      out.entropy.x.push_back(k);
      out.entropy.y.push_back(spread);
      out.entropy.tips.push_back(name + ", k = " + std::to_string(k) + ": mean entropy " + html::fixed(spread, 3) + " nats");
    }
    // The wrong outputs stacked: each kind's band from the kinds below it to itself.
    const json* errors = member(*entry, "errors");
    double below = 0;
    for (auto& s : out.stacks) {
      const double share = errors ? number_at(*errors, s.name) : NAN;
      if (!std::isfinite(share)) continue;
      s.x.push_back(k);
      s.y.push_back(below + share);
      s.band_lo.push_back(below);
      s.band_hi.push_back(below + share);
      s.tips.push_back(name + ", k = " + std::to_string(k) + ": " + s.name + " " + html::fixed(share, 3) +
                       " of the outputs");
      below += share;
    }
  }
  // Accuracy by output position at the longest length evaluated.
  const auto& [last_k, last] = lengths.back();
  out.longest = last_k;
  const std::vector<double> by_output = numbers(member(*last, "token_by_output"));
  for (size_t j = 0; j < by_output.size(); ++j) {
    if (!std::isfinite(by_output[j])) continue;
    out.position.x.push_back(static_cast<double>(j));
    out.position.y.push_back(by_output[j]);
    out.position.tips.push_back(name + ", k = " + std::to_string(last_k) + ", output " + std::to_string(j) + ": " +
                                html::fixed(by_output[j], 3) + " right");
  }
  out.row = {scheme_cell(view, name), text_cell(task),
             text_cell("block " + std::to_string(head.first + 1) + ", head " + std::to_string(head.second + 1)),
             number_cell(out.attention.y.empty() ? NAN : out.attention.y.front(), 3),
             number_cell(out.attention.y.empty() ? NAN : out.attention.y.back(), 3),
             number_cell(out.entropy.y.empty() ? NAN : out.entropy.y.back(), 3)};
  return out;
}

// An arm's small chart of its wrong outputs by kind (the index-th row of the table).
std::string error_figure(const std::vector<charts::Series>& stacks, const std::string& name, const std::string& task,
                         double train_max_len, size_t index) {
  charts::Axes error_axes;
  error_axes.x_label = "content length k";
  error_axes.whole_x = true;
  error_axes.y_label = "share of the outputs";
  error_axes.y_domain = std::make_pair(0.0, 1.0);
  if (std::isfinite(train_max_len)) error_axes.x_marker = std::make_pair(train_max_len + 0.5, "trained");
  return figure(charts::line_chart(stacks, {"errors", "chart-errors-" + id_part(name, index), "Wrong outputs by kind, " + name},
                                   error_axes, 340, 220),
                html::escape(name + " (" + task + ")"), "small-figure");
}

// The section from every arm's lines, rows and error charts.
std::string why_section_html(const std::vector<charts::Series>& attention_lines,
                             const std::vector<charts::Series>& entropy_lines,
                             const std::vector<charts::Series>& position_lines, const std::vector<std::vector<Cell>>& rows,
                             const std::string& error_figures, double train_max_len, int longest) {
  const std::string trained = std::isfinite(train_max_len) ? "trained up to k = " + html::compact(train_max_len) : "";
  charts::Axes attention_axes;
  attention_axes.x_label = "content length k";
  attention_axes.whole_x = true;
  attention_axes.y_label = "attention on the source";
  attention_axes.y_domain = std::make_pair(0.0, 1.0);
  if (!trained.empty()) attention_axes.x_marker = std::make_pair(train_max_len + 0.5, trained);
  charts::Axes entropy_axes = attention_axes;
  entropy_axes.y_label = "entropy of the output rows (nats)";
  entropy_axes.y_domain.reset();
  charts::Axes position_axes;
  position_axes.x_label = "output index j (k = " + std::to_string(longest) + ")";
  position_axes.whole_x = true;
  position_axes.y_label = "share right";
  position_axes.y_domain = std::make_pair(0.0, 1.0);
  if (std::isfinite(train_max_len))
    position_axes.x_marker = std::make_pair(train_max_len - 0.5, "j = " + html::compact(train_max_len));

  const std::string legend = html::element(
      "p", " class=\"intro\"",
      "Error kinds, stacked from the bottom: <b>stop</b> (the separator or padding: the output stopped early), "
      "<b>neighbour</b> (the content token next to the source), <b>content</b> (another content token of the "
      "input), <b>noise</b> (selective's noise token), <b>absent</b> (a token nowhere in the input). The stack's "
      "top is the share of wrong outputs at that length.");
  return section(
      "why", "Why a scheme copies or fails",
      figure(charts::line_chart(attention_lines, {"source-attention", "chart-source-attention", "Attention on the source"},
                                attention_axes, 1040, 320),
             "The attention weight each output row puts on the input token it must copy (its source under the "
             "task's kind), in the head that does it most at the trained lengths, mean over the examples of each "
             "length and over seeds.") +
          table({"scheme", "task", "copying head", "on source, shortest k", "on source, longest k",
                 "entropy, longest k"},
                rows, "why") +
          figure(charts::line_chart(position_lines, {"output-position", "chart-output-position",
                                                     "Accuracy by output position"},
                                    position_axes, 1040, 300),
                 "Share of right outputs at each output index j, at the longest length evaluated (k = " +
                     std::to_string(longest) +
                     "). Under reverse, output j reads 2j + 2 back at every k: the first outputs read distances "
                     "seen in training.") +
          figure(charts::line_chart(entropy_lines, {"entropy", "chart-entropy", "Attention entropy of the outputs"},
                                    entropy_axes, 1040, 300),
                 "The entropy of the output rows' attention, mean over blocks, heads and examples, and over seeds: "
                 "does attention spread out beyond the trained lengths?") +
          legend + html::element("div", " class=\"fig-row\"", error_figures));
}

}  // namespace

std::string section_why(const StudyView& view) {
  if (!view.inputs().results) return "";
  double train_max_len = NAN;
  std::vector<charts::Series> attention_lines, entropy_lines, position_lines;
  std::vector<std::vector<Cell>> rows;
  std::string error_figures;
  int longest = 0;
  for (const auto& name : view.schemes()) {
    const json* by_length = lengths_of(view, name, &train_max_len);
    if (!by_length) continue;
    const auto lengths = sorted_lengths(*by_length);
    if (lengths.empty() || !member(*lengths.back().second, "source_attention")) continue;  // from before these measurements
    const std::string task = task_of(view, name);
    ArmWhy arm = arm_why(view, name, lengths, copying_head(lengths, train_max_len), task);
    longest = std::max(longest, arm.longest);
    rows.push_back(std::move(arm.row));
    error_figures += error_figure(arm.stacks, name, task, train_max_len, rows.size());
    attention_lines.push_back(std::move(arm.attention));
    entropy_lines.push_back(std::move(arm.entropy));
    position_lines.push_back(std::move(arm.position));
  }
  if (attention_lines.empty()) return "";
  return why_section_html(attention_lines, entropy_lines, position_lines, rows, error_figures, train_max_len, longest);
}

}  // namespace copytask::report
