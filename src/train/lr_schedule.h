#pragma once
// The learning rate at each step: a linear warm-up, then constant or a cosine decay.
#include <cstdint>

#include "config/config.h"

namespace copytask {

// Adam's learning rate for step s = 1..train.steps. With W = train.warmup_steps and
// S = train.steps:
//   s <= W:  lr * s / W                                    (linear warm-up from lr / W)
//   s >  W:  lr                                            (train.lr_schedule = "constant")
//            lr * (1 + cos(pi * (s - W - 1) / (S - W))) / 2 ("cosine": lr at the first step
//                                                          after the warm-up, towards 0 at S)
// With W = 0 and "constant" it is train.lr at every step (the reference protocol).
double scheduled_lr(const TrainConfig& train, int64_t step);

}  // namespace copytask
