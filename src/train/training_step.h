#pragma once
// One training step of a batch of members, whichever kind runs it: the next batch (full, or
// each member's own minibatch: train/step_batches.h), this step's dropout masks, forward,
// the summed loss, backward, Adam. The training loop (train/trainer.h) repeats it;
// `copytask bench` times it. Three kinds, one file each, all with the same numbers up to
// float rounding (the tests compare them):
//   FusedCpuStep  train/fused_cpu_step.h  the hand-written forward and backward of
//                                         model/fused_cpu.h, the CPU's fastest
//   AutogradStep  train/autograd_step.h   LibTorch's autograd op by op, the reference
//   DeviceStep    train/device_step.h     a GPU's, its state on the device, captured as a
//                                         CUDA graph (uncaptured where capture is off)
// train/step_factory.h picks one, as train.step asks. Shapes: M members.
#include <cstdint>
#include <memory>
#include <string>

#include <c10/core/Device.h>
#include <torch/types.h>

#include "config/config.h"
#include "model/encoder.h"

namespace copytask {

struct TrainData;

class TrainingStep {
 public:
  TrainingStep() = default;
  TrainingStep(const TrainingStep&) = delete;  // a step owns its optimizer's state and its batches' streams
  TrainingStep& operator=(const TrainingStep&) = delete;
  virtual ~TrainingStep() = default;

  // Runs one step; returns each member's loss (M), detached (reading it syncs a GPU).
  virtual torch::Tensor run() = 0;
  // Adam's learning rate for the steps that follow (train_members sets it from the schedule).
  virtual void set_lr(double lr) = 0;
  // Which step runs, as run.json, result.json and bench record it: "fused CPU", "CUDA graph"
  // (a DeviceStep, captured) or "autograd" (LibTorch's ops, uncaptured: an AutogradStep, or
  // a DeviceStep that does not capture). A DeviceStep's may change once, after its warm-up,
  // when its capture fails: read it again after the loop.
  virtual std::string name() const = 0;
  // Why the batch runs on the autograd step where a faster one was meant to run it ("" when
  // it does not): a CPU batch the fused kernel cannot run, or a CUDA graph whose capture
  // failed.
  virtual std::string fallback_reason() const = 0;
  // B: examples per member per step (the train split's size for a full batch).
  virtual int64_t batch_size() const = 0;
};

}  // namespace copytask
