#pragma once
// The plain attention core: softmax(q k^T / sqrt(Dh) + offset) (dropout on the weights) @ v,
// as batched matmuls; autograd gives its backward. No training step calls it: the LibTorch
// encoder (AttentionImpl::forward, model/encoder.cpp) computes its attention itself, with the
// hooks between the scores and the softmax, and that encoder is what the autograd step and the
// device step run (the GPU path, not yet run on a GPU). The tests use this function as the
// independent formulation the hand-written CPU attention (model/cpu_layers.h) is checked
// against (tests/test_attention.cpp).
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
