#include "records/run_record.h"

#include <string>

namespace copytask {

nlohmann::json by_length_json(const std::vector<double>& by_length) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t k = 0; k < by_length.size(); ++k)
    if (by_length[k] >= 0) out[std::to_string(k)] = by_length[k];
  return out;
}

std::vector<double> by_length_from_json(const nlohmann::json& json) {
  std::vector<double> out;
  for (const auto& item : json.items()) {
    const size_t k = std::stoul(item.key());
    if (out.size() <= k) out.resize(k + 1, -1.0);
    out[k] = item.value().get<double>();
  }
  return out;
}

void to_json(nlohmann::json& json, const RunRecord& run) {
  json = {{"seed", run.seed},
          {"test_exact", run.test_exact},
          {"test_token", run.test_token},
          {"train_exact", run.train_exact},
          {"train_token", run.train_token},
          {"final_loss", run.final_loss},
          {"test_loss", run.test_loss},
          {"steps", run.steps},
          {"seconds", run.seconds},
          {"batch_members", run.batch_members},
          {"test_exact_by_length", by_length_json(run.test_exact_by_length)}};
  if (run.test_examples > 0) json["test_examples"] = run.test_examples;
  if (run.train_examples > 0) json["train_examples"] = run.train_examples;
  if (!run.length_generalization.is_null()) json["length_generalization"] = run.length_generalization;
  if (!run.length_generalization_rescaled.is_null())
    json["length_generalization_rescaled"] = run.length_generalization_rescaled;
}

void from_json(const nlohmann::json& json, RunRecord& run) {
  run.seed = json.at("seed").get<int64_t>();
  run.test_exact = json.at("test_exact").get<double>();
  run.test_token = json.at("test_token").get<double>();
  run.train_exact = json.at("train_exact").get<double>();
  run.train_token = json.at("train_token").get<double>();
  run.final_loss = json.at("final_loss").get<double>();
  run.test_loss = json.at("test_loss").get<double>();
  run.steps = json.at("steps").get<int64_t>();
  run.seconds = json.at("seconds").get<double>();
  run.batch_members = json.at("batch_members").get<int64_t>();
  run.test_exact_by_length = by_length_from_json(json.at("test_exact_by_length"));
  run.test_examples = json.value("test_examples", int64_t{0});
  run.train_examples = json.value("train_examples", int64_t{0});
  run.length_generalization = json.value("length_generalization", nlohmann::json());
  run.length_generalization_rescaled = json.value("length_generalization_rescaled", nlohmann::json());
}

}  // namespace copytask
