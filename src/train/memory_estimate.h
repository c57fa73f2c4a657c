#pragma once
// How much memory training a batch of members takes, estimated from the config alone
// (nothing allocated), so a study that cannot fit is refused before any work instead of
// failing an allocation minutes in. Deliberately on the high side: every buffer the task
// generator, the training step and the evaluation hold at their peak, counted in full.
#include <cstdint>
#include <string>

#include <c10/core/Device.h>

#include "config/config.h"

namespace copytask {

struct MemoryEstimate {
  double data_bytes = 0;      // the copy task: generation, its splits and their tensors (host)
  double training_bytes = 0;  // parameters, gradients, Adam, the step's buffers, evaluation (on the device)
  double process_bytes = 0;   // LibTorch and the process itself (host)
  double host() const;        // what the host must hold (training too when the device is the CPU)
  double device = 0;          // what a GPU must hold (0 on the CPU)
};

// The memory of training `members` members of one batch with this config on `device`.
MemoryEstimate memory_estimate(const Config& config, int64_t members, const c10::Device& device);

// "1.5 GiB", "320 MiB".
std::string bytes_text(double bytes);

}  // namespace copytask
