#include "records/split_metrics.h"

#include <algorithm>
#include <stdexcept>

namespace copytask {
namespace {

std::vector<SplitMetric>& metric_list() {
  // The six every record has had since the first files: the exact match and token accuracy
  // of both splits, the eval-mode loss on the whole train split after the last step (its
  // name in metrics.jsonl, written at every evaluation, is train_loss), and the test loss.
  static std::vector<SplitMetric> metrics = {
      {"test_exact", "", "test", "test exact", SplitSummary::share, true,
       [](const SplitScores& s) { return s.exact; }},
      {"test_token", "", "test", "test token", SplitSummary::share, true,
       [](const SplitScores& s) { return s.token; }},
      {"train_exact", "", "train", "train exact", SplitSummary::share, true,
       [](const SplitScores& s) { return s.exact; }},
      {"train_token", "", "train", "train token", SplitSummary::share, true,
       [](const SplitScores& s) { return s.token; }},
      {"final_loss", "train_loss", "train", "final loss", SplitSummary::nonnegative, true,
       [](const SplitScores& s) { return s.loss; }},
      {"test_loss", "", "test", "test loss", SplitSummary::none, true, [](const SplitScores& s) { return s.loss; }},
  };
  return metrics;
}

}  // namespace

const std::vector<SplitMetric>& split_metrics() { return metric_list(); }

SplitMetricScope::SplitMetricScope(SplitMetric metric) : name_(metric.name) {
  auto& list = metric_list();
  for (const auto& m : list)
    if (m.name == metric.name || m.line_key() == metric.line_key())
      throw std::logic_error("a whole-split metric named " + metric.name + " is already in the list");
  list.push_back(std::move(metric));
}

SplitMetricScope::~SplitMetricScope() {
  auto& list = metric_list();
  list.erase(std::remove_if(list.begin(), list.end(), [&](const SplitMetric& m) { return m.name == name_; }),
             list.end());
}

std::map<std::string, double> split_metric_values(const SplitScores& test, const SplitScores& train, bool line_names) {
  std::map<std::string, double> values;
  for (const auto& metric : split_metrics())
    values[line_names ? metric.line_key() : metric.name] = metric.of(metric.split == "test" ? test : train);
  return values;
}

}  // namespace copytask
