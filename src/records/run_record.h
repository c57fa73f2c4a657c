#pragma once
// One trained member's final numbers: the body of its result.json (member_result.h) and
// one entry of results.json's "runs" (study_results.h). One to_json and one from_json.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace copytask {

struct RunRecord {
  int64_t seed = 0;
  // The whole-split metrics by name (records/split_metrics.h: test_exact, test_token,
  // train_exact, train_token, final_loss, test_loss, and any added since): every one of the
  // list the file has, the required ones always.
  std::map<std::string, double> whole_split;
  int64_t steps = 0;
  double seconds = 0;     // wall time of the batch of members this run trained in
  int64_t batch_members = 1;  // how many members trained together in that batch
  std::vector<double> test_exact_by_length;  // index k = content length; -1 = no such example
  // The splits' inputs (results.json's intervals take them as the trials behind a share);
  // 0 in a record written before they were kept.
  int64_t test_examples = 0, train_examples = 0;
  // {"train_max_len", "positions_trained", "by_length": {"<k>": {"n", "context", "trained",
  // "exact", "token"[, "skipped"], and the measurements of why}}} (report/results.h's
  // length_generalization_json); null when not evaluated.
  nlohmann::json length_generalization;
  // RoPE's rescalings (eval.rope_rescaling), for a member that rotates q and k:
  // {"<method>": length_generalization's form with "factor" (0 = per length), or
  // {"skipped": why}}; null when none was evaluated.
  nlohmann::json length_generalization_rescaled;

  // A whole-split metric by name; NaN where the record has none of it (an older file
  // without a metric added since).
  double metric(const std::string& name) const;
};

// {"1": 1.0, "2": 0.98, ...}: exact match by content length, lengths without examples left out.
nlohmann::json by_length_json(const std::vector<double>& by_length);
// Back from by_length_json's form: index k, -1 where the object has no "<k>".
std::vector<double> by_length_from_json(const nlohmann::json& json);

// Whether `now` gives the numbers `recorded` holds for the whole splits, to the bit: every
// metric of the list the recorded file has, and the test exact match by length (eval's
// check that a reloaded member is the one training recorded).
bool same_whole_split_numbers(const RunRecord& recorded, const RunRecord& now);

void to_json(nlohmann::json& json, const RunRecord& run);
// Throws nlohmann::json::exception naming the key when a field is missing or of another type.
void from_json(const nlohmann::json& json, RunRecord& run);

}  // namespace copytask
