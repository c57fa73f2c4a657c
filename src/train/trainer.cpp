#include "train/trainer.h"

#include <chrono>

#include "train/lr_schedule.h"
#include "train/step_factory.h"

namespace copytask {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TrainOutcome train_members(Encoder& model, const TrainData& data, const TrainConfig& train,
                           const EvaluationCallback& on_evaluation, const StepCallback& on_step,
                           const StartCallback& on_start) {
  const std::unique_ptr<TrainingStep> training_step = training_step_make(model, data, train);
  if (on_start) on_start(*training_step);
  TrainOutcome outcome;
  const auto loop_start = std::chrono::steady_clock::now();
  double evaluation_seconds = 0;
  for (int64_t step = 1; step <= train.steps; ++step) {
    if (stop_requested()) throw Interrupted();
    training_step->set_lr(scheduled_lr(train, step));
    const torch::Tensor member_loss = training_step->run();  // (M)
    if (on_step) on_step(step, member_loss);

    if (step % train.eval_every == 0 || step == train.steps) {
      const auto evaluation_start = std::chrono::steady_clock::now();
      Evaluation evaluation;
      evaluation.step = step;
      evaluation.train = evaluate_split(model, data.train_evaluated_inputs, data.train_evaluated_targets, data.noise_token);
      evaluation.test = evaluate_split(model, data.test_inputs, data.test_targets, data.noise_token);
      if (!data.lengths.empty()) evaluation.lengths = evaluate_lengths(model, data.lengths);
      if (!data.lengths.empty() && step == train.steps) evaluation.rescaled = evaluate_rope_rescalings(model, data.lengths);
      evaluation_seconds += seconds_since(evaluation_start);
      evaluation.seconds = seconds_since(loop_start) - evaluation_seconds;
      if (on_evaluation) on_evaluation(evaluation);
      outcome.final = evaluation;
    }
  }
  outcome.steps = train.steps;
  outcome.seconds = seconds_since(loop_start);
  // After the loop: a capture that failed after the warm-up shows here.
  outcome.training_step = training_step->name();
  outcome.fallback_reason = training_step->fallback_reason();
  return outcome;
}

}  // namespace copytask
