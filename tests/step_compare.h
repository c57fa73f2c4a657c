#pragma once
// What the step tests compare (test_fused_cpu.cpp, test_fused_gpu.cpp, test_device_step.cpp):
// one step's losses and gradients, LibTorch's autograd step as the reference, their relative
// difference, copy-task inputs for the members that read their tokens, and a device step
// trained beside the autograd step. Shapes: M members, B examples,
// T positions.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/encoder.h"
#include "task/copy_task.h"
#include "test_util.h"
#include "train/device_step.h"
#include "train/train_data.h"
#include "train/trainer.h"

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

// Every parameter whose gradient is not zero under autograd (the reference) got one that is
// not zero from the step checked (every member uses all of its own parameters), so that a
// gradient the step never wrote cannot pass as a small difference. Zero up to rounding under
// autograd: a bias added to a whole row of scores (DAPE's output bias, with one head), which
// the softmax ignores; a step may then round it to exactly 0.
inline void expect_every_used_parameter_gets_a_gradient(Encoder& model, const StepResult& reference,
                                                        const StepResult& ours) {
  const auto names = model->named_parameters();
  for (size_t j = 0; j < ours.grads.size(); ++j)
    if (reference.grads[j].abs().max().item<double>() > 1e-7) {
      EXPECT_GT(ours.grads[j].abs().max().item<double>(), 0.0) << names[j].key();
    }
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

// A device step (uncaptured, on the CPU; `kernels`: LibTorch's autograd or the fused GPU kernels'
// emulation) trains as the autograd step: the same batches, dropout masks, position IDs and
// warm-up schedule over 8 steps, so the same losses and parameters up to float rounding
// (1e-5), the host's dropout count following. The members: four schemes, causal and not,
// the three kinds of varying position IDs, and a member without positions.
inline void expect_device_step_trains_like_the_autograd_step(int64_t batch_size, DeviceStepKernels kernels,
                                                             const std::string& step_name) {
  TaskConfig task;
  task.examples = 150;  // 135 train examples: a full batch is one autograd chunk
  const TrainData data = train_data_upload(copy_task_generate(task), torch::kCPU);
  std::vector<MemberSpec> members = {{"rope", 0, "rope", true},    {"learned", 1, "learned", false},
                                     {"t5", 2, "t5", false},        {"alibi", 3, "alibi", true},
                                     {"sinusoidal+random", 4, "sinusoidal", false}, {"rope+coupled", 5, "rope", false},
                                     {"t5+offset", 6, "t5", true},  {"none", 7, "none", false}};
  members[4].options.position_ids = "random";
  members[5].options.position_ids = "coupled";
  members[6].options.position_ids = "offset";
  for (size_t m = 4; m < 7; ++m) members[m].options.position_range = 24;
  TrainConfig train;
  train.batch_size = batch_size;
  Encoder reference(small_shape(0.1), members, torch::kCPU), model(small_shape(0.1), members, torch::kCPU);
  const auto owned = training_step_make(reference, data, with_step(train, /*fused=*/false));
  TrainingStep& autograd = *owned;
  ASSERT_EQ(autograd.name(), "autograd");
  DeviceStep device_step(model, data, train, /*capture=*/false, kernels);  // the same batches: both use StepBatches
  EXPECT_EQ(device_step.name(), step_name);
  double worst_loss = 0;
  for (int step = 1; step <= 8; ++step) {
    const double lr = 2e-3 * step / 8;
    autograd.set_lr(lr);
    device_step.set_lr(lr);
    const auto expected = autograd.run(), got = device_step.run();  // (M)
    worst_loss = std::max(worst_loss, max_abs_diff(expected, got));
  }
  EXPECT_EQ(model->next_dropout_step(), reference->next_dropout_step()) << "the host's dropout count follows";
  double worst_parameter = 0;
  const auto a = reference->parameters(), b = model->parameters();
  for (size_t i = 0; i < a.size(); ++i) worst_parameter = std::max(worst_parameter, max_abs_diff(a[i], b[i]));
  std::printf("batch %lld: the device step (%s) against the autograd step over 8 steps: loss %.2e, parameters %.2e\n",
              static_cast<long long>(batch_size), step_name.c_str(), worst_loss, worst_parameter);
  EXPECT_LT(worst_loss, 1e-5);
  EXPECT_LT(worst_parameter, 1e-5);
  Encoder untrained(small_shape(0.1), members, torch::kCPU);
  EXPECT_GT(max_abs_diff(untrained->parameters()[0], b[0]), 1e-4) << "it trained";
}

}  // namespace copytask::test
