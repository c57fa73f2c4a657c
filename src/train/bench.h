#pragma once
// Training-step timings (copytask bench): the trainer's real TrainingStep, warmed up, then
// timed step by step. Speed targets are checked with these numbers side by side with a
// baseline (scripts/bench.sh), never by timed tests.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "model/cpu_variant.h"
#include "model/encoder_shape.h"
#include "model/member.h"
#include "train/step_profile.h"

namespace copytask {

struct BenchResult {
  int64_t members = 0;
  int64_t batch_size = 0;    // examples per member per step
  int64_t positions = 0;
  std::string step;          // "fused CPU" (model/fused_cpu.h), "fused GPU, CUDA graph", "fused GPU", "CUDA graph" (train/device_step.h) or "autograd"
  std::string fallback_reason;  // why it runs on the autograd step, not the faster one meant ("" otherwise)
  std::vector<double> step_seconds;  // each timed step
  double step_seconds_min = 0, step_seconds_median = 0;
  double member_steps_per_second = 0;  // members / median step
  double examples_per_second = 0;      // members * batch / median step
  double tokens_per_second = 0;        // examples * T / median step
  double flops_per_step = 0;           // training_step_flops of the step's examples
  double flops_per_second = 0;         // flops_per_step / median step: the rate achieved
  double peak_rss_mib = 0;             // of the whole process so far
  // On the CPU: the kernels' variant that ran ("x86-64-v4", ...; model/cpu_variant.h; "" on
  // a GPU), and the rate as a share of the CPU's FMA peak: threads x clock x FLOP per cycle
  // of the instruction set in use (the widest this CPU has for the autograd step, whose
  // kernels are LibTorch's), with where each number came from.
  std::string cpu_kernel;
  CpuCore core;                        // the core it ran on (model/cpu_variant.h)
  int64_t cores = 0;                   // threads the step ran on
  double clock_ghz = 0;
  std::string clock_source;
  double flop_per_cycle = 0;           // per core
  std::string flop_per_cycle_why;
  double peak_flops_per_second = 0;    // cores x clock x FLOP per cycle (0: the clock is unknown)
  double peak_share = 0;               // flops_per_second / peak_flops_per_second
  // The limit measured on this machine (model/fma_probe.h): independent multiply-adds in
  // registers, in the same variant, on the same threads; and the step's share of it.
  double measured_flops_per_second = 0;
  double measured_share = 0;
  std::string measured_how;
  // On a GPU with a profile asked for: kProfileSteps more steps under LibTorch's profiler.
  std::optional<StepProfile> profile;
};

inline constexpr int64_t kProfileSteps = 3;

// The floating-point work of one training step of `examples` examples (all members'
// together): its matrix products, 2 FLOP per multiply-add, forward and backward (backward
// about twice the forward: a gradient for each operand), so 3 x the forward's
//   per example: L x (QKV 6TD^2 + scores and weights x values 4T^2D + projection 2TD^2
//                     + feed-forward 4TDF) + head 2TDV.
// Layer norms, softmax, embeddings and Adam (a few FLOP per element) are left out. The
// reference study (30 members x 9000 examples) comes to 1.10e11, about 110 GFLOP a step.
// With the step time: the rate the step achieves.
double training_step_flops(const EncoderShape& shape, double examples);

// Times `steps` training steps of the members `members` (after `warmup` untimed ones); with
// `profile_path`, then profiles kProfileSteps more and writes their trace there.
BenchResult bench_training_step(const Config& config, const std::vector<MemberSpec>& members,
                                const c10::Device& device, int64_t warmup, int64_t steps,
                                const std::string& profile_path = "");

nlohmann::json bench_json(const BenchResult& result);

// Peak resident memory of this process, MiB.
double peak_rss_mib();

}  // namespace copytask
