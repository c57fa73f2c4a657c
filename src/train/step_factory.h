#pragma once
// Which kind of training step (train/training_step.h) trains a batch, as train.step asks:
// the one place that knows the three kinds, apart from the interface they implement.
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "config/config.h"
#include "model/encoder.h"
#include "train/training_step.h"

namespace copytask {

struct TrainData;

// The step that trains `model` (its members, on its device) on `data` with `train`, as
// train.step asks (docs/configuration.md):
//   auto      on a GPU as fused-gpu (below); on the CPU the FusedCpuStep wherever
//             fused_cpu_unsupported(model) is empty, else the AutogradStep, whose
//             fallback_reason says why
//   fused     the FusedCpuStep; a ConfigError saying why where it cannot run (a GPU, or
//             what fused_cpu_unsupported says), never a silent fallback
//   fused-gpu the DeviceStep with the fused GPU step's kernels (model/fused_gpu.h), captured
//             when train.cuda_graph is on and LibTorch can capture; where the kernels cannot
//             run the batch (fused_gpu_unsupported), the DeviceStep on LibTorch's ops, captured
//             alike, whose fallback_reason says why; a ConfigError on the CPU
//   autograd  on the CPU the AutogradStep; on a GPU the DeviceStep uncaptured (the same
//             ops, its Adam on the device). No fallback_reason: nothing faster was meant
std::unique_ptr<TrainingStep> training_step_make(Encoder& model, const TrainData& data, const TrainConfig& train);

// Whether train.step = `step` trains on the fused GPU step's kernels where they can run the
// batch: fused-gpu (refused off a GPU), and auto on a GPU since the kernels passed there
// (docs/gpu.md). The one
// rule, read by training_step_make and by the study's planner (study/study_plan.cpp), which
// keeps the members the kernels can run apart from the others.
bool fused_gpu_step_chosen(const std::string& step, bool on_gpu);

// Why train.step cannot train on `device` at all ("" when it can): "fused" on a GPU,
// "fused-gpu" on the CPU. A
// ConfigError's text, naming the key and what to set instead. The commands check it before
// any work (study_check_training_steps); training_step_make throws it too.
std::string training_step_refusal(const TrainConfig& train, const c10::Device& device);

}  // namespace copytask
