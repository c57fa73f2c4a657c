// The GPU's training step with its state on the device (train/device_step.h), checked on
// the CPU where it runs uncaptured: Adam with its step count on the device against
// torch::optim::Adam; the dropout keys computed on the device, and the GPU kernel's mask of
// one element (kernels/dropout_bits.h), against the host's stream; and the whole step against
// the AutogradStep, step by step. (The captured step against the uncaptured one,
// and the kernel itself, need a GPU: tests/test_cuda.cpp.) And the FLOP count the bench
// divides by the step time to give the rate a GPU step achieves.
#include <gtest/gtest.h>

#include <torch/optim/adam.h>

#include "model/dropout_stream.h"
#include "task/copy_task.h"
#include "step_compare.h"
#include "test_util.h"
#include "train/bench.h"
#include "train/cuda_graph.h"
#include "train/device_adam.h"
#include "train/device_step.h"
#include "train/trainer.h"

namespace copytask {
namespace {

// Parameters of a few shapes, the same values twice.
std::vector<torch::Tensor> some_parameters(uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<torch::Tensor> parameters;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{3, 5}, {7}, {2, 4, 6}})
    parameters.push_back(torch::randn(shape).requires_grad_(true));
  return parameters;
}

TEST(DeviceStep, AdamWithItsStepCountOnTheDeviceIsTorchsAdam) {
  auto ours = some_parameters(1), theirs = some_parameters(1);
  DeviceAdam device_adam(ours, 1e-2);
  torch::optim::Adam adam(theirs, torch::optim::AdamOptions(1e-2));
  double worst = 0;
  for (int step = 1; step <= 40; ++step) {
    // A schedule: the rate changes, as the warm-up and the cosine make it.
    const double lr = step <= 10 ? 1e-2 * step / 10 : 1e-2 * (1.0 - (step - 10) / 40.0);
    device_adam.set_lr(lr);
    for (auto& group : adam.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    torch::manual_seed(100 + step);
    for (size_t i = 0; i < ours.size(); ++i) {
      // Gradients of every size, some near eps, the same for both.
      auto grad = torch::randn(ours[i].sizes()) * std::pow(10.0, (step % 7) - 5);
      ours[i].mutable_grad() = grad.clone();
      theirs[i].mutable_grad() = grad.clone();
    }
    device_adam.step();
    adam.step();
    for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, test::max_abs_diff(ours[i], theirs[i]));
  }
  EXPECT_EQ(device_adam.step_count().item<double>(), 40.0);
  EXPECT_EQ(device_adam.step_count().device(), ours[0].device());
  std::printf("DeviceAdam against torch::optim::Adam over 40 steps: largest parameter difference %.2e\n", worst);
  EXPECT_LT(worst, 1e-6);
  // A parameter without a gradient is left alone, as torch::optim::Adam leaves it.
  const auto before = ours[1].detach().clone();
  ours[1].mutable_grad() = torch::Tensor();
  device_adam.step();
  EXPECT_EQ(test::max_abs_diff(ours[1], before), 0.0);
}

