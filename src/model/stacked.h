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

// rows[m] @ weight[m] for rows (M, N, I) and weight (M, I, O): one batched matmul over the
// members, or with `chunks` > 1 (a divisor of N) over chunks of each member's rows, the
// weight broadcast to every chunk, so that the backward's weight gradient (rows^T @ grad,
// summed over N) is chunks x M products summed after. (M, N, O).
torch::Tensor stacked_matmul(const torch::Tensor& rows, const torch::Tensor& weight, int64_t chunks = 1);

// How many chunks stacked_matmul splits N rows into on a GPU: the largest divisor of N that
// leaves at least kStackedMatmulChunkRows rows a chunk (1 where N is smaller).
inline constexpr int64_t kStackedMatmulChunkRows = 1024;
int64_t stacked_matmul_chunks(int64_t rows);

// Layer norm over the last axis without the affine part, (x - mean) / sqrt(var + eps), as a
// reduction (var_mean) and elementwise operations: what the stacked layer norm runs on a GPU.
torch::Tensor layer_norm_by_moments(const torch::Tensor& x, double eps);

// A per-member (M, X) parameter viewed so it broadcasts against a (M, ..., X) tensor of
// `dims` dimensions: (M, 1, ..., 1, X).
torch::Tensor per_member(const torch::Tensor& parameter, int64_t dims);

}  // namespace copytask
