#include "report/results.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "records/split_metrics.h"
#include "report/stats.h"

namespace copytask {

namespace {
// The measurements of why (records/scores.h) into a per-length entry, where measured.
void why_json(const LengthScores& s, nlohmann::json& entry) {
  if (!s.token_by_output.empty()) entry["token_by_output"] = s.token_by_output;
  if (!s.source_attention.empty()) entry["source_attention"] = s.source_attention;
  if (!s.entropy.empty()) entry["entropy"] = s.entropy;
  if (!s.errors.empty()) {
    nlohmann::json errors = nlohmann::json::object();
    for (const auto& [kind, share] : s.errors) errors[kind] = share;
    entry["errors"] = errors;
  }
}

// The element-wise mean of numbers, or of arrays or objects of the same shape (the
// measurements of why, over seeds), kept at 6 significant digits (measurement_rounded,
// records/scores.h); null where the values do not match in shape.
nlohmann::json mean_json(const std::vector<const nlohmann::json*>& values) {
  const nlohmann::json& first = *values.front();
  if (first.is_number()) {
    double sum = 0;
    for (const auto* v : values) {
      if (!v->is_number()) return nullptr;
      sum += v->get<double>();
    }
    return measurement_rounded(sum / static_cast<double>(values.size()));
  }
  nlohmann::json out = first.is_array() ? nlohmann::json::array() : nlohmann::json::object();
  if (first.is_array()) {
    for (size_t i = 0; i < first.size(); ++i) {
      std::vector<const nlohmann::json*> column;
      for (const auto* v : values) {
        if (!v->is_array() || v->size() != first.size()) return nullptr;
        column.push_back(&(*v)[i]);
      }
      out.push_back(mean_json(column));
    }
    return out;
  }
  if (!first.is_object()) return nullptr;
  for (const auto& item : first.items()) {
    std::vector<const nlohmann::json*> column;
    for (const auto* v : values) {
      if (!v->is_object() || !v->contains(item.key())) return nullptr;
      column.push_back(&v->at(item.key()));
    }
    out[item.key()] = mean_json(column);
  }
  return out;
}

const char* const kWhyKeys[] = {"token_by_output", "source_attention", "entropy", "errors"};
}  // namespace

nlohmann::json length_generalization_json(const std::vector<LengthScores>& scores, int64_t train_max_len,
                                          int64_t positions_trained) {
  nlohmann::json by_length = nlohmann::json::object();
  for (const auto& s : scores) {
    nlohmann::json one = {{"n", s.count}, {"context", s.context}, {"trained", s.trained}};
    one["exact"] = s.skipped.empty() ? nlohmann::json(s.exact) : nlohmann::json(nullptr);
    one["token"] = s.skipped.empty() ? nlohmann::json(s.token) : nlohmann::json(nullptr);
    if (!s.skipped.empty()) one["skipped"] = s.skipped;
    why_json(s, one);
    by_length[std::to_string(s.length)] = one;
  }
  return {{"train_max_len", train_max_len}, {"positions_trained", positions_trained}, {"by_length", by_length}};
}

nlohmann::json rescaled_length_json(const std::vector<LengthScores>& scores, double factor, int64_t train_max_len,
                                    int64_t positions_trained) {
  nlohmann::json out = length_generalization_json(scores, train_max_len, positions_trained);
  out["factor"] = factor;
  return out;
}

std::map<int64_t, LengthMetric> length_metrics_of(const std::vector<LengthScores>& scores) {
  std::map<int64_t, LengthMetric> out;
  for (const auto& s : scores)
    if (s.skipped.empty()) out[s.length] = {s.exact, s.token, s.source_attention, s.entropy};
  return out;
}

RunRecord run_record_of(int64_t seed, const SplitScores& train, const SplitScores& test) {
  RunRecord run;
  run.seed = seed;
  run.whole_split = split_metric_values(test, train);
  run.test_exact_by_length = test.exact_by_length;
  run.test_examples = test.examples;
  run.train_examples = train.examples;
  return run;
}

namespace {
// Per-length summaries over the runs' length_generalization_json entries.
nlohmann::json lengths_summary_json(const std::vector<const nlohmann::json*>& entries) {
  std::map<int64_t, std::pair<std::vector<double>, std::vector<double>>> by_length;  // k -> (exact, token)
  std::map<int64_t, int64_t> inputs;  // k -> the fewest inputs a run was evaluated on
  std::map<int64_t, std::map<std::string, std::vector<const nlohmann::json*>>> why;   // k -> key -> per run
  for (const nlohmann::json* entry : entries)
    for (const auto& item : entry->at("by_length").items()) {
      if (item.value().at("exact").is_null()) continue;
      const int64_t k = std::stoll(item.key());
      auto& [exact, token] = by_length[k];
      exact.push_back(item.value().at("exact").get<double>());
      token.push_back(item.value().at("token").get<double>());
      const int64_t n = item.value().value("n", int64_t{0});
      inputs[k] = inputs.count(k) ? std::min(inputs[k], n) : n;
      for (const char* key : kWhyKeys)
        if (item.value().contains(key)) why[k][key].push_back(&item.value().at(key));
    }
  nlohmann::json lengths = nlohmann::json::object();
  for (const auto& [k, values] : by_length) {
    // The trials behind the mean: one seed's inputs of each length. Under eval.inputs = shared
    // every seed reads those, so they count once, not once per seed; under per-seed each seed
    // has its own, so the count is the smaller one, and the interval on the wide side.
    nlohmann::json one = {{"exact", summary_json(summarize_share(values.first, inputs[k]))},
                          {"token", summary_json(summarize_share(values.second, inputs[k]))}};
    // The measurements of why: the mean over the runs that have them (every run, unless
    // some came from a copytask before them).
    for (const auto& [key, per_run] : why[k]) one[key] = mean_json(per_run);
    lengths[std::to_string(k)] = one;
  }
  const nlohmann::json& first = *entries.front();
  return {{"train_max_len", first.at("train_max_len")},
          {"positions_trained", first.value("positions_trained", nlohmann::json())},
          {"by_length", lengths}};
}
}  // namespace

nlohmann::json scheme_results_json(const std::vector<RunRecord>& runs) {
  nlohmann::json out;
  out["runs"] = nlohmann::json::array();
  // The trials behind each split's shares: its inputs, the same for every run (0 where a run's
  // record predates them: the t interval alone).
  int64_t test_inputs = runs.empty() ? 0 : runs.front().test_examples;
  int64_t train_inputs = runs.empty() ? 0 : runs.front().train_examples;
  for (const auto& run : runs) {
    test_inputs = std::min(test_inputs, run.test_examples);
    train_inputs = std::min(train_inputs, run.train_examples);
    out["runs"].push_back(run);
  }
  // Each whole-split metric of the list over the runs that have it, as the list says.
  for (const auto& metric : split_metrics()) {
    if (metric.summary == SplitSummary::none) continue;
    std::vector<double> values;
    for (const auto& run : runs)
      if (run.whole_split.count(metric.name)) values.push_back(run.whole_split.at(metric.name));
    if (values.empty() && !metric.required) continue;  // a required one is summarized even over no run (n 0)
    out[metric.name] = summary_json(metric.summary == SplitSummary::share
                                        ? summarize_share(values, metric.split == "test" ? test_inputs : train_inputs)
                                        : summarize(values, 0.0, std::numeric_limits<double>::infinity()));
  }

  // Length generalization, aggregated like test_exact over the runs evaluated at each length,
  // plain and under each of RoPE's rescalings.
  std::vector<const nlohmann::json*> plain;
  std::map<std::string, std::vector<const nlohmann::json*>> rescaled;
  for (const auto& run : runs) {
    if (!run.length_generalization.is_null()) plain.push_back(&run.length_generalization);
    if (run.length_generalization_rescaled.is_object())
      for (const auto& item : run.length_generalization_rescaled.items())
        if (item.value().contains("by_length")) rescaled[item.key()].push_back(&item.value());
  }
  if (!plain.empty()) out["length_generalization"] = lengths_summary_json(plain);
  for (const auto& [method, entries] : rescaled) {
    out["length_generalization_rescaled"][method] = lengths_summary_json(entries);
    out["length_generalization_rescaled"][method]["factor"] = entries.front()->at("factor");
  }
  return out;
}

std::vector<TableRow> results_table(const nlohmann::json& results, const std::vector<std::string>& order) {
  std::vector<TableRow> rows;
  for (const auto& name : order) {
    if (!results.contains("schemes") || !results["schemes"].contains(name)) continue;
    const auto& s = results["schemes"][name]["test_exact"];
    rows.push_back({name, s["n"].get<int64_t>(), s["mean"].get<double>(), s["std"].get<double>(),
                    s["min"].get<double>(), s["max"].get<double>()});
  }
  return rows;
}

std::string table_format(const std::vector<TableRow>& rows) {
  size_t width = 6;
  for (const auto& row : rows) width = std::max(width, row.scheme.size());
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %5s  %10s  %8s  %8s  %8s\n", static_cast<int>(width), "scheme", "seeds",
                "test exact", "std", "min", "max");
  std::string out = line;
  for (const auto& row : rows) {
    std::snprintf(line, sizeof line, "%-*s  %5lld  %10.4f  %8.4f  %8.4f  %8.4f\n", static_cast<int>(width),
                  row.scheme.c_str(), static_cast<long long>(row.n), row.mean, row.std, row.min, row.max);
    out += line;
  }
  return out;
}

