#include "model/attention_core.h"

#include <cmath>

#include <torch/torch.h>

namespace copytask {

AttentionOutput attention_core_matmul(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& offset, const torch::Tensor& dropout) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-1, -2)) * scale;  // (M, B, H, T, T)
  if (offset.defined()) scores = scores + offset;
  auto weights = torch::softmax(scores, -1);                     // (M, B, H, T, T)
  auto kept = dropout.defined() ? weights * dropout : weights;
  return {torch::matmul(kept, v), weights.detach()};             // (M, B, H, T, Dh)
}

}  // namespace copytask
