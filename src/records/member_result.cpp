#include "records/member_result.h"

namespace copytask {

void to_json(nlohmann::json& json, const MemberResult& result) {
  json = result.run;
  json["training_step"] = result.training_step;
  json["scheme"] = result.arm;
  json["positional"] = result.positional;
  json["causal"] = result.causal;
  json["overrides"] = result.overrides;
  json["model"] = result.model;
  json["device"] = result.device;
  json["threads"] = result.threads;
  json["finished"] = result.finished;
}

void from_json(const nlohmann::json& json, MemberResult& result) {
  result.run = json.get<RunRecord>();
  result.arm = json.value("scheme", "");
  result.positional = json.value("positional", "");
  result.causal = json.value("causal", false);
  result.overrides = json.value("overrides", nlohmann::json());
  result.model = json.value("model", nlohmann::json());
  result.training_step = json.value("training_step", "");
  result.device = json.value("device", "");
  result.threads = json.value("threads", 1);
  result.finished = json.value("finished", "");
}

}  // namespace copytask
