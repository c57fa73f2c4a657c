#include "records/results_csv.h"

#include <cmath>
#include <utility>

#include "records/split_metrics.h"

namespace copytask {
namespace {

// The per-length rows of one length_generalization entry ({"by_length": {"<k>": {"exact",
// "token", ...}}}), exact and token under the given metric names; null (skipped) lengths left out.
void length_rows(const nlohmann::json& entry, const std::string& exact_name, const std::string& token_name,
                 const TidyRow& base, std::vector<TidyRow>& rows) {
  if (!entry.is_object() || !entry.contains("by_length")) return;
  for (const auto& item : entry.at("by_length").items()) {
    TidyRow row = base;
    row.length = std::stoll(item.key());
    const std::pair<const char*, const std::string*> metrics[] = {{"exact", &exact_name}, {"token", &token_name}};
    for (const auto& [key, name] : metrics) {
      const auto value = item.value().find(key);
      if (value == item.value().end() || !value->is_number()) continue;
      row.metric = *name;
      row.value = value->get<double>();
      rows.push_back(row);
    }
  }
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::vector<TidyRow> results_tidy_rows(const StudyResults& results) {
  std::vector<TidyRow> rows;
  for (const auto& arm : results.scheme_order) {
    const auto found = results.schemes.find(arm);
    if (found == results.schemes.end()) continue;
    const SchemeResults& scheme = found->second;
    for (const RunRecord& run : scheme.runs) {
      TidyRow base;
      base.arm = arm;
      base.scheme = scheme.positional;
      base.causal = scheme.causal;
      base.seed = run.seed;
      base.task = scheme.task;
      for (const auto& metric : split_metrics()) {  // in the list's order; those the record has
        if (!run.whole_split.count(metric.name)) continue;
        TidyRow row = base;
        row.metric = metric.name;
        row.value = run.whole_split.at(metric.name);
        rows.push_back(row);
      }
      for (size_t k = 0; k < run.test_exact_by_length.size(); ++k) {
        if (run.test_exact_by_length[k] < 0) continue;  // no test example of that length
        TidyRow row = base;
        row.length = static_cast<int64_t>(k);
        row.metric = "test_exact_by_length";
        row.value = run.test_exact_by_length[k];
        rows.push_back(row);
      }
      length_rows(run.length_generalization, "length_exact", "length_token", base, rows);
      if (run.length_generalization_rescaled.is_object())
        for (const auto& item : run.length_generalization_rescaled.items())
          length_rows(item.value(), "length_exact_" + item.key(), "length_token_" + item.key(), base, rows);
    }
  }
  return rows;
}

std::string results_csv(const std::vector<TidyRow>& rows) {
  std::string out = std::string(kResultsCsvHeader) + "\n";
  for (const TidyRow& row : rows) {
    out += csv_field(row.arm) + "," + csv_field(row.scheme) + "," + (row.causal ? "true" : "false") + "," +
           std::to_string(row.seed) + "," + csv_field(row.task) + "," +
           (row.length < 0 ? std::string() : std::to_string(row.length)) + "," + csv_field(row.metric) + "," +
           (std::isfinite(row.value) ? nlohmann::json(row.value).dump() : std::string()) + "\n";
  }
  return out;
}

}  // namespace copytask
