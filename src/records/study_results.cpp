#include "records/study_results.h"

namespace copytask {
namespace {
const char* const kSchemeKeys[] = {"positional", "causal", "task", "format", "overrides", "runs"};
}  // namespace

void to_json(nlohmann::json& json, const SchemeResults& scheme) {
  json = scheme.summaries.is_object() ? scheme.summaries : nlohmann::json::object();
  json["positional"] = scheme.positional;
  json["causal"] = scheme.causal;
  if (!scheme.task.empty()) json["task"] = scheme.task;
  if (!scheme.format.empty()) json["format"] = scheme.format;
  json["overrides"] = scheme.overrides;
  json["runs"] = scheme.runs;
}

void from_json(const nlohmann::json& json, SchemeResults& scheme) {
  scheme.positional = json.value("positional", "");
  scheme.causal = json.value("causal", false);
  scheme.task = json.value("task", "");
  scheme.format = json.value("format", "");
  scheme.overrides = json.value("overrides", nlohmann::json());
  scheme.runs = json.at("runs").get<std::vector<RunRecord>>();
  scheme.summaries = json;
  for (const char* key : kSchemeKeys) scheme.summaries.erase(key);
}

void to_json(nlohmann::json& json, const StudyResults& results) {
  json = {{"scheme_order", results.scheme_order},
          {"schemes", results.schemes},
          {"complete",
           {{"runs", results.complete.runs}, {"expected", results.complete.expected}, {"missing", results.complete.missing}}}};
}

void from_json(const nlohmann::json& json, StudyResults& results) {
  results.schemes = json.at("schemes").get<std::map<std::string, SchemeResults>>();
  results.scheme_order = json.value("scheme_order", std::vector<std::string>());
  const nlohmann::json complete = json.value("complete", nlohmann::json::object());
  results.complete.runs = complete.value("runs", int64_t{0});
  results.complete.expected = complete.value("expected", int64_t{0});
  results.complete.missing = complete.value("missing", std::vector<std::string>());
}

}  // namespace copytask
