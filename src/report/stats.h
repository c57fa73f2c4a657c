#pragma once
// Summary statistics over seeds: n, mean, sample std, min, max and a 95% confidence
// interval of the mean (Student's t), clipped to the metric's range; for a share, widened by
// the finite test's binomial interval (summarize_share).
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

// A share's summary over seeds (an exact match, a token accuracy) whose interval cannot
// overstate: Student's t over the seeds, widened to cover the Wilson score interval of the
// mean as a share of `trials` independent outcomes, the distinct inputs behind it (the same
// inputs for every seed count once). So seeds that agree, or one seed alone, still carry the
// finite test's uncertainty: five seeds at 1.00 on the same 100 inputs give [0.963, 1.00],
// not [1.00, 1.00]. trials 0 (unknown): the t interval alone.
Summary summarize_share(const std::vector<double>& values, int64_t trials);

// The Wilson score 95% interval of a proportion p observed over n trials (n >= 1).
std::pair<double, double> wilson_95(double p, int64_t n);

// The 0.975 quantile of Student's t with `degrees` degrees of freedom (exact table to 30,
// then the Cornish-Fisher expansion, error < 1e-4).
double student_t_975(int64_t degrees);

nlohmann::json summary_json(const Summary& summary);

}  // namespace copytask
