#include "records/metrics_line.h"

#include "records/run_record.h"

#include <limits>

#include "records/split_metrics.h"

namespace copytask {

void to_json(nlohmann::json& json, const MetricsLine& line) {
  json = {{"step", line.step},
          {"scheme", line.scheme},
          {"seed", line.seed},
          {"seconds", line.seconds},
          {"test_exact_by_length", by_length_json(line.test_exact_by_length)}};
  for (const auto& [name, value] : line.whole_split) json[name] = value;
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
  line.whole_split.clear();
  for (const auto& metric : split_metrics()) {
    const std::string& key = metric.line_key();
    if (metric.required || json.contains(key)) line.whole_split[key] = json.at(key).get<double>();
  }
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

double MetricsLine::metric(const std::string& line_name) const {
  const auto found = whole_split.find(line_name);
  return found == whole_split.end() ? std::numeric_limits<double>::quiet_NaN() : found->second;
}

}  // namespace copytask
