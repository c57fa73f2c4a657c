#pragma once
// A member's result.json (study/member_files.h): its final numbers and what a reader needs
// to know what trained (its arm, scheme, mask, model config, device). Written last: the
// member is complete when it exists.
#include <string>

#include <nlohmann/json.hpp>

#include "records/run_record.h"

namespace copytask {

struct MemberResult {
  RunRecord run;              // its numbers, at the top level of the file
  std::string arm;            // the arm's name, "scheme" in the file (the file contract calls an arm a scheme)
  std::string positional;     // model.positional
  bool causal = false;        // model.causal
  nlohmann::json overrides;   // the arm's config overrides, as the study's config gave them
  nlohmann::json model;       // the resolved "model" config: what a reader needs to rebuild it
  std::string training_step;  // "fused CPU", "fused GPU, CUDA graph", "fused GPU", "CUDA graph" or "autograd"
  std::string device;         // "cpu", "cuda:0"
  int threads = 1;
  std::string finished;       // ISO 8601 UTC
};

void to_json(nlohmann::json& json, const MemberResult& result);
// Throws nlohmann::json::exception naming the key when one of the run's fields is missing;
// the descriptive fields default when absent (a result.json from a copytask before them).
void from_json(const nlohmann::json& json, MemberResult& result);

}  // namespace copytask
