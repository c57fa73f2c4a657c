#include "train/lr_schedule.h"

#include <cmath>

namespace copytask {

double scheduled_lr(const TrainConfig& train, int64_t step) {
  const int64_t warmup = train.warmup_steps;
  if (step <= warmup) return train.lr * static_cast<double>(step) / static_cast<double>(warmup);
  if (train.lr_schedule != "cosine") return train.lr;
  // The decay's progress: 0 at the first step after the warm-up, (S - W - 1) / (S - W) at
  // the last, so no step is wasted at a learning rate of exactly zero.
  const double progress = static_cast<double>(step - warmup - 1) / static_cast<double>(train.steps - warmup);
  return train.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace copytask
