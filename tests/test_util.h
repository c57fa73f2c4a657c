#pragma once
// Helpers shared by the tests: small configs, fixture loading, tensor comparison.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "config/config.h"
#include "model/encoder.h"
#include "model/positional.h"
#include "test_paths.h"
#include "train/step_factory.h"

namespace copytask::test {

// The GPU the CUDA tests run on, and their first line: skipped, saying why, where LibTorch
// sees no CUDA device (a CPU machine, Debian's LibTorch). Needs <torch/cuda.h> and GoogleTest.
inline const torch::Device kCuda(torch::kCUDA, 0);
#define COPYTASK_REQUIRE_CUDA()                                                                  \
  if (!torch::cuda::is_available())                                                              \
  GTEST_SKIP() << "no CUDA device visible to this LibTorch: the CUDA tests run on the GPU "      \
                  "machine (scripts/gpu_run.sh)"

// The largest absolute difference between two tensors (as float64).
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// Example i's T tokens of a flat (N x T) split.
inline std::vector<int64_t> example_row(const std::vector<int64_t>& flat, int64_t i, int64_t T) {
  return std::vector<int64_t>(flat.begin() + i * T, flat.begin() + (i + 1) * T);
}

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

// `train` with train.step set: "fused-cpu" or "autograd" forces that step (training_step_make).
inline TrainConfig with_step(TrainConfig train, bool fused) {
  train.step = fused ? "fused-cpu" : "autograd";
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

// Options small enough for the small shape's tests (the MLP biases, T5's buckets, DAPE).
inline PositionalOptions small_options() {
  PositionalOptions o;
  o.bias_mlp_hidden = 6;
  o.t5_buckets = 8;
  o.t5_max_distance = 20;
  o.dape_hidden = 6;
  o.xpos_scale_base = 8;
  return o;
}

// Whether a member of this scheme, options and causal flag can run at this shape (the
// registry's own rules, as a config check asks them).
inline bool positional_runs(const std::string& name, const PositionalOptions& options, bool causal,
                            const EncoderShape& shape) {
  ModelConfig model;
  model.embed = shape.embed;
  model.heads = shape.heads;
  model.blocks = shape.blocks;
  model.positional = name;
  model.causal = causal;
  model.positional_options = options;
  return positional_problem(model).problem.empty();
}

// Every registered scheme with the causal mask off and on (where it is defined), then every
// registered option (model.dape, model.length_scale) on every scheme it runs with, causal
// on every other one: taken from the registry, so a new scheme or option is covered
// without a line here. Each member its own seed, from first_seed on. `needs`: only the
// members whose scheme and options run on every one of these steps (StepSupport bits; a
// test of the fused CPU step asks for kFusedCpuStep, which a scheme may not have yet).
inline std::vector<MemberSpec> every_positional_member(const EncoderShape& shape, int64_t first_seed = 0,
                                                       unsigned needs = 0) {
  std::vector<MemberSpec> members;
  int64_t seed = first_seed;
  const PositionalOptions base = small_options();
  for (const auto& name : positional_names())
    for (bool causal : {false, true})
      if (positional_runs(name, base, causal, shape) && (positional_steps(name, base) & needs) == needs)
        members.push_back({name + (causal ? "+causal" : ""), seed++, name, causal, base});
  for (const auto& option : positional_option_registry()) {
    int64_t count = 0;
    for (const auto& name : positional_names()) {
      Config with;
      with.model.positional_options = base;  // the option turned on as a config key turns it on
      const PositionalOptions options =
          config_with_overrides(with, nlohmann::json{{"model." + option.key, true}}, "test").model.positional_options;
      const bool causal = count % 2 == 1 || !positional_runs(name, options, false, shape);
      if (!option.enabled(options) || !positional_runs(name, options, causal, shape)) continue;
      if ((positional_steps(name, options) & needs) != needs) continue;
      members.push_back({name + "+" + option.key + (causal ? "+causal" : ""), seed++, name, causal, options});
      ++count;
    }
  }
  return members;
}

}  // namespace copytask::test
