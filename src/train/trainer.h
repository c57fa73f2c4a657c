#pragma once
// The training loop: Adam over the stacked parameters (element-wise, so exactly M
// independent optimizers), full batch or per-member seeded minibatches, evaluation every
// eval_every steps and at the last one. Shapes: M members, B batch, N examples, T positions.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/adam.h>
#include <torch/types.h>

#include "config/config.h"
#include "model/encoder.h"
#include "task/copy_task.h"
#include "train/evaluate.h"
#include "train/interrupt.h"

namespace copytask {

// The task's splits as (N, T) int64 tensors on one device.
struct TrainData {
  torch::Tensor train_inputs, train_targets, test_inputs, test_targets;
  LengthData lengths;  // length generalization's sets (empty when eval.max_len is 0)
};
TrainData train_data_upload(const CopyTask& task, const torch::Device& device);

struct Evaluation {
  int64_t step = 0;
  double seconds = 0;  // training time so far, evaluations excluded
  std::vector<SplitScores> train, test;  // one per member
  std::vector<std::vector<LengthScores>> lengths;  // [member][length]; empty without length sets
};

struct TrainOutcome {
  Evaluation final;      // the evaluation after the last step
  int64_t steps = 0;
  double seconds = 0;    // wall time of the whole loop, evaluations included
  std::string training_step;    // TrainingStep::name() at the end
  std::string fallback_reason;  // TrainingStep::fallback_reason() at the end
};

class MemberBatcher;
class DeviceStep;

// Each member's minibatch stream seed (from its own seed alone), for its MemberBatcher.
std::vector<uint64_t> minibatch_seeds(const std::vector<MemberSpec>& members);

// On the autograd path (the CPU step when the fused kernel is switched off or cannot run
// the model), a full-batch step runs in chunks of this many examples per member, so each
// chunk's activations stay in the caches instead of streaming through memory pass after
// pass (measured with copytask bench; see docs/performance.md). Fixed, not derived from
// the member count: a member's results must not depend on its neighbours.
// Measured (bench, reference config, 2 cores): 1 member 2.67 -> 2.85 member-steps/s,
// 5 members 1.64 -> 2.88, 30 members 0.93 -> 2.49 (and 9.2 -> 2.3 GB resident).
inline constexpr int64_t kCpuChunkExamples = 256;

// How a training step runs on the CPU. fused: the hand-written forward and backward of
// model/fused_cpu.h (the default wherever it supports the model); otherwise LibTorch's
// autograd, a full batch in chunks of cpu_chunk_examples examples per member. On a GPU the
// step is train/device_step.h's, captured as a CUDA graph when train.cuda_graph is on.
struct StepOptions {
  bool fused_cpu = true;
  int64_t cpu_chunk_examples = kCpuChunkExamples;
};

// One training step of a batch of members: the next batch (full, or each member's own
// minibatch), this step's dropout masks, forward, the summed loss, backward, Adam. The
// training loop repeats it; `copytask bench` times it.
class TrainingStep {
 public:
  TrainingStep(Encoder& model, const TrainData& data, const TrainConfig& train, StepOptions options = {});
  ~TrainingStep();
  // Runs one step; returns each member's loss (M), detached (reading it syncs a GPU).
  torch::Tensor run();
  // Adam's learning rate for the steps that follow (train_members sets it from the schedule).
  void set_lr(double lr);
  int64_t batch_size() const { return batch_size_; }  // examples per member per step
  bool fused() const { return fused_; }                 // runs model/fused_cpu.h's step
  // Which step runs, as run.json, result.json and bench record it: "fused CPU", "CUDA graph"
  // (train/device_step.h, captured) or "autograd" (LibTorch's ops, uncaptured).
  std::string name() const;
  // Why a batch runs on the autograd step where a faster one was meant to run it ("" when
  // it does not): a CPU batch the fused kernel cannot run, or a CUDA graph whose capture
  // failed.
  std::string fallback_reason() const;

 private:
  Encoder& model_;
  const TrainData& data_;
  torch::optim::Adam optimizer_;
  std::unique_ptr<MemberBatcher> batcher_;
  int64_t members_, positions_;
  bool full_batch_;
  int64_t batch_size_;
  int64_t cpu_chunk_examples_;  // full batch on the CPU: examples per member per chunk
  bool fused_;
  std::string fallback_reason_;
  torch::Tensor full_inputs_, full_targets_;  // (M, N, T) views of the train split, full batch only
  std::unique_ptr<DeviceStep> device_step_;   // on a GPU: the step with its state on the device
};

// Called after every evaluation (to append metrics), and after every step with each
// member's loss (M), detached, for a progress display (reading it synchronises a GPU).
// Called once before the first step with the step that will train (to log which it is).
using EvaluationCallback = std::function<void(const Evaluation&)>;
using StepCallback = std::function<void(int64_t step, const torch::Tensor& member_loss)>;
using StartCallback = std::function<void(const TrainingStep&)>;

TrainOutcome train_members(Encoder& model, const TrainData& data, const TrainConfig& train,
                           const EvaluationCallback& on_evaluation, const StepCallback& on_step = nullptr,
                           const StartCallback& on_start = nullptr);

}  // namespace copytask