TEST(DeviceStep, DropoutKeysFromTheDevicesStepCountAreTheStreams) {
  const std::vector<uint64_t> member_keys = {0, 1, 0x8000000000000001ULL, 0xFFFFFFFFFFFFFFFFULL, 12345678901234567ULL};
  std::vector<int64_t> as_int64;
  for (uint64_t key : member_keys) as_int64.push_back(static_cast<int64_t>(key));
  const auto keys = torch::tensor(as_int64, torch::kLong);
  for (int64_t step : {0, 1, 2, 1999, 123456789}) {
    const DropoutStream stream(member_keys, static_cast<uint64_t>(step), 0.1);
    const auto on_device = dropout_step_keys(keys, torch::full({}, step, torch::kLong));  // (M)
    for (size_t m = 0; m < member_keys.size(); ++m) {
      EXPECT_EQ(static_cast<uint64_t>(on_device[static_cast<int64_t>(m)].item<int64_t>()), stream.step_keys[m])
          << "step " << step << " member " << m;
      // The GPU kernel's element-by-element mask (kernels/dropout_bits.h) is fill()'s.
      std::vector<float> row(1003);
      stream.fill(static_cast<int64_t>(m), 5, 1003, row.data());
      int64_t differing = 0;
      for (int64_t i = 0; i < 1003; ++i)
        differing += dropout_mask_of(stream.step_keys[m], 5 + i, stream.threshold, stream.kept_value) != row[i];
      EXPECT_EQ(differing, 0) << "step " << step << " member " << m;
    }
  }
  // And the encoder's masks at a step held in a tensor are the masks it draws at that step.
  Encoder model(test::small_shape(0.1), std::vector<MemberSpec>{{"rope", 3, "rope", false}, {"t5", 4, "t5", true}},
                torch::kCPU);
  for (int64_t step = 0; step < 3; ++step) {
    ASSERT_EQ(model->next_dropout_step(), step);
    const DropoutMasks at = model->dropout_masks_at(17, torch::full({}, step, torch::kLong));
    const DropoutMasks drawn = model->dropout_masks(17);
    for (int64_t block = 0; block < model->shape().blocks; ++block)
      for (DropoutSite site : {kAttentionWeights, kAttentionOutput, kHidden, kFeedForwardOutput})
        EXPECT_EQ(test::max_abs_diff(at.site(block, site), drawn.site(block, site)), 0.0) << "step " << step;
  }
}

TrainData small_task(int64_t examples) {
  TaskConfig task;
  task.examples = examples;
  return train_data_upload(copy_task_generate(task), torch::kCPU);
}

// The device step, uncaptured on the CPU, trains as the autograd step (step_compare.h).
TEST(DeviceStep, UncapturedItTrainsAsTheAutogradStepFullBatch) {
  test::expect_device_step_trains_like_the_autograd_step(0, DeviceStepKernels::autograd, "autograd");
}
TEST(DeviceStep, UncapturedItTrainsAsTheAutogradStepMinibatches) {
  test::expect_device_step_trains_like_the_autograd_step(16, DeviceStepKernels::autograd, "autograd");
}

// Where LibTorch has no CUDA (this machine's), a CUDA graph says so and captures nothing;
// training_step_make on the CPU never makes the device step.
TEST(DeviceStep, WithoutCudaNoGraphIsCaptured) {
  if (!cuda_graph_unavailable().empty()) {
    CudaGraph graph;
    bool ran = false;
    EXPECT_THROW(graph.capture([&] { ran = true; }), std::runtime_error);
    EXPECT_FALSE(ran);
  }
  const TrainData data = small_task(150);
  Encoder model(test::small_shape(), std::vector<MemberSpec>{{"rope", 0, "rope", false}}, torch::kCPU);
  const auto step = training_step_make(model, data, TrainConfig{});
  EXPECT_EQ(step->name(), "fused CPU");
}

// The reference study's step is about 110 GFLOP for its 30 members (9000 examples each): the
// count the bench uses agrees, and grows as the work does.
TEST(Bench, TheStepsFlopsAreAbout110GflopForTheReferenceStudy) {
  const EncoderShape reference;  // the reference protocol: V 11, T 10, D 20, H 1, L 2, F 32
  const double flops = training_step_flops(reference, 30.0 * 9000.0);
  EXPECT_NEAR(flops, 110e9, 0.01 * 110e9);
  EXPECT_DOUBLE_EQ(training_step_flops(reference, 60.0 * 9000.0), 2 * flops);  // linear in the examples
  EncoderShape deeper = reference;
  deeper.blocks = 4;
  const double head = 3 * 2.0 * 10 * 20 * 11 * 30 * 9000;  // the output layer, outside the blocks
  EXPECT_NEAR(training_step_flops(deeper, 30.0 * 9000.0) - head, 2 * (flops - head), 1.0);  // blocks double
}

}  // namespace
}  // namespace copytask
