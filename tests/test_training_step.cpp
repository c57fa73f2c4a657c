// train.step picks the training step (train/training_step.h): what training_step_make makes
// for each choice on the CPU and what it records; "fused-cpu" refused on a GPU before any work
// (checked with a CUDA device value: no GPU needed), and an unknown choice refused; the
// memory estimate counts autograd's activations where the choice makes the CPU use them.
#include <gtest/gtest.h>

#include "study/study_checks.h"
#include "task/copy_task.h"
#include "test_util.h"
#include "train/memory_estimate.h"
#include "train/training_step.h"
#include "train/trainer.h"

namespace copytask {
namespace {

TrainData small_data() {
  TaskConfig task;
  task.examples = 150;
  return train_data_upload(copy_task_generate(task), torch::kCPU);
}

TEST(TrainingStep, TrainStepPicksTheStepOnTheCpu) {
  const TrainData data = small_data();
  const std::vector<MemberSpec> members = {{"rope", 0, "rope", false}, {"t5", 1, "t5", true}};
  struct Case {
    std::string choice, name;
  };
  for (const Case& c : {Case{"auto", "fused CPU"}, Case{"fused-cpu", "fused CPU"}, Case{"autograd", "autograd"}}) {
    for (int64_t batch_size : {int64_t{0}, int64_t{16}}) {
      Encoder model(test::small_shape(0.1), members, torch::kCPU);
      TrainConfig train;
      train.step = c.choice;
      train.batch_size = batch_size;
      const auto step = training_step_make(model, data, train);
      EXPECT_EQ(step->name(), c.name) << c.choice;
      // Asked for, the autograd step is no fallback: nothing faster was meant.
      EXPECT_EQ(step->fallback_reason(), "") << c.choice;
      EXPECT_EQ(step->batch_size(), batch_size == 0 ? data.train_inputs.size(0) : batch_size);
      EXPECT_EQ(step->run().sizes(), torch::IntArrayRef({2})) << "each member's loss";
    }
  }
  Encoder model(test::small_shape(0.1), members, torch::kCPU);
  TrainConfig unknown;
  unknown.step = "fast";
  try {
    training_step_make(model, data, unknown);
    ADD_FAILURE() << "an unknown train.step must be refused";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("must be auto, fused-cpu, fused-gpu or autograd"), std::string::npos) << error.what();
  }
}

// The fused CPU step runs on the CPU only: on a GPU "fused-cpu" is refused, naming the key and what
// to set, before any work; auto and autograd train there (the device step).
TEST(TrainingStep, FusedIsRefusedOnAGpuBeforeAnyWork) {
  const c10::Device gpu(c10::kCUDA, 0);
  TrainConfig train;
  for (const char* choice : {"auto", "autograd"}) {
    train.step = choice;
    EXPECT_EQ(training_step_refusal(train, gpu), "") << choice;
  }
  train.step = "fused-cpu";
  EXPECT_EQ(training_step_refusal(train, c10::Device(c10::kCPU)), "");
  const std::string refusal = training_step_refusal(train, gpu);
  for (const char* fragment : {"train.step = \"fused-cpu\"", "CPU only", "cuda:0", "train.step=auto", "train.device=cpu"})
    EXPECT_NE(refusal.find(fragment), std::string::npos) << fragment << " missing from: " << refusal;

  // A study names the scheme whose step cannot run; the others pass.
  Config base;
  base.compare.schemes = {SchemeSpec{"sin", {{"model.positional", "sinusoidal"}}},
                          SchemeSpec{"rope-fused", {{"model.positional", "rope"}, {"train.step", "fused"}}}};  // the old name
  const std::vector<StudyArm> arms = study_arms_for_compare(base);
  EXPECT_NO_THROW(study_check_training_steps(arms, c10::Device(c10::kCPU)));
  try {
    study_check_training_steps(arms, gpu);
    ADD_FAILURE() << "fused on a GPU must be refused";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), "compare scheme 'rope-fused': " + refusal);
  }
}

// On the CPU train.step = autograd holds the whole batch's activations (counted whole, on the
// high side), where the fused step holds one example's: the estimate says so.
TEST(TrainingStep, TheMemoryEstimateCountsTheAutogradStepsActivations) {
  Config config;
  const double fused = memory_estimate(config, 5, torch::kCPU).training_bytes;
  config.train.step = "autograd";
  const double autograd = memory_estimate(config, 5, torch::kCPU).training_bytes;
  EXPECT_GT(autograd, 2 * fused);
  config.train.step = "fused-cpu";
  EXPECT_EQ(memory_estimate(config, 5, torch::kCPU).training_bytes, fused);
}

}  // namespace
}  // namespace copytask
