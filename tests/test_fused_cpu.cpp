// The hand-written CPU training step (model/fused_cpu.h) against LibTorch's autograd
// through Encoder::forward: the same losses and every parameter's gradient, for every
// scheme, with and without the causal mask, one and several heads, with dropout masks;
// independent of the thread count; and the same training over several Adam steps.
// (test_parity.cpp checks it against the independent PyTorch fixtures too.)
#include <gtest/gtest.h>

#include "model/fused_cpu.h"
#include "task/copy_task.h"
#include "test_util.h"
#include "train/trainer.h"

namespace copytask {
namespace {

const std::vector<MemberSpec> kEverySchemeMembers = {
    {"none", 0, "none", false},       {"sinusoidal", 1, "sinusoidal", false}, {"learned", 2, "learned", false},
    {"rope", 3, "rope", false},       {"alibi", 4, "alibi", false},           {"alibi+causal", 5, "alibi", true},
    {"rope+causal", 6, "rope", true}, {"learned+causal", 7, "learned", true}};

struct StepResult {
  torch::Tensor loss;                // (M)
  std::vector<torch::Tensor> grads;  // one per parameter
};

std::vector<torch::Tensor> gradients_of(Encoder& model) {
  std::vector<torch::Tensor> out;
  for (auto& p : model->parameters())
    out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));  // unused: zero
  return out;
}

StepResult autograd_step(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                         const DropoutMasks* masks) {
  model->zero_grad();
  std::optional<DropoutMasks> copy;
  if (masks) copy.emplace(*masks);
  auto losses = member_losses(model->forward(inputs, copy ? &*copy : nullptr), targets);  // (M)
  losses.sum().backward();
  if (copy) {
    EXPECT_TRUE(copy->used_up()) << "the forward pass took every mask";
  }
  return {losses.detach(), gradients_of(model)};
}

StepResult fused_step(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                      const DropoutMasks* masks) {
  model->zero_grad();
  auto losses = fused_cpu_loss_backward(*model, inputs, targets, masks);
  return {losses, gradients_of(model)};
}

// The largest gradient difference relative to the gradient's own scale.
double worst_relative_gradient_difference(const StepResult& a, const StepResult& b, std::string* where = nullptr) {
  double worst = 0;
  for (size_t j = 0; j < a.grads.size(); ++j) {
    const double scale = std::max(1e-3, a.grads[j].abs().max().item<double>());
    const double relative = test::max_abs_diff(a.grads[j], b.grads[j]) / scale;
    if (relative > worst) {
      worst = relative;
      if (where) *where = "parameter " + std::to_string(j);
    }
  }
  return worst;
}

void expect_fused_equals_autograd(const EncoderShape& shape, int64_t batch, bool dropout) {
  Encoder model(shape, kEverySchemeMembers, torch::kCPU);
  const int64_t M = model->member_count();
  auto inputs = test::random_tokens(M, batch, shape, 11);
  auto targets = test::random_tokens(M, batch, shape, 12);
  std::optional<DropoutMasks> masks;
  if (dropout) masks.emplace(model->dropout_masks(batch));
  const StepResult reference = autograd_step(model, inputs, targets, masks ? &*masks : nullptr);
  const StepResult fused = fused_step(model, inputs, targets, masks ? &*masks : nullptr);

  EXPECT_LT(test::max_abs_diff(reference.loss, fused.loss), 1e-5);
  std::string where;
  const double worst = worst_relative_gradient_difference(reference, fused, &where);
  std::printf("  heads %lld, batch %lld, dropout %d: loss diff %.1e, worst relative gradient diff %.1e (%s)\n",
              static_cast<long long>(shape.heads), static_cast<long long>(batch), dropout ? 1 : 0,
              test::max_abs_diff(reference.loss, fused.loss), worst, where.c_str());
  EXPECT_LT(worst, 1e-4) << where;
  // Every parameter got a gradient that is not zero (except pos_emb, unused by most members).
  for (size_t j = 0; j < fused.grads.size(); ++j) EXPECT_GT(fused.grads[j].abs().max().item<double>(), 0.0) << j;
}

