#include "records/positional_record.h"

namespace copytask {

void to_json(nlohmann::json& json, const PositionalArm& scheme) {
  json = {{"positional", scheme.positional}, {"causal", scheme.causal}, {"runs", scheme.runs}};
}

void from_json(const nlohmann::json& json, PositionalArm& scheme) {
  scheme.positional = json.value("positional", "");
  scheme.causal = json.value("causal", false);
  scheme.runs = json.value("runs", std::vector<nlohmann::json>());
}

void to_json(nlohmann::json& json, const PositionalStudy& study) {
  json = {{"context", study.context}, {"schemes", study.schemes}};
}

void from_json(const nlohmann::json& json, PositionalStudy& study) {
  study.context = json.value("context", int64_t{0});
  study.schemes = json.at("schemes").get<std::map<std::string, PositionalArm>>();
}

}  // namespace copytask
