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

// One arm's entry (not model/positional.h's PositionalScheme: a name means one type in the
// whole program, which a unity build's batches would otherwise break).
struct PositionalArm {
  std::string positional;  // model.positional
  bool causal = false;     // model.causal
  std::vector<nlohmann::json> runs;  // one member's analysis per complete seed, in seed order
};

struct PositionalStudy {
  int64_t context = 0;  // task.context: the positions the analyses cover
  std::map<std::string, PositionalArm> schemes;  // by arm name
};

void to_json(nlohmann::json& json, const PositionalArm& scheme);
void from_json(const nlohmann::json& json, PositionalArm& scheme);
void to_json(nlohmann::json& json, const PositionalStudy& study);
// Throws nlohmann::json::exception naming the key when "schemes" is missing or a field is
// of another type.
void from_json(const nlohmann::json& json, PositionalStudy& study);

}  // namespace copytask
