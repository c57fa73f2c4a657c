#pragma once
// Where a GPU training step spends its time: LibTorch's profiler (Kineto, with CUPTI) over a
// few steps, each kernel's device time summed by name, and the whole trace written for
// Perfetto or chrome://tracing (copytask bench --profile FILE). Compiled with the profiler
// only where LibTorch has CUDA (CMake defines COPYTASK_WITH_CUDA); elsewhere
// step_profile_unavailable() says why and step_profile_run() refuses.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace copytask {

struct KernelTime {
  std::string name;
  int64_t calls = 0;
  double seconds = 0;  // device time, summed over the profiled steps
};

struct StepProfile {
  std::string trace_path;            // the Chrome trace written
  int64_t steps = 0;                 // steps profiled
  double kernel_seconds = 0;         // every kernel's device time, summed over the steps
  std::vector<KernelTime> kernels;   // by name, the longest first
};

// Why no GPU profile can be taken here ("" where one can: a CUDA LibTorch).
std::string step_profile_unavailable();

// Runs `step` (one training step, waiting for its end) `steps` times under the profiler,
// writes the trace to `trace_path` and returns the kernels' times. Throws where
// step_profile_unavailable() says why.
StepProfile step_profile_run(const std::function<void()>& step, int64_t steps, const std::string& trace_path);

// {"trace", "steps", "kernel_seconds_per_step", "kernels": [{"name", "calls_per_step",
// "seconds_per_step", "share"}]}: the first `top` kernels.
nlohmann::json step_profile_json(const StepProfile& profile, size_t top);

}  // namespace copytask
