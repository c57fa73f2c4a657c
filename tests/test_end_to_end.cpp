// End to end: a small training must learn the copy task with positions, and must not
// without them (the published outcome in miniature). About 10 seconds on 2 cores.
#include <chrono>

#include <gtest/gtest.h>

#include "compat/torch_compat.h"
#include "task/copy_task.h"
#include "train/trainer.h"

namespace copytask {
namespace {

TEST(EndToEnd, SinusoidalLearnsToCopyAndNoPositionsCannot) {
  threads_configure(0);
  const auto start = std::chrono::steady_clock::now();
  TaskConfig task;  // the reference task: vocab 11, context 10, lengths 1..8, 10000 examples
  const TrainData data = train_data_upload(copy_task_generate(task), torch::kCPU);
  EncoderShape shape;  // the reference model: embed 20, 1 head, 2 blocks, hidden 32, dropout 0.1
  Encoder model(shape, std::vector<MemberSpec>{{"sinusoidal", 0, "sinusoidal", false}, {"none", 0, "none", false}},
                torch::kCPU);
  TrainConfig train;  // the recipe of configs/quick.json, shorter
  train.steps = 700;
  train.batch_size = 128;
  train.lr = 2e-3;
  train.eval_every = 700;
  const TrainOutcome outcome = train_members(model, data, train, nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double sinusoidal = outcome.final.test[0].exact, none = outcome.final.test[1].exact;
  std::printf("test exact-match after 700 steps: sinusoidal %.3f, none %.3f (%.1f s)\n", sinusoidal, none, seconds);
  // Measured over seeds 0-3: sinusoidal 0.992-0.999, none 0.073-0.083.
  EXPECT_GE(sinusoidal, 0.95);
  EXPECT_LE(none, 0.20);
  EXPECT_EQ(outcome.final.train[0].exact >= 0.95, true) << "sinusoidal must fit the train split too";
}

}  // namespace
}  // namespace copytask
