#pragma once
// What the step tests compare (test_fused_cpu.cpp, test_fused_gpu.cpp): one step's losses
// and gradients, LibTorch's autograd step as the reference, their relative difference, and
// copy-task inputs for the members that read their tokens. Shapes: M members, B examples,
// T positions.
#include <algorithm>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/encoder.h"
#include "task/copy_task.h"
#include "test_util.h"
#include "train/train_data.h"

namespace copytask::test {

// One step's losses and gradients.
struct StepResult {
  torch::Tensor loss;                // (M)
  std::vector<torch::Tensor> grads;  // one per parameter, the schemes' included
};

inline std::vector<torch::Tensor> gradients_of(Encoder& model) {
  std::vector<torch::Tensor> out;
  for (auto& p : model->parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

// LibTorch's autograd over the model's forward: the reference every hand-written step meets.
inline StepResult autograd_step(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                                const DropoutMasks* masks, const torch::Tensor& positions = {}) {
  model->zero_grad();
  auto losses = member_losses(model->forward(inputs, masks, nullptr, positions), targets);  // (M)
  losses.sum().backward();
  return {losses.detach(), gradients_of(model)};
}

// The largest gradient difference relative to the gradient's own scale.
inline double worst_relative_gradient_difference(const StepResult& a, const StepResult& b,
                                                 std::string* where = nullptr) {
  double worst = 0;
  for (size_t j = 0; j < a.grads.size(); ++j) {
    const double scale = std::max(1e-3, a.grads[j].abs().max().item<double>());
    const double relative = max_abs_diff(a.grads[j], b.grads[j]) / scale;
    if (relative > worst) {
      worst = relative;
      if (where) *where = "parameter " + std::to_string(j);
    }
  }
  return worst;
}

// Copy-task inputs (M, B, T) of the default task: each member its own examples (a coupled
// member reads its outputs' sources from them).
inline torch::Tensor copy_inputs(int64_t M, int64_t B) {
  TaskConfig task;
  task.examples = 400;
  const torch::Tensor rows = train_data_upload(copy_task_generate(task), torch::kCPU).train_inputs;  // (N, T)
  torch::manual_seed(23);
  return rows.index_select(0, torch::randint(0, rows.size(0), {M * B}, torch::kLong)).view({M, B, rows.size(1)});  // (M, B, T)
}

}  // namespace copytask::test
