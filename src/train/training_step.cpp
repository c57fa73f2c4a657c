// training_step_make: which kind of step trains a batch (train/training_step.h).
#include "train/training_step.h"

#include "model/fused_cpu.h"
#include "train/autograd_step.h"
#include "train/cuda_graph.h"
#include "train/device_step.h"
#include "train/fused_cpu_step.h"

namespace copytask {

std::unique_ptr<TrainingStep> training_step_make(Encoder& model, const TrainData& data, const TrainConfig& train,
                                                 bool fused_cpu) {
  if (model->device().is_cuda())
    return std::make_unique<DeviceStep>(model, data, train, train.cuda_graph && cuda_graph_unavailable().empty());
  const std::string unsupported = fused_cpu_unsupported(*model);
  if (fused_cpu && unsupported.empty()) return std::make_unique<FusedCpuStep>(model, data, train);
  // Never silently slower: a CPU batch off the fused step says why.
  std::string reason;
  if (model->device().is_cpu()) reason = fused_cpu ? unsupported : "the fused CPU step is switched off";
  return std::make_unique<AutogradStep>(model, data, train, kCpuChunkExamples, reason);
}

}  // namespace copytask
