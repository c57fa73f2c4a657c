// The results sections of the report: the overview (with the warnings a reader must see
// first), the accuracy bars, the training curves and exact-match by content length.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "records/split_metrics.h"
#include "report/report_charts.h"
#include "report/report_sections.h"

namespace copytask::report {
using nlohmann::json;

namespace {
const SchemeResults* scheme_results(const StudyView& view, const std::string& scheme) {
  const auto& results = view.inputs().results;
  if (!results) return nullptr;
  const auto found = results->schemes.find(scheme);
  return found == results->schemes.end() ? nullptr : &found->second;
}

std::vector<std::string> schemes_with_results(const StudyView& view) {
  std::vector<std::string> out;
  for (const auto& name : view.schemes())
    if (scheme_results(view, name)) out.push_back(name);
  return out;
}

// The whole-split metrics results.json summarizes over seeds, but test exact (the summary
// table's own columns): each a column of their means.
std::vector<const SplitMetric*> summarized_beside_test_exact() {
  std::vector<const SplitMetric*> out;
  for (const auto& metric : split_metrics())
    if (metric.summary != SplitSummary::none && metric.name != "test_exact") out.push_back(&metric);
  return out;
}

struct Spread {
  double mean = NAN, lo = NAN, hi = NAN;
  size_t n = 0;
};
Spread spread_of(const std::vector<double>& values) {
  Spread s;
  double sum = 0;
  for (const double v : values) {
    if (!std::isfinite(v)) continue;
    sum += v;
    s.lo = s.n == 0 ? v : std::min(s.lo, v);
    s.hi = s.n == 0 ? v : std::max(s.hi, v);
    ++s.n;
  }
  if (s.n > 0) s.mean = sum / static_cast<double>(s.n);
  return s;
}
}  // namespace

// ---- Overview ----------------------------------------------------------------------------------

std::string section_overview(const StudyView& view) {
  const ReportInputs& in = view.inputs();
  std::string facts;
  auto fact = [&facts](std::string_view name, const std::string& value) {
    if (!value.empty())
      facts += html::element("div", " class=\"fact\"",
                             html::text_element("span", " class=\"fact-name\"", name) +
                                 html::text_element("span", " class=\"fact-value\"", value));
  };
  fact("schemes", std::to_string(view.schemes().size()));
  if (const json* train = member(in.config, "train")) {
    if (const json* seeds = member(*train, "seeds"); seeds && seeds->is_array())
      fact("seeds", std::to_string(seeds->size()) + " (" + display(*seeds) + ")");
    fact("steps", display_at(*train, "steps"));
  }
  if (const json* task = member(in.config, "task")) {
    fact("context", display_at(*task, "context"));
    fact("vocab", display_at(*task, "vocab_size"));
  }
  if (in.run) {
    fact("device", in.run->device);
    fact("status", in.run->status);
    fact("started", in.run->started);
  }

  std::string warnings;
  if (in.results) {
    const StudyCompleteness& complete = in.results->complete;
    const double runs = static_cast<double>(complete.runs), expected = static_cast<double>(complete.expected);
    if (!complete.missing.empty() || runs < expected) {
      std::string list;
      for (const auto& name : complete.missing) list += (list.empty() ? "" : ", ") + name;
      warnings += html::element(
          "p", " class=\"warning incomplete\"",
          html::escape("Incomplete study: " + html::compact(runs) + " of " + html::compact(expected) +
                       " runs recorded" + (list.empty() ? "." : "; missing: " + list + ".") +
                       " Means, spreads and intervals below cover the recorded runs only."));
    }
  }
  if (in.run && in.run->status != "ok") {
    std::string text = "run.json status: " + in.run->status;
    if (!in.run->error.empty()) text += " (" + in.run->error + ")";
    if (in.run->status == "running") text += ": the study had not finished when this report was written.";
    warnings += html::text_element("p", " class=\"warning status\"", text);
  }

  std::string command;
  if (in.run && !in.run->command.empty())
    command = html::element("pre", " class=\"command\"", html::escape(in.run->command));

  std::string toc;
  for (const auto& [id, title] : std::vector<std::pair<std::string, std::string>>{
           {"accuracy", "Accuracy"},
           {"curves", "Training curves"},
           {"by-length", "By content length"},
           {"attention", "Attention maps"},
           {"positional", "Positional encodings"},
           {"metadata", "Config and run"}})
    toc += html::element("li", "", html::element("a", html::attr("href", "#" + id), html::escape(title)));

  return html::element("header", "",
                       html::text_element("h1", "", "copytask study report") + command +
                           html::element("div", " class=\"facts\"", facts) + warnings +
                           html::element("nav", "", html::element("ul", "", toc)));
}

// ---- Accuracy -----------------------------------------------------------------------------------

std::string section_accuracy(const StudyView& view) {
  if (!view.inputs().results)
    return section("accuracy", "Accuracy", not_recorded("results.json", "no accuracy to show."));
  std::vector<charts::DotBar> bars;
  std::vector<std::vector<Cell>> summary_rows, run_rows;
  for (const auto& name : schemes_with_results(view)) {
    const SchemeResults& scheme = *scheme_results(view, name);
    const json* exact = member(scheme.summaries, "test_exact");
    const json empty = json::object();
    const json& s = exact ? *exact : empty;
    charts::DotBar bar;
    bar.name = name;
    bar.colour = view.colour(name);
    bar.mean = number_at(s, "mean");
    const std::vector<double> ci = numbers(member(s, "ci95"));
    if (ci.size() == 2 && std::isfinite(ci[0]) && std::isfinite(ci[1])) bar.ci95 = std::make_pair(ci[0], ci[1]);
    bar.tip = name + ": mean test exact-match " + html::fixed(bar.mean, 4) + " over " +
              html::compact(number_at(s, "n")) + " seed(s)" +
              (bar.ci95 ? ", 95% CI [" + html::fixed(ci[0], 4) + ", " + html::fixed(ci[1], 4) + "]" : "");
    for (const RunRecord& run : scheme.runs) {
      const double seed = static_cast<double>(run.seed);
      const double test_exact = run.metric("test_exact");
      bar.points.emplace_back(name + ", seed " + html::compact(seed) + ": test exact-match " + html::fixed(test_exact, 4),
                              test_exact);
      std::vector<Cell> row = {scheme_cell(view, name), number_cell(seed, 0)};
      for (const auto& metric : split_metrics()) row.push_back(number_cell(run.metric(metric.name), 4));
      for (Cell cell : {number_cell(static_cast<double>(run.steps), 0), number_cell(run.seconds, 1),
                        number_cell(static_cast<double>(run.batch_members), 0)})
        row.push_back(cell);
      run_rows.push_back(row);
    }
    bars.push_back(bar);
    auto mean_of = [&scheme](const char* key) {
      const json* summary = member(scheme.summaries, key);
      return summary ? number_at(*summary, "mean") : NAN;
    };
    std::vector<Cell> summary = {scheme_cell(view, name), text_cell(view.positional(name)),
                                 text_cell(view.causal(name) ? "yes" : "no"), text_cell(view.position_ids(name)),
                                 text_cell(view.format(name)), number_cell(number_at(s, "n"), 0),
                                 number_cell(bar.mean, 4), number_cell(number_at(s, "std"), 4),
                                 number_cell(number_at(s, "min"), 4), number_cell(number_at(s, "max"), 4),
                                 {bar.ci95 ? "[" + html::fixed(ci[0], 4) + ", " + html::fixed(ci[1], 4) + "]"
                                           : "<span class=\"na\">n/a</span>",
                                  true}};
    for (const auto& metric : summarized_beside_test_exact()) summary.push_back(number_cell(mean_of(metric->name.c_str()), 4));
    summary_rows.push_back(summary);
  }
  if (bars.empty()) return section("accuracy", "Accuracy", note("results.json holds no scheme yet."));
  // The columns of the whole-split metrics, from their list (records/split_metrics.h).
  std::vector<std::string> summary_heads = {"scheme", "positional", "causal", "position IDs", "format",
                                            "n",      "test exact", "std",    "min",          "max",
                                            "95% CI"};
  for (const auto& metric : summarized_beside_test_exact()) summary_heads.push_back(metric->label);
  std::vector<std::string> run_heads = {"scheme", "seed"};
  for (const auto& metric : split_metrics()) run_heads.push_back(metric.label);
  for (const char* head : {"steps", "seconds", "batch members"}) run_heads.push_back(head);
  const std::string chart = charts::dot_bar_chart(
      bars, {"accuracy", "chart-accuracy", "Test exact-match per scheme, every seed a dot"}, "test exact-match", 0, 1);
  return section(
      "accuracy", "Accuracy",
      figure(chart,
             "Test exact-match (the whole output right) per scheme. Bar: mean over seeds; dots: each seed; "
             "error bar: 95% Student-t interval of the mean (none with one seed). Hover for the numbers.") +
          table(summary_heads, summary_rows, "summary") +
          note("n seeds; test exact is their mean, with its standard deviation, range and 95% interval; the "
               "columns after it are means over the seeds.") +
          details("Every run (" + std::to_string(run_rows.size()) + ")", table(run_heads, run_rows, "runs")));
}

// ---- Training curves --------------------------------------------------------------------------

namespace {
// metrics.jsonl grouped as scheme -> step -> the seeds' values of `field`.
std::map<std::string, std::map<double, std::vector<double>>> metric_by_step(const StudyView& view,
                                                                           const std::string& field) {
  std::map<std::string, std::map<double, std::vector<double>>> out;
  for (const auto& line : view.inputs().metrics)
    out[line.scheme][static_cast<double>(line.step)].push_back(line.metric(field));
  return out;
}

// One line per scheme (the mean over seeds, a band from the lowest to the highest seed),
// each point's numbers on hover.
std::string curve_chart(const StudyView& view, const std::string& field, const std::string& what,
                        const charts::ChartMeta& meta, std::optional<std::pair<double, double>> y_domain,
                        int decimals, double height) {
  const auto grouped = metric_by_step(view, field);
  double max_step = 0;
  std::vector<charts::Series> series;
  for (const auto& name : view.schemes()) {
    const auto it = grouped.find(name);
    if (it == grouped.end()) continue;
    charts::Series s;
    s.name = name;
    s.colour = view.colour(name);
    for (const auto& [step, values] : it->second) {
      const Spread spread = spread_of(values);
      max_step = std::max(max_step, step);
      s.x.push_back(step);
      s.y.push_back(spread.mean);
      s.band_lo.push_back(spread.lo);
      s.band_hi.push_back(spread.hi);
      s.tips.push_back(name + ", step " + html::compact(step) + ": mean " + what + " " +
                       html::fixed(spread.mean, decimals) + " over " + std::to_string(spread.n) + " seed(s), min " +
                       html::fixed(spread.lo, decimals) + ", max " + html::fixed(spread.hi, decimals));
    }
    series.push_back(std::move(s));
  }
  charts::Axes axes;
  axes.x_label = "training step";
  axes.y_label = what;
  axes.x_domain = std::make_pair(0.0, html::nice_domain(0, std::max(max_step, 1.0), 8).second);
  axes.y_domain = y_domain;
  return charts::line_chart(series, meta, axes, 1040, height);
}
}  // namespace

std::string section_curves(const StudyView& view) {
  if (view.inputs().metrics.empty())
    return section("curves", "Training curves", not_recorded("metrics.jsonl", "no training curves to show."));
  const std::string exact = curve_chart(view, "test_exact", "test exact-match",
                                        {"curves", "chart-curves", "Test exact-match against training step"},
                                        std::make_pair(0.0, 1.0), 4, 380);
  const std::string loss = curve_chart(view, "train_loss", "train loss",
                                       {"loss", "chart-loss", "Train loss against training step"}, std::nullopt, 4, 280);
  return section("curves", "Training curves",
                 figure(exact,
                        "Test exact-match at each evaluation. Line: mean over seeds; band: the lowest to the highest "
                        "seed.") +
                     figure(loss,
                            "Train loss (cross-entropy) at each evaluation, mean over seeds, band from the lowest to "
                            "the highest seed.") +
                     note("The numbers of every seed at every evaluation are in metrics.jsonl."));
}

// ---- By content length ----------------------------------------------------------------------

namespace {
// scheme -> length -> the seeds' values, and every length seen.
struct ByLength {
  std::map<std::string, std::map<int, std::vector<double>>> values;
  std::set<int> lengths;
};

// Each run's (length, value) pairs (values_of), over every scheme with results; a value
// that is not finite (a skipped length) is left out.
ByLength collect_by_length(const StudyView& view,
                           const std::function<std::vector<std::pair<int, double>>(const RunRecord&)>& values_of) {
  ByLength out;
  for (const auto& name : schemes_with_results(view))
    for (const RunRecord& run : scheme_results(view, name)->runs)
      for (const auto& [length, value] : values_of(run)) {
        if (!std::isfinite(value)) continue;
        out.lengths.insert(length);
        out.values[name][length].push_back(value);
      }
  return out;
}

// The "exact" of each entry of a per-length object ({"by_length": {"<k>": {"exact", ...}}},
// a run's length_generalization or one rescaling of it); NaN where skipped.
std::vector<std::pair<int, double>> exact_by_length(const json* lengths) {
  std::vector<std::pair<int, double>> out;
  const json* by_length = lengths ? member(*lengths, "by_length") : nullptr;
  if (!by_length || !by_length->is_object()) return out;
  for (const auto& item : by_length->items()) {
    try {
      out.emplace_back(std::stoi(item.key()), number_at(item.value(), "exact"));
    } catch (const std::exception&) {
    }
  }
  return out;
}

// One line per scheme (mean over seeds; with `band`, from the lowest to the highest seed)
// and the table's rows, a column per length; hover text "<scheme>, k content token(s): mean <what> ...".
struct LengthLines {
  std::vector<charts::Series> series;
  std::vector<std::vector<Cell>> rows;
};
LengthLines length_lines(const StudyView& view, const ByLength& data, const std::string& what, bool band) {
  LengthLines out;
  for (const auto& name : view.schemes()) {
    const auto it = data.values.find(name);
    if (it == data.values.end()) continue;
    charts::Series s;
    s.name = name;
    s.colour = view.colour(name);
    s.markers = true;
    std::vector<Cell> row = {scheme_cell(view, name)};
    for (const int length : data.lengths) {
      const auto found = it->second.find(length);
      const Spread spread = found == it->second.end() ? Spread{} : spread_of(found->second);
      row.push_back(number_cell(spread.mean, 3));
      if (spread.n == 0) continue;
      s.x.push_back(length);
      s.y.push_back(spread.mean);
      std::string tip = name + ", " + std::to_string(length) + " content token(s): mean " + what + " " +
                        html::fixed(spread.mean, 4) + " over " + std::to_string(spread.n) + " seed(s)";
      if (band) {
        s.band_lo.push_back(spread.lo);
        s.band_hi.push_back(spread.hi);
        tip += ", min " + html::fixed(spread.lo, 4) + ", max " + html::fixed(spread.hi, 4);
      }
      s.tips.push_back(tip);
    }
    out.rows.push_back(std::move(row));
    out.series.push_back(std::move(s));
  }
  return out;
}

charts::Axes length_axes(const ByLength& data, const std::string& y_label) {
  charts::Axes axes;
  axes.x_label = "content length k (tokens before <copy>)";
  axes.whole_x = true;
  axes.y_label = y_label;
  axes.x_domain = std::make_pair(*data.lengths.begin() - 0.5, *data.lengths.rbegin() + 0.5);
  axes.y_domain = std::make_pair(0.0, 1.0);
  return axes;
}
}  // namespace

std::string section_by_length(const StudyView& view) {
  if (!view.inputs().results)
    return section("by-length", "Test exact-match by content length", not_recorded("results.json", "nothing to show."));
  const ByLength data = collect_by_length(view, [](const RunRecord& run) {
    std::vector<std::pair<int, double>> out;
    for (size_t k = 0; k < run.test_exact_by_length.size(); ++k)
      if (run.test_exact_by_length[k] >= 0) out.emplace_back(static_cast<int>(k), run.test_exact_by_length[k]);
    return out;
  });
  if (data.values.empty())
    return section("by-length", "Test exact-match by content length",
                   note("results.json has no test_exact_by_length for any run."));
  const LengthLines lines = length_lines(view, data, "test exact-match", /*band=*/false);
  std::vector<std::string> header = {"scheme"};
  for (const int length : data.lengths) header.push_back("k = " + std::to_string(length));
  const std::string chart =
      charts::line_chart(lines.series, {"by-length", "chart-by-length", "Test exact-match by content length"},
                         length_axes(data, "test exact-match"), 1040, 320);
  return section("by-length", "Test exact-match by content length",
                 figure(chart, "Test exact-match of the test examples with k content tokens, mean over seeds.") +
                     table(header, lines.rows, "by-length"));
}

// ---- Length generalization ------------------------------------------------------------------

namespace {
// RoPE's rescalings at evaluation (eval.rope_rescaling): for each scheme that has them, its
// plain line and one per method, a chart and rows "<scheme> (<method>)" under the plain row.
std::string rescalings_block(const StudyView& view, const ByLength& plain, const std::vector<std::string>& header,
                             const charts::Axes& axes) {
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"pi", "#d62728"}, {"ntk", "#2ca02c"}, {"yarn", "#9467bd"}};  // a colour per method
  std::map<std::string, ByLength> by_method;
  for (const auto& [method, colour] : methods) {
    ByLength data = collect_by_length(view, [&, method = method](const RunRecord& run) {
      return exact_by_length(member(run.length_generalization_rescaled, method));
    });
    if (!data.values.empty()) by_method[method] = std::move(data);
  }
  if (by_method.empty()) return "";
  std::vector<charts::Series> series;
  std::vector<std::vector<Cell>> rows;
  for (const auto& name : view.schemes()) {
    bool any = false;
    for (const auto& [method, data] : by_method) any = any || data.values.count(name);
    if (!any || !plain.values.count(name)) continue;
    auto add = [&](const ByLength& data, const std::string& label, const std::string& colour) {
      charts::Series s;
      s.name = label;
      s.colour = colour;
      s.markers = true;
      std::vector<Cell> row = {text_cell(label)};
      const auto& values = data.values.at(name);
      for (const int length : plain.lengths) {
        const auto found = values.find(length);
        const Spread spread = found == values.end() ? Spread{} : spread_of(found->second);
        row.push_back(number_cell(spread.mean, 3));
        if (spread.n == 0) continue;
        s.x.push_back(length);
        s.y.push_back(spread.mean);
        s.tips.push_back(label + ", " + std::to_string(length) + " content token(s): mean exact " +
                         html::fixed(spread.mean, 4) + " over " + std::to_string(spread.n) + " seed(s)");
      }
      series.push_back(std::move(s));
      rows.push_back(std::move(row));
    };
    add(plain, name, view.colour(name));
    for (const auto& [method, colour] : methods)
      if (by_method.count(method) && by_method[method].values.count(name))
        add(by_method[method], name + " (" + method + ")", colour);
  }
  if (series.empty()) return "";
  const std::string chart = charts::line_chart(
      series, {"rope-rescalings", "chart-rope-rescalings", "RoPE's rescalings at evaluation"}, axes, 1040, 300);
  return figure(chart,
                "The schemes that rotate q and k, evaluated again with RoPE's rescalings (eval.rope_rescaling): "
                "pi (position interpolation), ntk (NTK-aware base), yarn (YaRN), each with eval.rope_factor (0: the "
                "evaluated context over the trained one, per length). Mean over seeds.") +
         table(header, rows, "rope-rescalings");
}
}  // namespace

