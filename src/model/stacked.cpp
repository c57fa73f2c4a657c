#include "model/stacked.h"

#include <cmath>

#include <torch/nn/functional/normalization.h>

namespace copytask {

torch::Tensor per_member(const torch::Tensor& parameter, int64_t dims) {
  std::vector<int64_t> shape(dims, 1);
  shape.front() = parameter.size(0);
  shape.back() = parameter.size(1);
  return parameter.view(shape);  // (M, 1, ..., 1, X)
}

StackedLinearImpl::StackedLinearImpl(int64_t members, int64_t in, int64_t out, bool with_bias) {
  weight = register_parameter("weight", torch::zeros({members, in, out}));
  if (with_bias) bias = register_parameter("bias", torch::zeros({members, out}));
}

torch::Tensor stacked_matmul(const torch::Tensor& rows, const torch::Tensor& weight, int64_t chunks) {
  if (chunks <= 1) return torch::bmm(rows, weight);  // (M, N, O)
  const int64_t M = rows.size(0), N = rows.size(1), I = rows.size(2), O = weight.size(2);
  TORCH_CHECK(N % chunks == 0, "stacked_matmul: ", chunks, " chunks do not divide ", N, " rows");
  auto chunked = rows.view({M, chunks, N / chunks, I});                         // (M, S, N/S, I)
  return torch::matmul(chunked, weight.unsqueeze(1)).view({M, N, O});           // (M, S, N/S, O) -> (M, N, O)
}

int64_t stacked_matmul_chunks(int64_t rows) {
  for (int64_t chunks = rows / kStackedMatmulChunkRows; chunks > 1; --chunks)
    if (rows % chunks == 0) return chunks;
  return 1;
}

torch::Tensor layer_norm_by_moments(const torch::Tensor& x, double eps) {
  auto [variance, mean] = torch::var_mean(x, {-1}, /*unbiased=*/false, /*keepdim=*/true);  // (..., 1) each
  return (x - mean) * torch::rsqrt(variance + eps);                                        // (..., D)
}

torch::Tensor StackedLinearImpl::forward(const torch::Tensor& x) {
  const int64_t members = weight.size(0), in = weight.size(1), out = weight.size(2);
  auto rows = x.reshape({members, -1, in});                      // (M, N, I)
  // On a GPU, cuBLAS runs the weight gradient (rows^T @ grad, a sum over all N rows: 90000
  // in the reference study) with one thread block per member, 30 blocks on 132
  // multiprocessors, 3 ms a product, a quarter of the step (its profile, docs/gpu.md). In
  // chunks of rows it has chunks x M blocks. The CPU's numbers stay bmm's.
  auto y = stacked_matmul(rows, weight, x.is_cuda() ? stacked_matmul_chunks(rows.size(1)) : 1);  // (M, N, O)
  // bmm then add: measured faster than baddbmm with a broadcast bias on LibTorch 1.13 CPU.
  if (bias.defined()) y = y + bias.unsqueeze(1);
  auto shape = x.sizes().vec();
  shape.back() = out;
  return y.view(shape);                                          // (M, ..., O)
}

void StackedLinearImpl::init_member(int64_t member, at::Generator& generator) {
  torch::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(weight.size(1)));
  weight[member].uniform_(-bound, bound, generator);
  if (bias.defined()) bias[member].uniform_(-bound, bound, generator);
}

StackedLayerNormImpl::StackedLayerNormImpl(int64_t members, int64_t features_) : features(features_) {
  weight = register_parameter("weight", torch::ones({members, features}));
  bias = register_parameter("bias", torch::zeros({members, features}));
}

torch::Tensor StackedLayerNormImpl::forward(const torch::Tensor& x) {
  // LibTorch's CUDA layer norm gives every row (D = 20 features) a thread block of its own:
  // 2.7 million blocks, 4 ms forward and 2 ms backward a call, 30% of the reference study's
  // step on a GPU (its profile, docs/gpu.md). By moments it is a row reduction and
  // elementwise passes. The CPU's numbers stay LibTorch's layer norm.
  auto normalized = x.is_cuda() ? layer_norm_by_moments(x, 1e-5)
                                : torch::layer_norm(x, {features}, {}, {}, 1e-5);  // (M, ..., D)
  return torch::addcmul(per_member(bias, x.dim()), normalized, per_member(weight, x.dim()));
}

void StackedLayerNormImpl::init_member(int64_t member) {
  torch::NoGradGuard no_grad;
  weight[member].fill_(1.0);
  bias[member].fill_(0.0);
}

}  // namespace copytask
