#include "train/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include <ATen/Parallel.h>

#include "model/cpu_variant.h"
#include "model/fma_probe.h"
#include "task/copy_task.h"
#include "train/device_step.h"
#include "train/trainer.h"
#include "train/step_factory.h"

namespace copytask {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

BenchResult bench_training_step(const Config& config, const std::vector<MemberSpec>& members,
                                const c10::Device& device, int64_t warmup, int64_t steps,
                                const std::string& profile_path) {
  const TrainData data = train_data_upload(copy_task_generate(config.task), device);
  Encoder model(encoder_shape_of(config), members, device);
  const std::unique_ptr<TrainingStep> step = training_step_make(model, data, config.train);
  TrainingStep& training_step = *step;
  // A CUDA graph is captured after its warm-up steps: neither they nor the capture are timed.
  if (training_step.name().find("CUDA graph") != std::string::npos) warmup = std::max(warmup, DeviceStep::kWarmupSteps + 1);

  // Reading the loss waits for the step to finish (on a GPU too), so each time is a whole step.
  const auto run_step = [&] { training_step.run().sum().item<double>(); };
  for (int64_t i = 0; i < warmup; ++i) run_step();
  BenchResult result;
  for (int64_t i = 0; i < steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run_step();
    result.step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<double> sorted = result.step_seconds;
  std::sort(sorted.begin(), sorted.end());
  result.members = model->member_count();
  result.batch_size = training_step.batch_size();
  result.positions = config.task.context;
  result.step = training_step.name();
  result.fallback_reason = training_step.fallback_reason();
  result.step_seconds_min = sorted.front();
  result.step_seconds_median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                                 : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  result.member_steps_per_second = result.members / result.step_seconds_median;
  result.examples_per_second = result.member_steps_per_second * static_cast<double>(result.batch_size);
  result.tokens_per_second = result.examples_per_second * static_cast<double>(result.positions);
  result.flops_per_step =
      training_step_flops(model->shape(), static_cast<double>(result.members) * static_cast<double>(result.batch_size));
  result.flops_per_second = result.flops_per_step / result.step_seconds_median;
  result.peak_rss_mib = peak_rss_mib();
  // After the timed steps, so the profiler's overhead never reaches their times.
  if (!profile_path.empty())
    result.profile = step_profile_run(run_step, kProfileSteps, profile_path);
  if (device.is_cpu()) {
    const bool fused = result.step == "fused CPU";  // our kernels; else LibTorch's (the autograd step)
    const CpuVariant variant = fused ? cpu_variant_active() : cpu_variant_widest();
    if (fused) result.cpu_kernel = cpu_variant_name(variant);
    const FmaPeak fma = cpu_fma_peak_per_cycle(variant);
    const CpuClock clock = cpu_clock();
    result.core = cpu_core();
    result.cores = at::get_num_threads();
    result.clock_ghz = clock.ghz;
    result.clock_source = clock.source;
    result.flop_per_cycle = fma.flop_per_cycle;
    result.flop_per_cycle_why = std::string(cpu_variant_name(variant)) + ", " + fma.why;
    result.peak_flops_per_second = static_cast<double>(result.cores) * clock.ghz * 1e9 * fma.flop_per_cycle;
    if (result.peak_flops_per_second > 0) result.peak_share = result.flops_per_second / result.peak_flops_per_second;
    // Measured after the timed steps, so it never warms or slows them.
    const FmaMeasurement measured = cpu_fma_measure(static_cast<int>(result.cores), variant);
    result.measured_flops_per_second = measured.flops_per_second;
    result.measured_how = measured.variant + ", " + measured.how;
    if (measured.flops_per_second > 0) result.measured_share = result.flops_per_second / measured.flops_per_second;
  }
  return result;
}

double training_step_flops(const EncoderShape& shape, double examples) {
  const double T = static_cast<double>(shape.context), D = static_cast<double>(shape.embed),
               F = static_cast<double>(shape.hidden), V = static_cast<double>(shape.vocab);
  const double block = 6 * T * D * D + 4 * T * T * D + 2 * T * D * D + 4 * T * D * F;
  const double forward = static_cast<double>(shape.blocks) * block + 2 * T * D * V;
  return 3 * forward * examples;
}

nlohmann::json bench_json(const BenchResult& r) {
  return {{"tool", "copytask"},
          {"members", r.members},
          {"batch_size", r.batch_size},
          {"training_step", r.step},
          {"fallback_reason", r.fallback_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.fallback_reason)},
          {"examples_per_step", r.members * r.batch_size},
          {"step_seconds", r.step_seconds},
          {"step_seconds_min", r.step_seconds_min},
          {"step_seconds_median", r.step_seconds_median},
          {"member_steps_per_second", r.member_steps_per_second},
          {"examples_per_second", r.examples_per_second},
          {"tokens_per_second", r.tokens_per_second},
          {"flops_per_step", r.flops_per_step},
          {"flops_per_second", r.flops_per_second},
          {"peak_rss_mib", r.peak_rss_mib},
          {"cpu_kernel", r.cpu_kernel.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.cpu_kernel)},
          {"cpu_peak",
           r.measured_flops_per_second > 0
               ? nlohmann::json{{"core", {{"vendor", r.core.vendor},
                                           {"family", r.core.family},
                                           {"model", r.core.model},
                                           {"microarchitecture", r.core.microarchitecture},
                                           {"text", r.core.text()}}},
                                {"cores", r.cores},
                                {"clock_ghz", r.clock_ghz},
                                {"clock_source", r.clock_source},
                                {"flop_per_cycle", r.flop_per_cycle},
                                {"flop_per_cycle_why", r.flop_per_cycle_why},
                                // the nominal peak: null where the clock is unknown
                                {"flops_per_second", r.peak_flops_per_second > 0 ? nlohmann::json(r.peak_flops_per_second)
                                                                                 : nlohmann::json(nullptr)},
                                {"share", r.peak_flops_per_second > 0 ? nlohmann::json(r.peak_share) : nlohmann::json(nullptr)},
                                {"measured_flops_per_second", r.measured_flops_per_second},
                                {"measured_share", r.measured_share},
                                {"measured_how", r.measured_how}}
               : nlohmann::json(nullptr)}};
}

}  // namespace copytask
