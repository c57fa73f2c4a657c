#include "train/step_profile.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#ifdef COPYTASK_WITH_CUDA
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

namespace copytask {

std::string step_profile_unavailable() {
#ifdef COPYTASK_WITH_CUDA
  return "";
#else
  return "this copytask is built against a LibTorch without CUDA; the GPU profile needs the CUDA build "
         "(docs/gpu.md). On the CPU, profile the fused step with callgrind (docs/performance.md)";
#endif
}

StepProfile step_profile_run(const std::function<void()>& step, int64_t steps, const std::string& trace_path) {
#ifdef COPYTASK_WITH_CUDA
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  try {
    for (int64_t i = 0; i < steps; ++i) step();
  } catch (...) {
    profiler::disableProfiler();
    throw;
  }
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  StepProfile profile;
  profile.trace_path = trace_path;
  profile.steps = steps;
  std::map<std::string, KernelTime> by_name;
  for (const auto& event : result->events()) {
    if (event.deviceType() != c10::DeviceType::CUDA) continue;  // the host's side: operators, launches
    KernelTime& kernel = by_name[event.name()];
    kernel.name = event.name();
    ++kernel.calls;
    kernel.seconds += static_cast<double>(event.durationNs()) * 1e-9;
    profile.kernel_seconds += static_cast<double>(event.durationNs()) * 1e-9;
  }
  for (auto& item : by_name) profile.kernels.push_back(std::move(item.second));
  std::sort(profile.kernels.begin(), profile.kernels.end(),
            [](const KernelTime& a, const KernelTime& b) { return a.seconds > b.seconds; });
  result->save(trace_path);
  return profile;
#else
  (void)step;
  (void)steps;
  (void)trace_path;
  throw std::runtime_error(step_profile_unavailable());
#endif
}

nlohmann::json step_profile_json(const StepProfile& profile, size_t top) {
  const double steps = static_cast<double>(std::max<int64_t>(profile.steps, 1));
  nlohmann::json kernels = nlohmann::json::array();
  for (size_t i = 0; i < std::min(top, profile.kernels.size()); ++i) {
    const KernelTime& kernel = profile.kernels[i];
    kernels.push_back({{"name", kernel.name},
                       {"calls_per_step", static_cast<double>(kernel.calls) / steps},
                       {"seconds_per_step", kernel.seconds / steps},
                       {"share", profile.kernel_seconds > 0 ? kernel.seconds / profile.kernel_seconds : 0.0}});
  }
  return {{"trace", profile.trace_path},
          {"steps", profile.steps},
          {"kernel_seconds_per_step", profile.kernel_seconds / steps},
          {"kernels_named", profile.kernels.size()},
          {"kernels", kernels}};
}

}  // namespace copytask
