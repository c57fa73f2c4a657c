#pragma once
// What this CPU's cores can do, measured: independent multiply-adds in registers, in the
// CPU kernels' active variant (model/cpu_variant.h) and its register width, on as many
// threads as the step uses. The nominal peak (cores x the clock the kernel reports x FLOP
// per cycle) misses what the cores really run at (turbo, a VM's reported clock); this is
// the limit the training step's share is read against (copytask bench).
#include <string>

#include "model/cpu_variant.h"

namespace copytask {

struct FmaMeasurement {
  double flops_per_second = 0;  // the best of the trials, all threads together
  int threads = 0;
  std::string variant;          // the kernels' variant it ran in ("x86-64-v3", ...)
  std::string how;              // what ran: chains, width, trials, seconds
};

// Runs `threads` threads, each a loop of 12 independent chains of multiply-adds of the
// variant's register width (enough to cover an FMA's latency on two pipes; a multiply and
// a dependent add on the generic target, which has no FMA), 5 trials of about 40 ms, and
// keeps the fastest: about 0.2 s in all (plus a calibration of about 10 ms).
FmaMeasurement cpu_fma_measure(int threads, CpuVariant variant);

}  // namespace copytask
