#include "records/metrics_line.h"

#include "records/run_record.h"

namespace copytask {

void to_json(nlohmann::json& json, const MetricsLine& line) {
  json = {{"step", line.step},
          {"scheme", line.scheme},
          {"seed", line.seed},
          {"seconds", line.seconds},
          {"train_loss", line.train_loss},
          {"train_exact", line.train_exact},
          {"train_token", line.train_token},
          {"test_loss", line.test_loss},
          {"test_exact", line.test_exact},
          {"test_token", line.test_token},
          {"test_exact_by_length", by_length_json(line.test_exact_by_length)}};
  if (line.length_generalization.empty()) return;
  nlohmann::json lengths = nlohmann::json::object();
  for (const auto& [k, metric] : line.length_generalization) {
    nlohmann::json one = {{"exact", metric.exact}, {"token", metric.token}};
    if (!metric.source_attention.empty()) one["source_attention"] = metric.source_attention;
    if (!metric.entropy.empty()) one["entropy"] = metric.entropy;
    lengths[std::to_string(k)] = one;
  }
  json["length_generalization"] = lengths;
}

void from_json(const nlohmann::json& json, MetricsLine& line) {
  line.step = json.at("step").get<int64_t>();
  line.scheme = json.at("scheme").get<std::string>();
  line.seed = json.at("seed").get<int64_t>();
  line.seconds = json.at("seconds").get<double>();
  line.train_loss = json.at("train_loss").get<double>();
  line.train_exact = json.at("train_exact").get<double>();
  line.train_token = json.at("train_token").get<double>();
  line.test_loss = json.at("test_loss").get<double>();
  line.test_exact = json.at("test_exact").get<double>();
  line.test_token = json.at("test_token").get<double>();
  line.test_exact_by_length = by_length_from_json(json.at("test_exact_by_length"));
  line.length_generalization.clear();
  if (const auto lengths = json.find("length_generalization"); lengths != json.end())
    for (const auto& item : lengths->items()) {
      LengthMetric metric;
      metric.exact = item.value().at("exact").get<double>();
      metric.token = item.value().at("token").get<double>();
      metric.source_attention = item.value().value("source_attention", std::vector<std::vector<double>>());
      metric.entropy = item.value().value("entropy", std::vector<std::vector<double>>());
      line.length_generalization[std::stoll(item.key())] = metric;
    }
}

}  // namespace copytask
