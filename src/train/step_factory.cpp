// training_step_make: which kind of step trains a batch (train/step_factory.h).
#include "train/step_factory.h"

#include "model/fused_cpu.h"
#include "model/fused_gpu.h"
#include "train/autograd_step.h"
#include "train/cuda_graph.h"
#include "train/device_step.h"
#include "train/fused_cpu_step.h"
#include "train/train_data.h"

namespace copytask {

std::string training_step_refusal(const TrainConfig& train, const c10::Device& device) {
  if (train.step == "fused-cpu" && device.is_cuda())
    return "train.step = \"fused-cpu\": the fused CPU step runs on the CPU only, and train.device resolves to " +
           device.str() + " here; set train.step=auto (the GPU's device step) or train.step=autograd, or "
           "train.device=cpu";
  if (train.step == "fused-gpu" && !device.is_cuda())
    return "train.step = \"fused-gpu\": the fused GPU step runs on a GPU only, and train.device resolves to " +
           device.str() + " here; set train.step=auto (the CPU's fused step) or train.device=cuda on a machine "
           "with an NVIDIA GPU and a CUDA build (docs/gpu.md)";
  return "";
}

bool fused_gpu_step_chosen(const std::string& step, bool on_gpu) {
  return step == "fused-gpu" || (step == "auto" && on_gpu);  // fused-gpu off a GPU: refused before
}

std::unique_ptr<TrainingStep> training_step_make(Encoder& model, const TrainData& data, const TrainConfig& train) {
  if (train.step != "auto" && train.step != "fused-cpu" && train.step != "fused-gpu" && train.step != "autograd")
    throw ConfigError("train.step = \"" + train.step + "\": must be auto, fused-cpu, fused-gpu or autograd");
  const std::string refusal = training_step_refusal(train, model->device());
  if (!refusal.empty()) throw ConfigError(refusal);
  if (fused_gpu_step_chosen(train.step, model->device().is_cuda())) {
    FusedGpuExecution execution;
    execution.tile_examples = static_cast<int>(train.gpu_tile_examples);
    execution.kept_global = train.gpu_kept_activations == "global";
    // Never silently slower: a batch the kernels cannot run trains on the device step, saying why.
    const std::string unsupported = fused_gpu_unsupported(*model, data.train_inputs.size(1), execution);
    const bool capture = train.cuda_graph && cuda_graph_unavailable().empty();
    if (!unsupported.empty())
      return std::make_unique<DeviceStep>(model, data, train, capture, DeviceStepKernels::autograd, FusedGpuExecution{},
                                          "the fused GPU step cannot run this batch: " + unsupported);
    return std::make_unique<DeviceStep>(model, data, train, capture, DeviceStepKernels::fused, execution);
  }
  // train.step = autograd on a GPU: the same device step, never captured.
  if (model->device().is_cuda()) return std::make_unique<DeviceStep>(model, data, train, /*capture=*/false);
  if (train.step == "autograd") return std::make_unique<AutogradStep>(model, data, train);
  const std::string unsupported = fused_cpu_unsupported(*model);
  if (unsupported.empty()) return std::make_unique<FusedCpuStep>(model, data, train);
  if (train.step == "fused-cpu")
    throw ConfigError("train.step = \"fused-cpu\": the fused CPU step cannot run this model (" + unsupported +
                      "); set train.step=auto to train it on the autograd step");
  // auto: never silently slower; a CPU batch off the fused step says why.
  return std::make_unique<AutogradStep>(model, data, train, kCpuChunkExamples,
                                        model->device().is_cpu() ? unsupported : "");
}

}  // namespace copytask
