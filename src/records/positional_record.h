#pragma once
// A study's positional.json: per arm its members' positional analyses, each member's entry
// as model/positional_analysis.h writes it (also the member's own positional.json).
// One to_json, one from_json.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace copytask {

struct PositionalScheme {
  std::string positional;  // model.positional
  bool causal = false;     // model.causal
  std::vector<nlohmann::json> runs;  // one member's analysis per complete seed, in seed order
};

struct PositionalStudy {
  int64_t context = 0;  // task.context: the positions the analyses cover
  std::map<std::string, PositionalScheme> schemes;  // by arm name
};

void to_json(nlohmann::json& json, const PositionalScheme& scheme);
void from_json(const nlohmann::json& json, PositionalScheme& scheme);
void to_json(nlohmann::json& json, const PositionalStudy& study);
// Throws nlohmann::json::exception naming the key when "schemes" is missing or a field is
// of another type.
void from_json(const nlohmann::json& json, PositionalStudy& study);

}  // namespace copytask
