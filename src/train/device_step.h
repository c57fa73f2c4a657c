#pragma once
// The training step with everything on the device (docs/design.md sections 3 and 7), for a GPU:
// the autograd path's forward, loss and backward, Adam with its step count on the device
// (train/device_adam.h), dropout masks from a step count on the device
// (EncoderImpl::dropout_masks_at), and each step's batch read from tensors that stay at
// the same addresses. So the loop never waits for the host, and the whole step is captured
// once as a CUDA graph (train/cuda_graph.h) and replayed. Shapes: M members, B batch,
// N examples, T positions.
//
// The first kWarmupSteps steps run uncaptured (as torch.cuda.graph's warm-up: lazy
// initialisation and the tables' caches happen outside the graph); they are real steps.
// Without capture (on the CPU, train.cuda_graph = false, or train.step = autograd) every
// step runs uncaptured, the same work: tests/test_device_step.cpp checks it against the
// AutogradStep on the CPU, and tests/test_cuda.cpp the captured step against the
// uncaptured one. The GPU's uncaptured autograd step lives here, not in AutogradStep, so
// that a capture that fails after the warm-up goes on uncaptured with the state it has
// (this Adam's moments and step count on the device) and the same numbers.
//
// What still crosses from the host each step: a minibatch's row indices and randomized
// positions (one small copy each, made before the replay); a full batch copies nothing.
#include <cstdint>
#include <memory>
#include <string>

#include <torch/types.h>

#include "model/encoder.h"
#include "model/fused_gpu.h"
#include "train/cuda_graph.h"
#include "train/device_adam.h"
#include "train/step_batches.h"
#include "train/training_step.h"

namespace copytask {

// Which forward and backward a DeviceStep runs: LibTorch's autograd, op by op, or the fused
// GPU step's kernels (model/fused_gpu.h: the whole batch's forward and backward in one
// launch; for a model on the CPU, their emulation, which the tests run).
enum class DeviceStepKernels { autograd, fused };

class DeviceStep final : public TrainingStep {
 public:
  static constexpr int64_t kWarmupSteps = 3;
  // capture: replay the step as a CUDA graph after the warm-up (train.cuda_graph on a GPU
  // whose LibTorch can capture, training_step_make decides); false: every step uncaptured.
  // kernels, execution: as above; fused needs fused_gpu_unsupported(model, T) to be empty.
  // fallback: why this step runs instead of a faster one that was asked for ("" when none).
  DeviceStep(Encoder& model, const TrainData& data, const TrainConfig& train, bool capture,
             DeviceStepKernels kernels = DeviceStepKernels::autograd, const FusedGpuExecution& execution = {},
             std::string fallback = "");
  ~DeviceStep() override;
  // One step; returns each member's loss (M), a fresh tensor (reading it syncs a GPU).
  torch::Tensor run() override;
  void set_lr(double lr) override { adam_.set_lr(lr); }
  // "CUDA graph" while the step is (or will be, after the warm-up) a replayed graph, else
  // "autograd": uncaptured from the start, or since its capture failed; with the fused
  // kernels "fused GPU, CUDA graph" and "fused GPU".
  std::string name() const override;
  // Why the batch runs here and not on the step asked for, or why the capture failed, when
  // either happened ("" otherwise).
  std::string fallback_reason() const override;
  int64_t batch_size() const override { return batches_.batch_size(); }
  // Why capture was given up at the first try ("" when it was not): the steps go on
  // uncaptured, with the same numbers.
  const std::string& capture_failure() const { return capture_failure_; }

 private:
  // The step's device work: what the graph captures.
  void work();
  // Every parameter's gradient undefined, for backward to make (before a step or a capture).
  void forget_gradients();

  Encoder& model_;
  StepBatches batches_;
  int64_t members_, positions_;
  bool capture_;
  std::unique_ptr<FusedGpuKernels> fused_;  // the fused kernels' buffers, or null: autograd
  std::string fallback_;
  std::string capture_failure_;
  DeviceAdam adam_;
  std::unique_ptr<CudaGraph> graph_;
  int64_t steps_run_ = 0;
  // The step's fixed tensors: inputs (a full batch's views, batches_.full(), or a
  // minibatch's rows), the position IDs, the dropout step count, the loss the work writes.
  torch::Tensor rows_;                        // (M*B) int64, minibatches only
  torch::Tensor positions_buffer_;            // (M, B, T) int64, position IDs other than 0..T-1 only
  torch::Tensor dropout_step_;                // () int64: the step dropout_masks would draw
  torch::Tensor member_loss_;                 // (M)
};

}  // namespace copytask
