#pragma once
// A study's results.json (docs/output-files.md): per arm its runs and their summaries over
// seeds, the arms' order, and which members are complete. One to_json, one from_json.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/run_record.h"

namespace copytask {

struct SchemeResults {
  std::string positional;  // model.positional
  bool causal = false;     // model.causal
  std::string task;        // task.kind ("" in a results.json from a copytask before it)
  nlohmann::json overrides;  // the arm's config overrides
  std::vector<RunRecord> runs;  // one per complete seed
  // What report/results.h's scheme_results_json derives from the runs ("test_exact":
  // summary, ..., "length_generalization", "length_generalization_rescaled"), kept as it
  // wrote them: derived, never a source.
  nlohmann::json summaries = nlohmann::json::object();
  std::string format;      // task.format ("" in a results.json from before it: placeholders)
};

struct StudyCompleteness {
  int64_t runs = 0, expected = 0;
  std::vector<std::string> missing;  // "rope/seed-2", ...
};

struct StudyResults {
  std::vector<std::string> scheme_order;           // the arms in the study's order
  std::map<std::string, SchemeResults> schemes;    // by arm name (the file calls an arm a scheme)
  StudyCompleteness complete;
};

void to_json(nlohmann::json& json, const SchemeResults& scheme);
void from_json(const nlohmann::json& json, SchemeResults& scheme);
void to_json(nlohmann::json& json, const StudyResults& results);
// Throws nlohmann::json::exception naming the key when a run lacks a field or a field is of
// another type.
void from_json(const nlohmann::json& json, StudyResults& results);

}  // namespace copytask
