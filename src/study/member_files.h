#pragma once
// Where a study keeps each trained member: members/<scheme>/seed-<s>/, holding
//   result.json      its final numbers (written last: the member is complete when it exists)
//   metrics.jsonl    one line per evaluation
//   attention.json   {"inputs": [[T]], "probes": [{"attention": [layer][head][T][T], "output": [T]}]}
//   positional.json  its positional.json entry (model/positional_analysis.h)
//   model.pt         its parameters, a plain dict of tensors (train/checkpoint.h)
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace copytask {

std::string member_dir(const std::string& study_dir, const std::string& scheme, int64_t seed);

// True when the member's result.json exists and is valid JSON (a half-trained member has none).
bool member_complete(const std::string& study_dir, const std::string& scheme, int64_t seed);

// One of the member's JSON files ("result.json", "attention.json", ...); throws
// std::runtime_error naming the file when it is unreadable or not JSON.
nlohmann::json member_json_read(const std::string& study_dir, const std::string& scheme, int64_t seed,
                                const std::string& file);
inline nlohmann::json member_result_read(const std::string& study_dir, const std::string& scheme, int64_t seed) {
  return member_json_read(study_dir, scheme, seed, "result.json");
}

}  // namespace copytask
