// pope (Gopalakrishnan, Csordás, Schmidhuber, Mozer 2025, "Decoupling the What and Where
// With Polar Coordinate Positional Embeddings", arXiv 2509.10534; x-transformers' PoPE):
// q and k of each head become complex numbers whose magnitudes come from the content alone
// and whose phases come from the position alone,
//   qtilde_ic = softplus(q_ic) e^(i pos_i theta_c),
//   ktilde_jc = softplus(k_jc) e^(i (pos_j theta_c + delta_hc)),   theta_c = base^(-c / Dh),
// c = 0 .. Dh-1 (Dh frequencies, one per dimension: no pairs), base = model.rope_base, and
// the attention logit is
//   Re(sum_c qtilde_ic conj(ktilde_jc)) / sqrt(Dh)
//     = sum_c softplus(q_ic) softplus(k_jc) cos((pos_i - pos_j) theta_c - delta_hc) / sqrt(Dh),
// in place of q_i . k_j / sqrt(Dh) (the polar hook replaces the plain scores). delta is a
// learned phase bias of the keys per head and frequency, clamped to [-2 pi, 0] where it is
// used and starting at 0 (x-transformers' default; the paper's range), so the score of a
// pair depends on the content's magnitudes and on pos_i - pos_j only. The sign follows
// x-transformers: the bias is added to the key's phase.
//
// The polar table (2, H, P, Dh): [0, h, p, c] = p theta_c (the query's phases, the same for
// every head), [1, h, p, c] = p theta_c + clamp(delta_hc) (the key's), so the position IDs
// gather its rows as any position table's and autograd carries the table's
// gradient to delta.
#include <cmath>

#include <torch/torch.h>

#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {

namespace {

class Pope : public PositionalScheme {
 public:
  Pope(const PositionalOptions& options, const PositionalShape& shape) : PositionalScheme(shape), base_(options.rope_base) {
    phase_bias_ = register_parameter("phase_bias", torch::zeros({shape.heads, shape.head_dim()}));  // (H, Dh)
  }
  const Hook* hook() const override { return &polar_hook(); }
  torch::Tensor table(int64_t positions) override {
    const int64_t H = shape_.heads, Dh = shape_.head_dim();
    // On the parameter's device, from device operations only (a captured step reads it).
    auto options = torch::TensorOptions().dtype(torch::kFloat64).device(phase_bias_.device());
    auto position = torch::arange(positions, options).unsqueeze(1);                     // (P, 1)
    auto frequency = torch::pow(base_, -torch::arange(Dh, options) / static_cast<double>(Dh));  // (Dh) theta_c
    auto angles = (position * frequency).to(torch::kFloat32);                           // (P, Dh)
    auto bias = phase_bias_.clamp(-2 * M_PI, 0.0);                                      // (H, Dh)
    auto query = angles.unsqueeze(0).expand({H, positions, Dh});                        // (H, P, Dh)
    auto key = angles.unsqueeze(0) + bias.unsqueeze(1);                                 // (H, P, Dh)
    return torch::stack({query, key});                                                  // (2, H, P, Dh)
  }
  std::vector<std::pair<std::string, std::vector<double>>> reported_values() override {
    // The phase bias as used (clamped), per head and frequency.
    return {{"phase_bias", host_values(phase_bias_.detach().clamp(-2 * M_PI, 0.0))}};
  }

 private:
  double base_;
  torch::Tensor phase_bias_;  // (H, Dh) delta
};

}  // namespace

SchemeEntry pope_scheme() {
  return {"pope", "polar scores: softplus magnitudes from the content, phases p base^(-c / Dh) from the position, "
                  "a learned key phase bias per head (model.rope_base)",
          [](const ModelConfig&) { return std::string(); },  // any head dimension: one frequency per dimension
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<Pope>(options, shape);
          },
          kEveryStep,
          // the magnitudes, their cos and sin products (B, H, T, 2Dh) for q and k, the polar
          // scores and their selection (B, H, T, T), per block
          [](const ModelConfig& model, double T) {
            return static_cast<double>(model.blocks) * (6.0 * T * static_cast<double>(model.embed) +
                                                        2.0 * static_cast<double>(model.heads) * T * T);
          }};
}

}  // namespace copytask
