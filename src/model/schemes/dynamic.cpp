// dynamic (x-transformers' dynamic position bias): a small MLP of the signed distance
// d = i - j gives each head's bias,
//   bias[h, i, j] = mlp(x(i - j))[h],   x(d) = d, or sign(d) log(1 + |d|) (model.dynamic_log_distance)
//   mlp: Linear(1, W) -> SiLU -> [Linear(W, W) -> SiLU] x (depth - 1) -> Linear(W, H)
// W = model.bias_mlp_hidden, depth = model.dynamic_depth. Weights in (in, out) layout,
// initialised as nn.Linear.
#include <ATen/core/Generator.h>

#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {
namespace {

class DynamicBias : public PositionalScheme {
 public:
  DynamicBias(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape), log_distance_(options.dynamic_log_distance) {
    const int64_t W = options.bias_mlp_hidden, depth = options.dynamic_depth;
    for (int64_t layer = 0; layer <= depth; ++layer) {
      const int64_t in = layer == 0 ? 1 : W, out = layer == depth ? shape.heads : W;
      weights_.push_back(register_parameter("mlp" + std::to_string(layer) + "_weight", torch::zeros({in, out})));
      biases_.push_back(register_parameter("mlp" + std::to_string(layer) + "_bias", torch::zeros({out})));
    }
  }
  const Hook* hook() const override { return &score_bias_hook(); }
  torch::Tensor table(int64_t positions) override {
    const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(weights_[0].device());
    auto d = torch::arange(-(positions - 1), positions, options);  // (2P-1)
    if (log_distance_) d = d.sign() * d.abs().log1p();
    auto h = d.unsqueeze(1);                                        // (2P-1, 1)
    for (size_t layer = 0; layer < weights_.size(); ++layer) {
      h = torch::addmm(biases_[layer], h, weights_[layer]);                                               // (2P-1, W or H)
      if (layer + 1 < weights_.size()) h = torch::silu(h);
    }
    return bias_from_distance_values(h, positions);                                                       // (H, P, P)
  }
  void init(const torch::Tensor&, at::Generator& generator) override {
    for (size_t layer = 0; layer < weights_.size(); ++layer) linear_init(weights_[layer], biases_[layer], generator);
  }

 private:
  bool log_distance_;
  std::vector<torch::Tensor> weights_, biases_;  // (in, out), (out) per layer
};

}  // namespace

SchemeEntry dynamic_scheme() {
  return {"dynamic",
          "a small MLP of the signed distance (model.bias_mlp_hidden, model.dynamic_depth, model.dynamic_log_distance)",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<DynamicBias>(options, shape);
          }};
}

}  // namespace copytask
