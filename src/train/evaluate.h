#pragma once
// Evaluation in eval mode (no dropout): each member's loss, whole-sequence exact match and
// token accuracy over a split. Shapes: M members, N examples, T positions.
#include <vector>

#include <torch/types.h>

#include "model/encoder.h"

namespace copytask {

struct SplitScores {
  double loss = 0;   // mean cross-entropy over all N*T positions
  double exact = 0;  // fraction of examples with all T output tokens right
  double token = 0;  // fraction of the N*T output tokens right
  // exact match by content length k (index k; -1 where the split has no example of that length)
  std::vector<double> exact_by_length;
};

// The logits of inputs (M, N, T) without dropout (M, N, T, V): the hand-written forward
// pass on the CPU (model/fused_cpu.h, the training step's own), LibTorch's elsewhere.
// attention_out, when given, receives each block's weights (M, N, H, T, T).
torch::Tensor model_logits(Encoder& model, const torch::Tensor& inputs, std::vector<torch::Tensor>* attention_out = nullptr);

// inputs, targets: (N, T) int64 on the model's device. One entry per member.
std::vector<SplitScores> evaluate_split(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                                        int64_t chunk = 1024);

// Content length k of each input (the position of <copy>): (N, T) -> (N) int64.
torch::Tensor content_lengths(const torch::Tensor& inputs, int64_t vocab_size);

// Greedy outputs: (M, N, T) int64 argmax tokens for inputs (N, T).
torch::Tensor predict_tokens(Encoder& model, const torch::Tensor& inputs,
                             std::vector<torch::Tensor>* attention_out = nullptr);

}  // namespace copytask
