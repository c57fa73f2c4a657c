// fire (Li et al. 2023, "Functional Interpolation for Relative Positions"): an MLP of the
// log-distance normalised by the query's position,
//   psi(z) = log(|c| z + 1),   L = |threshold_scale * L0|,   d = i - j
//   x[i, j] = sign(d) psi(|d|) / (psi(max(L, i)) + 1e-6)
//   bias[h, i, j] = mlp(x[i, j])[h],   mlp: Linear(1, W) -> ReLU -> Linear(W, H)
// c starts at 0.1 and threshold_scale at 1 (the paper's code), L0 = model.fire_threshold
// (the training context by default), W = model.bias_mlp_hidden.
// The published form is causal: it sees d >= 0 only and has no sign. Here, in an encoder,
// the sign keeps the two sides apart: a key at distance n to the right gets the MLP of
// -psi(n)/psi(...), the mirror input of the key at distance n to the left. With the causal
// mask the right side is masked and this is exactly the published form. The normaliser
// makes the bias depend on the query's own position beyond L (positions inside L share
// one scale), which no other bias here does.
#include <ATen/core/Generator.h>

#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {
namespace {

class Fire : public PositionalScheme {
 public:
  Fire(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape),
        initial_threshold_(options.fire_threshold > 0 ? options.fire_threshold : static_cast<double>(shape.positions)) {
    const int64_t W = options.bias_mlp_hidden;
    c_ = register_parameter("c", torch::full({1}, 0.1));                          // (1)
    threshold_scale_ = register_parameter("threshold_scale", torch::ones({1}));  // (1)
    weight0_ = register_parameter("mlp0_weight", torch::zeros({1, W}));
    bias0_ = register_parameter("mlp0_bias", torch::zeros({W}));
    weight1_ = register_parameter("mlp1_weight", torch::zeros({W, shape.heads}));
    bias1_ = register_parameter("mlp1_bias", torch::zeros({shape.heads}));
  }
  const Hook* hook() const override { return &score_bias_hook(); }
  torch::Tensor table(int64_t positions) override {
    const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(c_.device());
    auto d = signed_distances(positions, c_.device()).to(options);                  // (P, P) i - j
    auto query = torch::arange(positions, options);                                 // (P) i
    auto c = c_.abs();                                                              // (1)
    auto threshold = (threshold_scale_ * initial_threshold_).abs();                 // (1) L
    auto normaliser = torch::log(c * torch::maximum(threshold, query) + 1) + 1e-6;  // (P)
    auto x = d.sign() * torch::log(c * d.abs() + 1) / normaliser.unsqueeze(1);     // (P, P)
    auto hidden = torch::relu(torch::addmm(bias0_, x.reshape({-1, 1}), weight0_));  // (P*P, W)
    auto bias = torch::addmm(bias1_, hidden, weight1_);                             // (P*P, H)
    return bias.view({positions, positions, shape_.heads}).permute({2, 0, 1});     // (H, P, P)
  }
  void init(const torch::Tensor&, at::Generator& generator) override {
    linear_init(weight0_, bias0_, generator);
    linear_init(weight1_, bias1_, generator);
  }
  std::vector<std::pair<std::string, std::vector<double>>> reported_values() override {
    return {{"c", {c_.detach().abs().item<double>()}},
            {"threshold", {(threshold_scale_.detach() * initial_threshold_).abs().item<double>()}}};
  }

 private:
  double initial_threshold_;  // L0
  torch::Tensor c_, threshold_scale_, weight0_, bias0_, weight1_, bias1_;
};

}  // namespace

SchemeEntry fire_scheme() {
  return {"fire", "FIRE: an MLP of the log-distance normalised by the query position (model.bias_mlp_hidden, "
                  "model.fire_threshold)",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<Fire>(options, shape);
          }};
}

}  // namespace copytask
