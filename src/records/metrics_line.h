#pragma once
// One line of metrics.jsonl: a member's numbers at one evaluation during training (a
// member's own file, and the study's concatenation of them). One to_json, one from_json.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace copytask {

// One content length k of the length-generalization sets at that evaluation.
struct LengthMetric {
  double exact = 0, token = 0;
  std::vector<std::vector<double>> source_attention;  // [block][head]; empty where not measured
  std::vector<std::vector<double>> entropy;           // [block][head]; empty where not measured
};

struct MetricsLine {
  int64_t step = 0;
  std::string scheme;  // the arm's name (the file contract calls an arm a scheme)
  int64_t seed = 0;
  double seconds = 0;  // since the batch's training started
  // The whole-split metrics at that evaluation by their metrics.jsonl names
  // (records/split_metrics.h: train_loss, train_exact, ..., test_token, and any added since).
  std::map<std::string, double> whole_split;
  std::vector<double> test_exact_by_length;  // index k; -1 where the test split has no example of length k
  std::map<int64_t, LengthMetric> length_generalization;  // k -> numbers; empty when not evaluated

  // A whole-split metric by its metrics.jsonl name; NaN where the line has none of it.
  double metric(const std::string& line_name) const;
};

void to_json(nlohmann::json& json, const MetricsLine& line);
// Throws nlohmann::json::exception naming the key when a field is missing or of another type.
void from_json(const nlohmann::json& json, MetricsLine& line);

}  // namespace copytask
