#pragma once
// How a running study reports its progress: as data, to callbacks the caller provides
// (src/cli/ prints them as a live terminal line or log lines). The library prints nothing
// of it itself.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace copytask {

// Which batch of the run, and its length in steps.
struct BatchPosition {
  size_t index = 0, count = 1;  // 0-based index among `count` batches
  int64_t steps = 0;
};

struct StepProgress {
  BatchPosition batch;
  int64_t step = 0;
  const torch::Tensor* member_loss = nullptr;  // (M,) this step's training loss per member, on the device
};

struct EvaluationProgress {
  BatchPosition batch;
  int64_t step = 0;
  double seconds = 0;  // since the batch started training
  // Test exact-match per scheme of the batch (mean over its seeds), in the batch's order.
  std::vector<std::pair<std::string, double>> test_exact;
};

struct StudyProgress {
  std::function<void(const StepProgress&)> on_step;  // after every step: keep it cheap
  std::function<void(const EvaluationProgress&)> on_evaluation;
};

}  // namespace copytask
