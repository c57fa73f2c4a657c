// A member in a batch of members trains like a lone run of the same seed and scheme
// (docs/design.md section 3): same loss curve over 20 steps, with dropout and minibatches on.
#include <gtest/gtest.h>

#include "task/copy_task.h"
#include "test_util.h"
#include "train/autograd_step.h"
#include "train/trainer.h"

namespace copytask {
namespace {

// Relative tolerance on each step's loss: batched matmuls may sum in another order than
// a lone run's, so the last bits can differ; 20 steps keep that far below 1e-4.
constexpr double kRelativeTolerance = 1e-4;

TrainData task_data(int64_t examples) {
  TaskConfig task;
  task.examples = examples;
  return train_data_upload(copy_task_generate(task), torch::kCPU);
}

std::vector<std::vector<double>> loss_curves(const std::vector<MemberSpec>& members, const TrainData& data,
                                             const TrainConfig& train) {
  Encoder model(test::small_shape(0.1), members, torch::kCPU);
  std::vector<std::vector<double>> curves(members.size());
  train_members(model, data, train, nullptr, [&](int64_t, const torch::Tensor& loss) {
    for (size_t m = 0; m < members.size(); ++m) curves[m].push_back(loss[m].item<double>());
  });
  return curves;
}

TEST(Members, EachMemberOfABatchFollowsItsLoneRunsLossCurve) {
  const TrainData data = task_data(600);
  TrainConfig train;
  train.steps = 20;
  train.batch_size = 32;
  train.lr = 3e-3;
  train.eval_every = 1000;

  const std::vector<MemberSpec> batch = {{"sinusoidal", 0, "sinusoidal", false},
                                         {"rope", 1, "rope", false},
                                         {"alibi+causal", 2, "alibi", true},
                                         {"learned", 3, "learned", false},
                                         {"none", 4, "none", false}};
  const auto batched = loss_curves(batch, data, train);
  double worst = 0;
  for (size_t m = 0; m < batch.size(); ++m) {
    const auto lone = loss_curves({batch[m]}, data, train)[0];
    ASSERT_EQ(lone.size(), 20u);
    for (size_t step = 0; step < lone.size(); ++step) {
      const double relative = std::abs(lone[step] - batched[m][step]) / std::max(1.0, std::abs(lone[step]));
      worst = std::max(worst, relative);
      EXPECT_LT(relative, kRelativeTolerance) << batch[m].arm << " step " << step + 1;
    }
    // The loss really moved: the comparison is over a real training curve.
    EXPECT_LT(lone.back(), lone.front() - 0.1) << batch[m].arm;
  }
  std::printf("largest relative loss difference, batched vs lone, over 20 steps: %.2e\n", worst);

  // And the check can fail: another seed of the same scheme follows another curve.
  const auto other_seed = loss_curves({{"rope", 11, "rope", false}}, data, train)[0];
  EXPECT_GT(std::abs(other_seed[5] - batched[1][5]), 1e-3);
}

TEST(Members, FullBatchMembersMatchLoneRunsToo) {
  const TrainData data = task_data(300);
  TrainConfig train;
  train.steps = 5;
  train.batch_size = 0;
  train.eval_every = 1000;
  const std::vector<MemberSpec> batch = {{"learned", 3, "learned", false}, {"rope", 1, "rope", true}};
  const auto batched = loss_curves(batch, data, train);
  for (size_t m = 0; m < batch.size(); ++m) {
    const auto lone = loss_curves({batch[m]}, data, train)[0];
    for (size_t step = 0; step < lone.size(); ++step)
      EXPECT_NEAR(lone[step], batched[m][step], kRelativeTolerance * std::max(1.0, lone[step]));
  }
}

// A CPU full-batch step runs in chunks of examples: chunked, the step must be the same
// step (the same dropout masks per example, the loss weighted to the full-batch mean),
// only summed in another order.
TEST(Members, ChunkedFullBatchStepEqualsTheWholeBatchStep) {
  const TrainData data = task_data(400);  // 360 train examples: chunks of 64 leave a tail of 40
  TrainConfig train;
  train.batch_size = 0;
  train.lr = 3e-3;
  const std::vector<MemberSpec> members = {{"rope", 1, "rope", true}, {"learned", 2, "learned", false}};
  auto losses = [&](int64_t chunk) {
    Encoder model(test::small_shape(0.1), members, torch::kCPU);
    AutogradStep step(model, data, train, chunk);
    std::vector<torch::Tensor> out;
    for (int i = 0; i < 6; ++i) out.push_back(step.run());
    out.push_back(model->parameters()[0].detach().clone());  // where the steps led
    return out;
  };
  const auto whole = losses(1 << 20), chunked = losses(64);
  for (size_t i = 0; i < whole.size(); ++i)
    EXPECT_LT(test::max_abs_diff(whole[i], chunked[i]), 2e-5) << "step " << i + 1;
  EXPECT_GT(test::max_abs_diff(whole[0], whole[5]), 1e-3) << "the loss moved: the steps really trained";
}

}  // namespace
}  // namespace copytask
