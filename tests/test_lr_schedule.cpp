// The learning-rate schedule (train/lr_schedule.h): its closed form, and that both training
// steps take each step's rate from it.
#include <gtest/gtest.h>

#include <cmath>

#include "task/copy_task.h"
#include "test_util.h"
#include "train/lr_schedule.h"
#include "train/trainer.h"

namespace copytask {
namespace {

TrainConfig schedule(double lr, int64_t steps, int64_t warmup, const std::string& decay) {
  TrainConfig train;
  train.lr = lr;
  train.steps = steps;
  train.warmup_steps = warmup;
  train.lr_schedule = decay;
  train.batch_size = 32;
  train.eval_every = 1000;
  return train;
}

TEST(LrSchedule, TheDefaultIsTheConstantRateAtEveryStep) {
  const TrainConfig train;  // the reference protocol: no warm-up, constant
  for (int64_t step : {1, 2, 999, 2000}) EXPECT_EQ(scheduled_lr(train, step), train.lr);
}

TEST(LrSchedule, WarmUpThenConstantOrCosineFollowTheirClosedForms) {
  const TrainConfig constant = schedule(4e-3, 10, 4, "constant");
  const double warm[] = {1e-3, 2e-3, 3e-3, 4e-3};  // lr * s / 4
  for (int64_t s = 1; s <= 4; ++s) EXPECT_NEAR(scheduled_lr(constant, s), warm[s - 1], 1e-15) << "step " << s;
  for (int64_t s = 5; s <= 10; ++s) EXPECT_EQ(scheduled_lr(constant, s), 4e-3) << "step " << s;

  const TrainConfig cosine = schedule(4e-3, 10, 4, "cosine");
  for (int64_t s = 1; s <= 4; ++s) EXPECT_NEAR(scheduled_lr(cosine, s), warm[s - 1], 1e-15) << "step " << s;
  // After the warm-up, S - W = 6 steps: progress (s - 5) / 6.
  EXPECT_NEAR(scheduled_lr(cosine, 5), 4e-3, 1e-15);                                   // cos 0 = 1
  EXPECT_NEAR(scheduled_lr(cosine, 8), 2e-3, 1e-15);                                   // cos(pi / 2) = 0
  EXPECT_NEAR(scheduled_lr(cosine, 10), 4e-3 * (1 + std::cos(M_PI * 5 / 6)) / 2, 1e-15);  // 0.27e-3
  EXPECT_GT(scheduled_lr(cosine, 10), 0) << "the last step still trains";
  for (int64_t s = 5; s < 10; ++s) EXPECT_GT(scheduled_lr(cosine, s), scheduled_lr(cosine, s + 1)) << "step " << s;

  // Cosine without a warm-up starts at the full rate.
  EXPECT_EQ(scheduled_lr(schedule(1e-3, 100, 0, "cosine"), 1), 1e-3);
}

TrainData task_data() {
  TaskConfig task;
  task.examples = 400;
  return train_data_upload(copy_task_generate(task), torch::kCPU);
}

std::vector<torch::Tensor> parameters_copy(Encoder& model) {
  std::vector<torch::Tensor> copy;
  for (const auto& p : model->parameters()) copy.push_back(p.detach().clone());
  return copy;
}

double largest_move(Encoder& model, const std::vector<torch::Tensor>& before) {
  double largest = 0;
  const auto after = model->parameters();
  for (size_t i = 0; i < before.size(); ++i) largest = std::max(largest, test::max_abs_diff(after[i], before[i]));
  return largest;
}

// Adam's first step moves each parameter by lr * g / (|g| + eps): by the step's rate exactly
// where the gradient is far above eps. So the largest move after one step is the rate set.
TEST(LrSchedule, BothTrainingStepsMoveTheParametersByTheRateSet) {
  const TrainData data = task_data();
  const std::vector<MemberSpec> members = {{"rope", 0, "rope", false}, {"alibi+causal", 1, "alibi", true}};
  for (bool fused : {true, false}) {
    for (double lr : {1e-3, 2.5e-4}) {
      Encoder model(test::small_shape(0.1), members, torch::kCPU);
      const auto owned = training_step_make(model, data, test::with_step(schedule(1.0, 10, 0, "constant"), fused));
      TrainingStep& step = *owned;
      ASSERT_EQ(step.name(), fused ? "fused CPU" : "autograd");
      const auto before = parameters_copy(model);
      step.set_lr(lr);
      step.run();
      EXPECT_NEAR(largest_move(model, before), lr, lr * 1e-3) << (fused ? "fused" : "autograd") << " lr " << lr;
    }
  }
}

// train_members sets each step's rate from the schedule: the same as setting those rates by
// hand, and not the same as the constant peak.
TEST(LrSchedule, TrainingFollowsTheScheduleStepByStep) {
  const TrainData data = task_data();
  const std::vector<MemberSpec> members = {{"sinusoidal", 3, "sinusoidal", false}};
  auto trained = [&](const TrainConfig& train) {
    Encoder model(test::small_shape(0.1), members, torch::kCPU);
    train_members(model, data, train, nullptr);
    return parameters_copy(model);
  };
  auto by_hand = [&](const std::vector<double>& rates) {
    Encoder model(test::small_shape(0.1), members, torch::kCPU);
    const auto owned = training_step_make(model, data, schedule(1.0, 10, 0, "constant"));
    TrainingStep& step = *owned;
    for (double lr : rates) {
      step.set_lr(lr);
      step.run();
    }
    return parameters_copy(model);
  };
  auto difference = [](const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, test::max_abs_diff(a[i], b[i]));
    return d;
  };
  const auto cosine = trained(schedule(2e-3, 4, 2, "cosine"));
  // Warm-up 1e-3, 2e-3; then 2e-3 * (1 + cos(0)) / 2 and 2e-3 * (1 + cos(pi / 2)) / 2.
  EXPECT_EQ(difference(cosine, by_hand({1e-3, 2e-3, 2e-3, 1e-3})), 0.0);
  EXPECT_GT(difference(cosine, by_hand({2e-3, 2e-3, 2e-3, 2e-3})), 1e-4) << "the schedule changed the training";
}

}  // namespace
}  // namespace copytask
