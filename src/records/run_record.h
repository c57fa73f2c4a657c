#pragma once
// One trained member's final numbers: the body of its result.json (member_result.h) and
// one entry of results.json's "runs" (study_results.h). One to_json and one from_json.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace copytask {

struct RunRecord {
  int64_t seed = 0;
  double test_exact = 0, test_token = 0, train_exact = 0, train_token = 0;
  double final_loss = 0;  // eval-mode loss on the whole train split after the last step
  double test_loss = 0;
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
};

// {"1": 1.0, "2": 0.98, ...}: exact match by content length, lengths without examples left out.
nlohmann::json by_length_json(const std::vector<double>& by_length);
// Back from by_length_json's form: index k, -1 where the object has no "<k>".
std::vector<double> by_length_from_json(const nlohmann::json& json);

void to_json(nlohmann::json& json, const RunRecord& run);
// Throws nlohmann::json::exception naming the key when a field is missing or of another type.
void from_json(const nlohmann::json& json, RunRecord& run);

}  // namespace copytask
