// copytask bench: training-step timings of what train (or, with --compare, the first batch
// of what compare) would train. scripts/bench.sh runs it beside the PyTorch baseline.
#include <cstdio>
#include <optional>

#include <CLI/CLI.hpp>
#include "util/log.h"

#include "cli/commands.h"
#include "cli/options.h"
#include "compat/torch_compat.h"
#include "util/atomic_files.h"
#include "study/study_checks.h"
#include "train/bench.h"
#include "train/step_profile.h"

namespace copytask {
namespace {
constexpr size_t kProfileKernelsShown = 25;
}  // namespace

CLI::App* bench_command_add(CLI::App& app, BenchCommandOptions& options) {
  CLI::App& command = *app.add_subcommand("bench", "time training steps (warm-up, then timed steps)");
  config_options_bind(command, options.config);
  command.add_flag("--compare", options.compare,
                   "time the first batch of members of `compare` (all schemes x seeds that share a batch)");
  command.add_option("--warmup", options.warmup, "untimed steps first")->check(CLI::Range(0, 1000000));
  command.add_option("--steps", options.steps, "timed steps")->check(CLI::Range(1, 1000000));
  command.add_option("--json", options.json_file, "also write the numbers to this JSON file");
  command.add_option("--profile", options.profile_file,
                     "on a GPU: after the timed steps, profile a few more (LibTorch's profiler) and write their "
                     "trace to this file (Perfetto, chrome://tracing); the kernels' times are printed and in --json");
  return &command;
}

int bench_command_run(const BenchCommandOptions& options) {
  // Bad input first, before any work: the config, the device, the training step, the memory.
  Config config;
  if (!config_options_resolve(options.config, config)) return kExitOk;
  const std::vector<StudyArm> schemes = options.compare ? study_arms_for_compare(config) : study_arms_for_train(config);
  const c10::Device device = device_resolve(config.train.device);
  if (!options.profile_file.empty()) {
    if (!device.is_cuda())
      throw OptionError("--profile profiles a GPU's kernels; this bench runs on " + device.str() +
                        " (train.device=cuda on a machine with a GPU; on the CPU, callgrind: docs/performance.md)");
    if (!step_profile_unavailable().empty()) throw OptionError("--profile: " + step_profile_unavailable());
    output_file_check("--profile", options.profile_file);
  }
  output_file_check("--json", options.json_file);
  study_check_training_steps(schemes, device);
  study_check_memory(schemes, Shard{}, device);
  const int threads = threads_configure(config.train.threads);
  const auto batches = study_batches(study_members(schemes));
  const Config& batch_config = batches.front().front().arm->config;
  const std::vector<MemberSpec> members = study_batch_specs(batches.front());
  // The batch's schemes, once each: members come scheme by scheme.
  std::string names;
  const StudyArm* previous = nullptr;
  for (const auto& member : batches.front()) {
    if (member.arm != previous) names += (names.empty() ? "" : ", ") + member.arm->name;
    previous = member.arm;
  }
  log_info("bench: {} members ({}), device {}, {} thread(s), {} warm-up + {} timed steps", members.size(), names,
               device.str(), threads, options.warmup, options.steps);
  const BenchResult result = bench_training_step(batch_config, members, device, options.warmup, options.steps,
                                                 options.profile_file);
  std::printf("members            %lld x %lld examples per step (T = %lld)\n", static_cast<long long>(result.members),
              static_cast<long long>(result.batch_size), static_cast<long long>(result.positions));
  std::printf("training step      %s%s\n", result.step.c_str(),
              result.cpu_kernel.empty() ? "" : (", CPU kernels " + result.cpu_kernel).c_str());
  if (!result.fallback_reason.empty())
    log_warn("timed the autograd step, not the faster one meant for these members: {}", result.fallback_reason);
  std::printf("step time          min %.4f s, median %.4f s\n", result.step_seconds_min, result.step_seconds_median);
  std::printf("member-steps/s     %.2f\n", result.member_steps_per_second);
  std::printf("examples/s         %.0f\n", result.examples_per_second);
  std::printf("tokens/s           %.0f\n", result.tokens_per_second);
  std::printf("GFLOP/s achieved   %.1f (%.3g GFLOP a step, matrix products, forward and backward)\n",
              result.flops_per_second / 1e9, result.flops_per_step / 1e9);
  if (device.is_cpu()) std::printf("core               %s\n", result.core.text().c_str());
  if (result.measured_flops_per_second > 0)
    std::printf("share of measured  %.1f%% of %.1f GFLOP/s measured on this machine (%s)\n", 100.0 * result.measured_share,
                result.measured_flops_per_second / 1e9, result.measured_how.c_str());
  if (result.peak_flops_per_second > 0)
    std::printf("share of FMA peak  %.1f%% of %.1f GFLOP/s nominal = %lld core(s) x %.2f GHz (%s) x %.0f FLOP/cycle (%s)\n",
                100.0 * result.peak_share, result.peak_flops_per_second / 1e9, static_cast<long long>(result.cores),
                result.clock_ghz, result.clock_source.c_str(), result.flop_per_cycle, result.flop_per_cycle_why.c_str());
  else if (device.is_cpu())
    std::printf("share of FMA peak  unknown: no clock found (%s)\n", result.clock_source.c_str());
  std::printf("peak resident      %.0f MiB\n", result.peak_rss_mib);
  // The profile per step, as --json keeps it: printed from that one form.
  const nlohmann::json profile =
      result.profile ? step_profile_json(*result.profile, kProfileKernelsShown) : nlohmann::json();
  if (result.profile) {
    std::printf("profile            %lld steps, kernels %.4f s a step (the step %.4f s); trace in %s\n",
                static_cast<long long>(result.profile->steps), profile["kernel_seconds_per_step"].get<double>(),
                result.step_seconds_median, result.profile->trace_path.c_str());
    for (const auto& kernel : profile["kernels"])
      std::printf("  %5.1f%% %9.3f ms %5.1f calls  %.150s\n", 100.0 * kernel["share"].get<double>(),
                  1e3 * kernel["seconds_per_step"].get<double>(), kernel["calls_per_step"].get<double>(),
                  kernel["name"].get<std::string>().c_str());
  }
  if (!options.json_file.empty()) {
    nlohmann::json out = bench_json(result);
    out["device"] = device.str();
    const GpuInfo gpu = gpu_info(device);
    if (!gpu.name.empty())
      out["gpu"] = {{"name", gpu.name},
                    {"compute_capability", gpu.compute_capability},
                    {"sm_count", gpu.sm_count},
                    {"clock_mhz", gpu.clock_mhz},
                    {"cuda_runtime", gpu.cuda_runtime},
                    {"cuda_driver", gpu.cuda_driver}};
    out["threads"] = threads;
    out["cpu"] = cpu_model();
    out["libtorch"] = torch_version_string();
    out["schemes"] = names;
    out["config"] = config_to_json(batch_config);
    if (result.profile) out["profile"] = profile;
    json_write_atomic(options.json_file, out);
  }
  return kExitOk;
}

}  // namespace copytask
