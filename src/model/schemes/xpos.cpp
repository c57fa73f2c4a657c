// xpos (Sun et al. 2022, "A Length-Extrapolatable Transformer"): RoPE (rope.cpp: model.rope_base,
// model.rope_fraction) whose q_i . k_j of each rotated pair r is also scaled by
//   zeta_r^((i - j) / gamma),   zeta_r = (2r / R + 0.4) / 1.4,   gamma = model.xpos_scale_base
// (R the rotated dimensions; pairs that do not rotate are not scaled). zeta_r < 1, so the
// product decays with the distance to keys on the left; for keys on the right (j > i) it
// would grow without bound, so xpos is defined with the causal mask only (refused without).
// Two hooks: the rotation's angles, and the qk_scale's log-scales (2, P, Dh/2),
//   u_q[p, r] = ((p - c) / gamma) ln zeta_r,   u_k[p, r] = -u_q[p, r],   c = floor(P / 2)
// (the centre c cancels in q_i . k_j; it keeps exp(u) in float range over long contexts).
// No parameters. Under YaRN's rescaling (evaluation) the temperature adds to both.
#include <cmath>

#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {
namespace {

class XPos : public PositionalScheme {
 public:
  XPos(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape), base_(options.rope_base), gamma_(options.xpos_scale_base),
        pairs_(rope_rotated_pairs(options.rope_fraction, shape.head_dim())) {}
  std::vector<const Hook*> hooks() const override { return {&rotation_hook(), &qk_scale_hook()}; }
  torch::Tensor table(int64_t positions) override { return table(rotation_hook(), positions); }  // the angles
  torch::Tensor table(const Hook& hook, int64_t positions) override {
    if (&hook == &rotation_hook()) return rope_angles(positions, shape_.head_dim(), base_, pairs_, rescaling_);
    auto options = torch::TensorOptions().dtype(torch::kFloat64);
    auto r = torch::arange(pairs_, options);                                                     // (R/2)
    auto log_zeta = ((2 * r / static_cast<double>(2 * pairs_) + 0.4) / 1.4).log();              // (R/2)
    auto offset = (torch::arange(positions, options) - static_cast<double>(positions / 2)) / gamma_;  // (P) (p - c) / gamma
    auto u = torch::zeros({2, positions, shape_.head_dim() / 2}, options);                       // (2, P, Dh/2)
    u[0].narrow(1, 0, pairs_).copy_(offset.unsqueeze(1) * log_zeta);
    u[1].narrow(1, 0, pairs_).copy_(-offset.unsqueeze(1) * log_zeta);
    auto table = u.to(torch::kFloat32);
    if (rescaling_.method == "yarn") table = table + yarn_log_scale(positions, shape_.head_dim(), rescaling_.factor);
    return table;
  }
  void rescale_for_evaluation(const RopeRescaling& rescaling) override {
    rescaling_ = rope_rescaling_problem(rescaling, pairs_).empty() ? rescaling : RopeRescaling{};
  }
  std::string rescaling_problem(const RopeRescaling& rescaling) const override {
    return rope_rescaling_problem(rescaling, pairs_);
  }

 private:
  double base_, gamma_;
  int64_t pairs_;  // R / 2
  RopeRescaling rescaling_;
};

}  // namespace

SchemeEntry xpos_scheme() {
  return {"xpos", "RoPE with a decay zeta^((i - j) / gamma) of q.k (model.rope_base, model.rope_fraction, "
                  "model.xpos_scale_base); causal only",
          [](const ModelConfig& model) {
            if (!model.causal)
              return std::string("xpos scales q_i . k_j by zeta^((i - j) / gamma) with zeta < 1, which grows without "
                                 "bound for keys to the right of the query (j > i); it is defined with the causal "
                                 "mask only: set model.causal=true, or use rope");
            // Coupled IDs put keys ahead of the query in ID even under the mask (an output
            // carries its source's ID and sees the later input tokens), where the scale grows.
            if (model.positional_options.position_ids == "coupled")
              return std::string("xpos's scale zeta^((i - j) / gamma) grows without bound where a key's ID is ahead "
                                 "of the query's (j > i), which coupled IDs make under the causal mask too (an output "
                                 "carries its source's ID and sees the input after it): use model.position_ids = "
                                 "offset, or rope");
            return rope_shape_problem(model.positional_options, model.embed, model.heads);
          },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<XPos>(options, shape);
          }};
}

}  // namespace copytask
