#pragma once
// Member-stacked layers: every parameter has a leading member axis M, and one call runs
// M independent layers (batched matmuls over M). docs/design.md section 3.
//
// Shapes: M members, N rows per member (B*T flattened), I in, O out, D features.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace copytask {

// y[m] = x[m] @ weight[m] + bias[m]; weight (M, I, O) in (in, out) layout, bias (M, O).
class StackedLinearImpl : public torch::nn::Module {
 public:
  StackedLinearImpl(int64_t members, int64_t in, int64_t out, bool with_bias);
  // x: (M, ..., I) -> (M, ..., O)
  torch::Tensor forward(const torch::Tensor& x);
  // PyTorch's nn.Linear default for member m: U(-1/sqrt(I), 1/sqrt(I)) for weight and bias.
  void init_member(int64_t member, at::Generator& generator);

  torch::Tensor weight, bias;
};
TORCH_MODULE(StackedLinear);

// Layer norm over the last axis (eps 1e-5) with per-member weight and bias (M, D).
class StackedLayerNormImpl : public torch::nn::Module {
 public:
  StackedLayerNormImpl(int64_t members, int64_t features);
  // x: (M, ..., D) -> (M, ..., D)
  torch::Tensor forward(const torch::Tensor& x);
  void init_member(int64_t member);  // weight 1, bias 0

  torch::Tensor weight, bias;
  int64_t features;
};
TORCH_MODULE(StackedLayerNorm);

// A per-member (M, X) parameter viewed so it broadcasts against a (M, ..., X) tensor of
// `dims` dimensions: (M, 1, ..., 1, X).
torch::Tensor per_member(const torch::Tensor& parameter, int64_t dims);

}  // namespace copytask
