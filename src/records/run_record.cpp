#include "records/run_record.h"

#include <limits>
#include <string>

#include "records/split_metrics.h"

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
          {"steps", run.steps},
          {"seconds", run.seconds},
          {"batch_members", run.batch_members},
          {"test_exact_by_length", by_length_json(run.test_exact_by_length)}};
  for (const auto& [name, value] : run.whole_split) json[name] = value;
  if (run.test_examples > 0) json["test_examples"] = run.test_examples;
  if (run.train_examples > 0) json["train_examples"] = run.train_examples;
  if (!run.length_generalization.is_null()) json["length_generalization"] = run.length_generalization;
  if (!run.length_generalization_rescaled.is_null())
    json["length_generalization_rescaled"] = run.length_generalization_rescaled;
}

void from_json(const nlohmann::json& json, RunRecord& run) {
  run.seed = json.at("seed").get<int64_t>();
  run.whole_split.clear();
  for (const auto& metric : split_metrics())
    if (metric.required || json.contains(metric.name)) run.whole_split[metric.name] = json.at(metric.name).get<double>();
  run.steps = json.at("steps").get<int64_t>();
  run.seconds = json.at("seconds").get<double>();
  run.batch_members = json.at("batch_members").get<int64_t>();
  run.test_exact_by_length = by_length_from_json(json.at("test_exact_by_length"));
  run.test_examples = json.value("test_examples", int64_t{0});
  run.train_examples = json.value("train_examples", int64_t{0});
  run.length_generalization = json.value("length_generalization", nlohmann::json());
  run.length_generalization_rescaled = json.value("length_generalization_rescaled", nlohmann::json());
}

bool same_whole_split_numbers(const RunRecord& recorded, const RunRecord& now) {
  for (const auto& metric : split_metrics())
    if (recorded.whole_split.count(metric.name) &&
        !(now.whole_split.count(metric.name) && now.whole_split.at(metric.name) == recorded.whole_split.at(metric.name)))
      return false;
  return by_length_json(recorded.test_exact_by_length) == by_length_json(now.test_exact_by_length);
}

double RunRecord::metric(const std::string& name) const {
  const auto found = whole_split.find(name);
  return found == whole_split.end() ? std::numeric_limits<double>::quiet_NaN() : found->second;
}

}  // namespace copytask
