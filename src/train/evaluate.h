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
};

// inputs, targets: (N, T) int64 on the model's device. One entry per member.
std::vector<SplitScores> evaluate_split(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                                        int64_t chunk = 1024);

// Greedy outputs: (M, N, T) int64 argmax tokens for inputs (N, T).
torch::Tensor predict_tokens(Encoder& model, const torch::Tensor& inputs,
                             std::vector<torch::Tensor>* attention_out = nullptr);

}  // namespace copytask
