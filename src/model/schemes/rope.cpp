// rope (Su et al. 2021): q and k of each head are turned pair by pair, pair (2i, 2i+1) at
// position p by theta[p, i] = p * base^(-2i / R), R = the rotated dimensions, so q_m . k_n
// depends on m - n only. Partial rotary (as x-transformers): only the first R = 2 *
// floor(model.rope_fraction * Dh / 2) dimensions of each head turn, with frequencies over
// those; the others keep angle 0.
//
// Rescaled for evaluation beyond the trained context T0 (eval.rope_rescaling, factor s):
//   pi    theta[p, i] = p * f_i / s                                (position interpolation)
//   ntk   base' = base * s^(R / (R - 2))                           (NTK-aware; undefined for R = 2)
//   yarn  f'_i = (1 - g_i) f_i / s + g_i f_i,  g_i = clamp((T0 f_i / (2 pi) - 1) / (32 - 1), 0, 1),
//         and q and k each times 0.1 ln s + 1 (through the qk_scale hook)          (YaRN)
// with f_i = base^(-2i / R) (docs/schemes.md).
#include <algorithm>
#include <cmath>

#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {

int64_t rope_rotated_pairs(double fraction, int64_t head_dim) {
  return static_cast<int64_t>(std::floor(fraction * static_cast<double>(head_dim / 2) + 1e-9));
}

std::string rope_rescaling_problem(const RopeRescaling& rescaling, int64_t pairs) {
  if (rescaling.method == "ntk" && pairs < 2)
    return "the NTK-aware base s^(R / (R - 2)) is undefined with one rotated pair (R = 2)";
  return "";
}

torch::Tensor rope_angles(int64_t positions, int64_t head_dim, double base, int64_t pairs,
                          const RopeRescaling& rescaling) {
  auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const double s = rescaling.active() ? rescaling.factor : 1.0;
  if (rescaling.method == "ntk") base *= std::pow(s, static_cast<double>(2 * pairs) / static_cast<double>(2 * pairs - 2));
  auto position = torch::arange(positions, options).unsqueeze(1);                         // (P, 1)
  auto pair = torch::arange(0, 2 * pairs, 2, options);                                    // (R/2) = 2i
  auto frequency = torch::pow(base, -pair / static_cast<double>(2 * pairs));              // (R/2)
  if (rescaling.method == "pi") frequency = frequency / s;
  if (rescaling.method == "yarn") {
    // The share of each frequency kept as trained: 1 for those that turn many times over
    // the trained context, 0 (interpolated) for those that turn less than once.
    auto turns = static_cast<double>(rescaling.trained_context) * frequency / (2 * M_PI);  // (R/2)
    auto kept = ((turns - 1.0) / (32.0 - 1.0)).clamp(0.0, 1.0);                          // (R/2)
    frequency = (1 - kept) * frequency / s + kept * frequency;
  }
  auto angles = torch::zeros({positions, head_dim / 2}, options);                         // (P, Dh/2)
  angles.narrow(1, 0, pairs).copy_(position * frequency);
  return angles.to(torch::kFloat32);
}

torch::Tensor yarn_log_scale(int64_t positions, int64_t head_dim, double factor) {
  // q and k each times a = 0.1 ln s + 1: log-scale ln a for every position and pair, both.
  const double log_a = std::log(0.1 * std::log(factor) + 1.0);
  return torch::full({2, positions, head_dim / 2}, log_a, torch::kFloat32);  // (2, P, Dh/2)
}

namespace {

class Rope : public PositionalScheme {
 public:
  Rope(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape), base_(options.rope_base),
        pairs_(rope_rotated_pairs(options.rope_fraction, shape.head_dim())) {}
  std::vector<const Hook*> hooks() const override {
    if (rescaling_.method == "yarn") return {&rotation_hook(), &qk_scale_hook()};
    return {&rotation_hook()};
  }
  torch::Tensor table(int64_t positions) override { return table(rotation_hook(), positions); }  // the angles
  torch::Tensor table(const Hook& hook, int64_t positions) override {
    if (&hook == &qk_scale_hook()) return yarn_log_scale(positions, shape_.head_dim(), rescaling_.factor);
    return rope_angles(positions, shape_.head_dim(), base_, pairs_, rescaling_);
  }
  void rescale_for_evaluation(const RopeRescaling& rescaling) override {
    rescaling_ = rope_rescaling_problem(rescaling, pairs_).empty() ? rescaling : RopeRescaling{};
  }
  std::string rescaling_problem(const RopeRescaling& rescaling) const override {
    return rope_rescaling_problem(rescaling, pairs_);
  }

 private:
  double base_;
  int64_t pairs_;  // R / 2
  RopeRescaling rescaling_;
};

}  // namespace

std::string rope_shape_problem(const PositionalOptions& options, int64_t embed, int64_t heads) {
  const int64_t head_dim = embed / heads;
  if (head_dim % 2 != 0)
    return "needs an even head dimension, but model.embed / model.heads = " + std::to_string(head_dim) +
           "; change model.embed or model.heads";
  if (rope_rotated_pairs(options.rope_fraction, head_dim) < 1)
    return "model.rope_fraction = " + std::to_string(options.rope_fraction) + " rotates no pair of the " +
           std::to_string(head_dim) + " head dimensions; raise it to at least " +
           std::to_string(2.0 / static_cast<double>(head_dim));
  return "";
}

SchemeEntry rope_scheme() {
  return {"rope", "q and k turned by position (model.rope_base, model.rope_fraction)",
          [](const ModelConfig& model) { return rope_shape_problem(model.positional_options, model.embed, model.heads); },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<Rope>(options, shape);
          }};
}

}  // namespace copytask