std::string length_table_format(const nlohmann::json& results, const std::vector<std::string>& order) {
  std::vector<int64_t> lengths;
  int64_t train_max_len = 0;
  size_t width = 6;
  for (const auto& name : order) {
    if (!results.contains("schemes") || !results["schemes"].contains(name)) continue;
    const auto& scheme = results["schemes"][name];
    if (!scheme.contains("length_generalization")) continue;
    width = std::max(width, name.size() + (scheme.contains("length_generalization_rescaled") ? 7 : 0));
    train_max_len = scheme["length_generalization"]["train_max_len"].get<int64_t>();
    for (const auto& item : scheme["length_generalization"]["by_length"].items()) {
      const int64_t k = std::stoll(item.key());
      if (std::find(lengths.begin(), lengths.end(), k) == lengths.end()) lengths.push_back(k);
    }
  }
  if (lengths.empty()) return "";
  std::sort(lengths.begin(), lengths.end());
  int64_t positions_trained = 0;
  for (const auto& name : order)
    if (results.contains("schemes") && results["schemes"].contains(name) &&
        results["schemes"][name].contains("length_generalization") &&
        results["schemes"][name]["length_generalization"].value("positions_trained", nlohmann::json()).is_number())
      positions_trained = results["schemes"][name]["length_generalization"]["positions_trained"].get<int64_t>();
  std::string out = "length generalization: exact match over the copy by content length, mean over seeds "
                    "(* = a trained length, up to " + std::to_string(train_max_len) + ")\n";
  char cell[64];
  std::snprintf(cell, sizeof cell, "%-*s", static_cast<int>(width), "scheme");
  out += cell;
  for (int64_t k : lengths) {
    std::snprintf(cell, sizeof cell, " %5s", (std::to_string(k) + (k <= train_max_len ? "*" : "")).c_str());
    out += cell;
  }
  out += "\n";
  auto row = [&](const std::string& label, const nlohmann::json& by_length) {
    std::snprintf(cell, sizeof cell, "%-*s", static_cast<int>(width), label.c_str());
    out += cell;
    for (int64_t k : lengths) {
      const std::string key = std::to_string(k);
      if (by_length.contains(key)) std::snprintf(cell, sizeof cell, " %5.2f", by_length[key]["exact"]["mean"].get<double>());
      else std::snprintf(cell, sizeof cell, " %5s", "-");
      out += cell;
    }
    out += "\n";
  };
  for (const auto& name : order) {
    if (!results.contains("schemes") || !results["schemes"].contains(name)) continue;
    const auto& scheme = results["schemes"][name];
    if (!scheme.contains("length_generalization")) continue;
    row(name, scheme["length_generalization"]["by_length"]);
    if (scheme.contains("length_generalization_rescaled"))
      for (const auto& item : scheme["length_generalization_rescaled"].items())
        row(name + " (" + item.key() + ")", item.value()["by_length"]);
  }
  // A trained length whose copy did not fit the training context was only ever seen cut.
  const int64_t whole = (positions_trained - 1) / 2;
  if (positions_trained > 0 && whole < train_max_len)
    out += "(lengths " + std::to_string(whole + 1) + ".." + std::to_string(train_max_len) + " were trained with the copy cut at the context of " +
           std::to_string(positions_trained) + " tokens: their copy beyond it was never trained)\n";
  return out;
}

}  // namespace copytask
