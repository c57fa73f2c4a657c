#pragma once
// The CPU's fastest training step: the hand-written forward and backward of
// model/fused_cpu.h, example by example (docs/performance.md), then the schemes' tables'
// gradients carried on to their parameters, then the host's Adam. Its gradients are set,
// not accumulated, so it needs no zeroing. Shapes: M members, B batch, T positions.
#include <string>

#include "train/host_adam.h"
#include "train/step_batches.h"
#include "train/training_step.h"

namespace copytask {

class FusedCpuStep final : public TrainingStep {
 public:
  // Throws std::invalid_argument saying why where fused_cpu_unsupported(model) is not empty.
  FusedCpuStep(Encoder& model, const TrainData& data, const TrainConfig& train);

  torch::Tensor run() override;
  void set_lr(double lr) override { adam_.set_lr(lr); }
  std::string name() const override { return "fused CPU"; }
  std::string fallback_reason() const override { return ""; }
  int64_t batch_size() const override { return batches_.batch_size(); }

 private:
  Encoder& model_;
  HostAdam adam_;
  StepBatches batches_;
  int64_t positions_;  // T
};

}  // namespace copytask
