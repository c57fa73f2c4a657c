#pragma once
// results.json's numbers (docs/design.md section 5): a member's record from its scores, and
// per scheme aggregated over seeds (records/ holds the files' typed structs).
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/metrics_line.h"
#include "records/run_record.h"
#include "records/scores.h"

namespace copytask {

// One member's per-length scores: by_length keyed by k; exact and token null where skipped.
nlohmann::json length_generalization_json(const std::vector<LengthScores>& scores, int64_t train_max_len,
                                          int64_t positions_trained);
// One member's lengths under one of RoPE's rescalings: length_generalization_json's entry and
// "factor" (0 = per length: the evaluated context over the trained one).
nlohmann::json rescaled_length_json(const std::vector<LengthScores>& scores, double factor, int64_t train_max_len,
                                    int64_t positions_trained);
// The per-length numbers metrics.jsonl records at every evaluation, skipped lengths left out.
std::map<int64_t, LengthMetric> length_metrics_of(const std::vector<LengthScores>& scores);

// A member's record from its evaluation on the train and test splits (steps, seconds and
// batch_members left at their defaults for the caller).
RunRecord run_record_of(int64_t seed, const SplitScores& train, const SplitScores& test);

// {"runs": [...], "test_exact": summary, "test_token": ..., "train_exact": ..., "train_token": ...,
//  "final_loss": summary (not clipped)}, and where the runs were evaluated beyond their
// lengths "length_generalization": {"train_max_len": N, "by_length": {"<k>": {"exact":
// summary, "token": summary}}} over the runs that could be evaluated at k; and the same per
// rescaling, "length_generalization_rescaled": {"<method>": {"factor", ...}}.
nlohmann::json scheme_results_json(const std::vector<RunRecord>& runs);

// One row of the comparison table printed at the end of a study.
struct TableRow {
  std::string scheme;
  int64_t n = 0;
  double mean = 0, std = 0, min = 0, max = 0;
};
// Rows from a results.json, in the given scheme order.
std::vector<TableRow> results_table(const nlohmann::json& results, const std::vector<std::string>& order);
std::string table_format(const std::vector<TableRow>& rows);

// Length generalization as a table, one row per scheme, one column per content length: the
// mean over seeds of exact match over the copy ("-" where no run could be evaluated; a
// trained length is marked *), and a row "<scheme> (<method>)" under it per RoPE rescaling
// evaluated. "" when no scheme of results has length_generalization.
std::string length_table_format(const nlohmann::json& results, const std::vector<std::string>& order);

}  // namespace copytask
