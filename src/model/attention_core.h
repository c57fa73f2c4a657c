#pragma once
// The attention core: softmax(q k^T / sqrt(Dh) + offset) (with dropout on the weights) @ v.
// Two formulations with the same numbers:
//   attention_core_matmul: batched matmuls (what a GPU wants);
//   attention_core_cpu:    a hand-written kernel with its own backward, one small (T x T)
//                          problem per (member, example, head), spread over the CPU threads.
//                          LibTorch 1.13 runs the batched matmuls over thousands of 10 x 10
//                          matrices as a loop of select + mm, most of a CPU step.
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

AttentionOutput attention_core_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& offset, const torch::Tensor& dropout);

}  // namespace copytask
