#pragma once
// The training step through LibTorch's autograd, op by op: Encoder::forward, member_losses,
// backward of their sum (each member gets exactly its own gradient), the host's Adam. The
// reference the faster steps are tested against, and the CPU's step where the fused kernel
// cannot run a batch or train.step asks for it. Shapes: M members, B batch, T positions,
// V vocab.
//
// A GPU's uncaptured autograd step is not this class but DeviceStep with capture off
// (train/device_step.h): the same ops, with the GPU step's Adam and dropout count on the
// device, so a batch whose capture fails after the warm-up goes on with the state it has.
#include <cstdint>
#include <string>

#include "train/host_adam.h"
#include "train/step_batches.h"
#include "train/training_step.h"

namespace copytask {

// On the CPU a full-batch step runs in chunks of this many examples per member, so each
// chunk's activations stay in the caches instead of streaming through memory pass after
// pass (measured with copytask bench; see docs/performance.md). Fixed, not derived from
// the member count: a member's results must not depend on its neighbours.
// Measured (bench, reference config, 2 cores): 1 member 2.67 -> 2.85 member-steps/s,
// 5 members 1.64 -> 2.88, 30 members 0.93 -> 2.49 (and 9.2 -> 2.3 GB resident).
inline constexpr int64_t kCpuChunkExamples = 256;

class AutogradStep final : public TrainingStep {
 public:
  // cpu_chunk_examples: a CPU full batch's examples per member per chunk. fallback_reason:
  // why the batch runs here where the fused step was meant to run it ("" when it was not).
  AutogradStep(Encoder& model, const TrainData& data, const TrainConfig& train,
               int64_t cpu_chunk_examples = kCpuChunkExamples, std::string fallback_reason = "");

  torch::Tensor run() override;
  void set_lr(double lr) override { adam_.set_lr(lr); }
  std::string name() const override { return "autograd"; }
  std::string fallback_reason() const override { return fallback_reason_; }
  int64_t batch_size() const override { return batches_.batch_size(); }

 private:
  Encoder& model_;
  HostAdam adam_;
  StepBatches batches_;
  int64_t cpu_chunk_examples_;  // full batch on the CPU: examples per member per chunk
  std::string fallback_reason_;
};

}  // namespace copytask
