// rope (Su et al. 2021): q and k of each head are turned pair by pair, pair (2i, 2i+1) at
// position p by theta[p, i] = p * base^(-2i / R), R = the rotated dimensions, so q_m . k_n
// depends on m - n only. Partial rotary (as x-transformers): only the first R = 2 *
// floor(model.rope_fraction * Dh / 2) dimensions of each head turn, with frequencies over
// those; the others keep angle 0.
#include <cmath>

#include "model/positional.h"

namespace copytask {
namespace {

int64_t rotated_pairs(double fraction, int64_t head_dim) {
  return static_cast<int64_t>(std::floor(fraction * static_cast<double>(head_dim / 2) + 1e-9));
}

class Rope : public PositionalScheme {
 public:
  Rope(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape), base_(options.rope_base), pairs_(rotated_pairs(options.rope_fraction, shape.head_dim())) {}
  PositionalHook hook() const override { return PositionalHook::rotation; }
  torch::Tensor table(int64_t positions) override {
    auto options = torch::TensorOptions().dtype(torch::kFloat64);
    auto position = torch::arange(positions, options).unsqueeze(1);                         // (P, 1)
    auto pair = torch::arange(0, 2 * pairs_, 2, options);                                   // (R/2) = 2i
    auto frequency = torch::pow(base_, -pair / static_cast<double>(2 * pairs_));            // (R/2)
    auto angles = torch::zeros({positions, shape_.head_dim() / 2}, options);                // (P, Dh/2)
    angles.narrow(1, 0, pairs_).copy_(position * frequency);
    return angles.to(torch::kFloat32);
  }

 private:
  double base_;
  int64_t pairs_;  // R / 2
};

}  // namespace

SchemeEntry rope_scheme() {
  return {"rope", "q and k turned by position (model.rope_base, model.rope_fraction)",
          [](const PositionalOptions& options, int64_t embed, int64_t heads) {
            const int64_t head_dim = embed / heads;
            if (head_dim % 2 != 0)
              return "needs an even head dimension, but model.embed / model.heads = " + std::to_string(head_dim) +
                     "; change model.embed or model.heads";
            if (rotated_pairs(options.rope_fraction, head_dim) < 1)
              return "model.rope_fraction = " + std::to_string(options.rope_fraction) + " rotates no pair of the " +
                     std::to_string(head_dim) + " head dimensions; raise it to at least " +
                     std::to_string(2.0 / static_cast<double>(head_dim));
            return std::string();
          },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<Rope>(options, shape);
          }};
}

}  // namespace copytask
