#pragma once
// The training loop: Adam over the stacked parameters (element-wise, so exactly M
// independent optimizers), full batch or per-member seeded minibatches, evaluation every
// eval_every steps and at the last one. Shapes: M members, B batch, N examples, T positions.
#include <functional>
#include <vector>

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
};
TrainData train_data_upload(const CopyTask& task, const torch::Device& device);

struct Evaluation {
  int64_t step = 0;
  double seconds = 0;  // training time so far, evaluations excluded
  std::vector<SplitScores> train, test;  // one per member
};

struct TrainOutcome {
  Evaluation final;      // the evaluation after the last step
  int64_t steps = 0;
  double seconds = 0;    // wall time of the whole loop, evaluations included
};

// Called after every evaluation (to append metrics), and after every step with each
// member's loss (M), detached, for a progress display (reading it synchronises a GPU).
using EvaluationCallback = std::function<void(const Evaluation&)>;
using StepCallback = std::function<void(int64_t step, const torch::Tensor& member_loss)>;

TrainOutcome train_members(Encoder& model, const TrainData& data, const TrainConfig& train,
                           const EvaluationCallback& on_evaluation, const StepCallback& on_step = nullptr);

}  // namespace copytask