std::string section_length_generalization(const StudyView& view) {
  if (!view.inputs().results) return "";
  double train_max_len = NAN;
  const ByLength data = collect_by_length(view, [&](const RunRecord& run) {
    if (run.length_generalization.is_object()) train_max_len = number_at(run.length_generalization, "train_max_len");
    return exact_by_length(&run.length_generalization);  // NaN where skipped (a learned table's rows)
  });
  // Only studies that asked for it (eval.max_len) have this section.
  if (data.values.empty()) return "";
  const LengthLines lines = length_lines(view, data, "exact match over the copy", /*band=*/true);
  std::vector<std::string> header = {"scheme"};
  for (const int length : data.lengths)
    header.push_back("k = " + std::to_string(length) + (std::isfinite(train_max_len) && length <= train_max_len ? "*" : ""));
  charts::Axes axes = length_axes(data, "exact match over the copy");
  if (std::isfinite(train_max_len))
    axes.x_marker = std::make_pair(train_max_len + 0.5, "trained up to k = " + html::compact(train_max_len));
  const std::string chart = charts::line_chart(
      lines.series, {"length-generalization", "chart-length-generalization", "Exact match against content length"},
      axes, 1040, 340);
  return section("length-generalization", "Length generalization",
                 figure(chart,
                        "Exact match over the copy's k tokens at each content length, beyond the trained lengths "
                        "(right of the dashed rule) too; each length in a context of max(T, 2k + 1). Line: mean over "
                        "seeds; band: the lowest to the highest seed.") +
                     table(header, lines.rows, "length-generalization") +
                     note("* = a trained length. A learned table is drawn only as far as its rows reach.") +
                     rescalings_block(view, data, header, axes));
}

}  // namespace copytask::report
