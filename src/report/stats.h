#pragma once
// Summary statistics over seeds: n, mean, sample std, min, max and a 95% confidence
// interval of the mean (Student's t), clipped to the metric's range.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace copytask {

struct Summary {
  int64_t n = 0;
  double mean = 0, std = 0, min = 0, max = 0;
  std::optional<std::pair<double, double>> ci95;  // none for n < 2
};

// low/high clip the interval (accuracies live in [0, 1]).
Summary summarize(const std::vector<double>& values, double low = 0.0, double high = 1.0);

// The 0.975 quantile of Student's t with `degrees` degrees of freedom (exact table to 30,
// then the Cornish-Fisher expansion, error < 1e-4).
double student_t_975(int64_t degrees);

nlohmann::json summary_json(const Summary& summary);

}  // namespace copytask
