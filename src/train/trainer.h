#pragma once
// The training loop: the batch's training step (train/training_step.h: Adam over the
// stacked parameters, element-wise, so exactly M independent optimizers; full batch or
// per-member seeded minibatches) with the learning-rate schedule, evaluation every
// eval_every steps and at the last one. Shapes: M members.
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "config/config.h"
#include "model/encoder.h"
#include "train/evaluate.h"
#include "train/interrupt.h"
#include "train/train_data.h"
#include "train/training_step.h"

namespace copytask {

struct Evaluation {
  int64_t step = 0;
  double seconds = 0;  // training time so far, evaluations excluded
  std::vector<SplitScores> train, test;  // one per member
  std::vector<std::vector<LengthScores>> lengths;  // [member][length]; empty without length sets
  // RoPE's rescalings at every length (eval.rope_rescaling): at the last evaluation only.
  std::vector<RescaledLengths> rescaled;
};

struct TrainOutcome {
  Evaluation final;      // the evaluation after the last step
  int64_t steps = 0;
  double seconds = 0;    // wall time of the whole loop, evaluations included
  std::string training_step;    // TrainingStep::name() at the end
  std::string fallback_reason;  // TrainingStep::fallback_reason() at the end
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
