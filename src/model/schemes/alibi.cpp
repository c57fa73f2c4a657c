// alibi (Press et al. 2022): a bias that falls linearly with the distance, a slope per head.
// With d = i - j (query minus key; d > 0 when the key is to the left):
//   symmetric   bias[h, i, j] = -s_h |d|                          (the usual encoder form)
//   offset      bias[h, i, j] = -s_h (|d| - 0.5 [d > 0])          (Ruoss et al. 2023: keys to
//                                                                  the left get +0.5 s_h)
//   two-sided   bias[h, i, j] = -s_h d for d >= 0, -r_h (-d) for d < 0
//                                                                 (separate slopes for the
//                                                                  left and the right)
// Slopes: model.alibi_slopes, or the paper's rule; right slopes: model.alibi_right_slopes,
// or the same as the left. With model.alibi_learned they are parameters (their logs, so
// they stay positive), starting there. A symmetric bias cannot tell left from right.
#include <cmath>

#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {

std::vector<double> alibi_paper_slopes(int64_t heads) {
  auto power_of_two_slopes = [](int64_t n) {
    std::vector<double> slopes;
    const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
    for (int64_t h = 0; h < n; ++h) slopes.push_back(std::pow(start, static_cast<double>(h + 1)));
    return slopes;
  };
  const int64_t lower = int64_t{1} << static_cast<int64_t>(std::floor(std::log2(static_cast<double>(heads))));
  std::vector<double> slopes = power_of_two_slopes(lower);
  if (lower != heads) {
    std::vector<double> higher = power_of_two_slopes(2 * lower);
    for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < heads; i += 2) slopes.push_back(higher[i]);
  }
  return slopes;
}

namespace {

class Alibi : public PositionalScheme {
 public:
  Alibi(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape), direction_(options.alibi_direction), learned_(options.alibi_learned) {
    const std::vector<double> left = options.alibi_slopes.empty() ? alibi_paper_slopes(shape.heads) : options.alibi_slopes;
    const std::vector<double> right = options.alibi_right_slopes.empty() ? left : options.alibi_right_slopes;
    const bool two_sided = direction_ == "two-sided";
    auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
    if (learned_) {
      log_slopes_ = register_parameter("log_slopes", torch::tensor(left, f64).log().to(torch::kFloat32));  // (H)
      if (two_sided)
        log_right_slopes_ = register_parameter("log_right_slopes", torch::tensor(right, f64).log().to(torch::kFloat32));
    } else {
      slopes_ = torch::tensor(left, f64);                                     // (H)
      right_slopes_ = two_sided ? torch::tensor(right, f64) : slopes_;       // (H)
    }
  }
  const Hook* hook() const override { return &score_bias_hook(); }

  torch::Tensor table(int64_t positions) override {
    // Fixed slopes: a table made once on the CPU; learned ones: on their device every step.
    auto d = signed_distances(positions, learned_ ? log_slopes_.device() : torch::kCPU);  // (P, P) i - j
    auto left = d.clamp_min(0);                                              // d for keys to the left
    if (direction_ == "offset") left = torch::where(d > 0, d - 0.5, left);   // |d| - 0.5 on the left
    auto right = (-d).clamp_min(0);                                          // -d for keys to the right
    if (!learned_) {
      auto bias = -(slopes_.view({-1, 1, 1}) * left + right_slopes_.view({-1, 1, 1}) * right);  // (H, P, P)
      return bias.to(torch::kFloat32);
    }
    auto slopes = log_slopes_.exp().view({-1, 1, 1});                                                       // (H, 1, 1)
    auto right_slopes = log_right_slopes_.defined() ? log_right_slopes_.exp().view({-1, 1, 1}) : slopes;   // (H, 1, 1)
    return -(slopes * left.to(torch::kFloat32) + right_slopes * right.to(torch::kFloat32));  // (H, P, P)
  }

  std::vector<std::pair<std::string, std::vector<double>>> reported_values() override {
    std::vector<std::pair<std::string, std::vector<double>>> out;
    out.emplace_back("slopes", host_values(learned_ ? log_slopes_.exp() : slopes_));
    if (direction_ == "two-sided")
      out.emplace_back("right_slopes", host_values(learned_ ? log_right_slopes_.exp() : right_slopes_));
    return out;
  }

 private:
  std::string direction_;
  bool learned_;
  torch::Tensor slopes_, right_slopes_;          // fixed: (H) float64
  torch::Tensor log_slopes_, log_right_slopes_;  // learned: (H)
};

}  // namespace

SchemeEntry alibi_scheme() {
  return {"alibi",
          "a bias falling linearly with distance (model.alibi_slopes, model.alibi_direction, model.alibi_learned)",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<Alibi>(options, shape);
          }};
}

}  // namespace copytask