TEST(FusedCpu, SameLossAndGradientsAsAutogradForEverySchemeTwoHeadsWithDropout) {
  expect_fused_equals_autograd(test::small_shape(0.1), 70, true);
}

TEST(FusedCpu, SameLossAndGradientsAsAutogradOneHeadReferenceShape) {
  EncoderShape shape;  // the reference model: embed 20, 1 head, 2 blocks, FF 32
  shape.dropout = 0.1;
  expect_fused_equals_autograd(shape, 130, true);
  expect_fused_equals_autograd(shape, 9, false);
}

TEST(FusedCpu, FourHeadsThreeBlocksNoDropout) {
  EncoderShape shape;
  shape.embed = 16;
  shape.heads = 4;
  shape.blocks = 3;
  shape.hidden = 24;
  shape.dropout = 0.0;
  expect_fused_equals_autograd(shape, 40, false);
}

// The comparison can fail: masks other than the forward's give other gradients.
TEST(FusedCpu, OtherDropoutMasksGiveOtherGradients) {
  const EncoderShape shape = test::small_shape(0.1);
  Encoder model(shape, kEverySchemeMembers, torch::kCPU);
  auto inputs = test::random_tokens(model->member_count(), 50, shape, 11);
  auto targets = test::random_tokens(model->member_count(), 50, shape, 12);
  const DropoutMasks first = model->dropout_masks(50), second = model->dropout_masks(50);
  const StepResult reference = autograd_step(model, inputs, targets, &first);
  const StepResult other = fused_step(model, inputs, targets, &second);
  EXPECT_GT(worst_relative_gradient_difference(reference, other), 1e-2);
}

// The partitions fix the summation order: one thread or two, bit for bit the same.
TEST(FusedCpu, ResultDoesNotDependOnTheThreadCount) {
  const EncoderShape shape = test::small_shape(0.1);
  Encoder model(shape, kEverySchemeMembers, torch::kCPU);
  auto inputs = test::random_tokens(model->member_count(), 300, shape, 5);
  auto targets = test::random_tokens(model->member_count(), 300, shape, 6);
  const DropoutMasks masks = model->dropout_masks(300);
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const StepResult one = fused_step(model, inputs, targets, &masks);
  torch::set_num_threads(2);
  const StepResult two = fused_step(model, inputs, targets, &masks);
  torch::set_num_threads(threads);
  EXPECT_EQ(test::max_abs_diff(one.loss, two.loss), 0.0);
  EXPECT_EQ(worst_relative_gradient_difference(one, two), 0.0);
}

// Whole training steps (masks, fused forward and backward, Adam), full batch and
// minibatches: the fused trainer follows the autograd trainer's loss curve.
TEST(FusedCpu, TrainsLikeTheAutogradStep) {
  TaskConfig task;
  task.examples = 500;
  const TrainData data = train_data_upload(copy_task_generate(task), torch::kCPU);
  for (int64_t batch_size : {int64_t{0}, int64_t{32}}) {
    TrainConfig train;
    train.batch_size = batch_size;
    train.lr = 3e-3;
    auto curve = [&](bool fused) {
      Encoder model(test::small_shape(0.1), kEverySchemeMembers, torch::kCPU);
      TrainingStep step(model, data, train, StepOptions{fused});
      EXPECT_EQ(step.fused(), fused);
      std::vector<torch::Tensor> losses;
      for (int i = 0; i < 15; ++i) losses.push_back(step.run());
      return losses;
    };
    const auto autograd = curve(false), fused = curve(true);
    double worst = 0;
    for (size_t i = 0; i < autograd.size(); ++i) worst = std::max(worst, test::max_abs_diff(autograd[i], fused[i]));
    std::printf("  batch %lld: largest loss difference over 15 steps, fused vs autograd: %.1e\n",
                static_cast<long long>(batch_size), worst);
    EXPECT_LT(worst, 1e-4) << "batch size " << batch_size;
    EXPECT_GT(test::max_abs_diff(fused.front(), fused.back()), 0.05) << "the loss moved";
  }
}

}  // namespace
}  // namespace copytask
