#pragma once
// The attention core of the LibTorch model: softmax(q k^T / sqrt(Dh) + offset) (dropout on
// the weights) @ v, as batched matmuls; autograd gives its backward. The GPU runs it, and
// the CPU tests use it as the independent formulation the hand-written CPU kernels
// (model/cpu_layers.h) are checked against.
//
// Shapes: M members, B batch, H heads, T positions, Dh head dimension.
//   q, k, v: (M, B, H, T, Dh); offset: (M, 1, H, T, T) score bias with -inf where masked,
//   or undefined; dropout: (M, B, H, T, T) mask (0 or 1/(1-p)), or undefined.
#include <torch/types.h>

namespace copytask {

struct AttentionOutput {
  torch::Tensor mixed;    // (M, B, H, T, Dh)
  torch::Tensor weights;  // (M, B, H, T, T) softmax weights before dropout (detached)
};

AttentionOutput attention_core_matmul(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& offset, const torch::Tensor& dropout);

}  // namespace copytask
