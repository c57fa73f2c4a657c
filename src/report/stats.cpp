#include "report/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace copytask {

double student_t_975(int64_t degrees) {
  static const double table[] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
                                 2.2010,  2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
                                 2.0796,  2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  if (degrees < 1) throw std::invalid_argument("t quantile needs at least one degree of freedom");
  if (degrees <= 30) return table[degrees - 1];
  const double z = 1.959964, v = static_cast<double>(degrees);
  return z + (z * z * z + z) / (4 * v) + (5 * std::pow(z, 5) + 16 * std::pow(z, 3) + 3 * z) / (96 * v * v);
}

Summary summarize(const std::vector<double>& values, double low, double high) {
  Summary s;
  s.n = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(s.n);
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  if (s.n >= 2) {
    double squares = 0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(squares / static_cast<double>(s.n - 1));
    const double half_width = student_t_975(s.n - 1) * s.std / std::sqrt(static_cast<double>(s.n));
    s.ci95 = std::make_pair(std::max(low, s.mean - half_width), std::min(high, s.mean + half_width));
  }
  return s;
}

std::pair<double, double> wilson_95(double p, int64_t n) {
  if (n < 1) throw std::invalid_argument("a Wilson interval needs at least one trial");
  const double z = 1.959964, trials = static_cast<double>(n), z2 = z * z;
  const double center = (p + z2 / (2 * trials)) / (1 + z2 / trials);
  const double half = z / (1 + z2 / trials) * std::sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

Summary summarize_share(const std::vector<double>& values, int64_t trials) {
  Summary s = summarize(values, 0.0, 1.0);
  if (s.n == 0 || trials < 1) return s;
  const auto [low, high] = wilson_95(std::clamp(s.mean, 0.0, 1.0), trials);
  s.ci95 = s.ci95 ? std::make_pair(std::min(s.ci95->first, low), std::max(s.ci95->second, high)) : std::make_pair(low, high);
  return s;
}

nlohmann::json summary_json(const Summary& s) {
  nlohmann::json out = {{"n", s.n}, {"mean", s.mean}, {"std", s.std}, {"min", s.min}, {"max", s.max}};
  out["ci95"] = s.ci95 ? nlohmann::json::array({s.ci95->first, s.ci95->second}) : nlohmann::json(nullptr);
  return out;
}

}  // namespace copytask
