#pragma once
// Helpers shared by the tests: small configs, fixture loading, tensor comparison.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "config/config.h"
#include "model/encoder.h"

namespace copytask::test {

// The largest absolute difference between two tensors (as float64).
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

inline std::string fixtures_dir() { return COPYTASK_FIXTURES_DIR; }

inline torch::Tensor tensor_from_json(const nlohmann::json& entry) {
  auto data = entry.at("data").get<std::vector<double>>();
  auto shape = entry.at("shape").get<std::vector<int64_t>>();
  return torch::tensor(data, torch::kFloat64).view(shape);
}

inline torch::Tensor tokens_from_json(const nlohmann::json& rows) {
  std::vector<int64_t> flat;
  for (const auto& row : rows)
    for (const auto& token : row) flat.push_back(token.get<int64_t>());
  return torch::tensor(flat, torch::kLong).view({static_cast<int64_t>(rows.size()), -1});
}

// `train` with train.step set: "fused" or "autograd" forces that step (training_step_make).
inline TrainConfig with_step(TrainConfig train, bool fused) {
  train.step = fused ? "fused" : "autograd";
  return train;
}

// Shape of a small model used by property tests.
inline EncoderShape small_shape(double dropout = 0.0) {
  EncoderShape shape;
  shape.vocab = 11;
  shape.context = 10;
  shape.embed = 8;
  shape.heads = 2;
  shape.blocks = 2;
  shape.hidden = 12;
  shape.dropout = dropout;
  return shape;
}

// Random copy-task-like tokens (M, B, T) in 0..V-1.
inline torch::Tensor random_tokens(int64_t members, int64_t batch, const EncoderShape& shape, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, shape.vocab, {members, batch, shape.context}, torch::kLong);
}

}  // namespace copytask::test
