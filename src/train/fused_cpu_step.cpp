#include "train/fused_cpu_step.h"

#include <optional>
#include <stdexcept>

#include "model/fused_cpu.h"
#include "train/train_data.h"

namespace copytask {
namespace {

// The model, checked: the fused kernel runs float32 on the CPU only.
Encoder& fused_cpu_supported(Encoder& model) {
  const std::string unsupported = fused_cpu_unsupported(*model);
  if (!unsupported.empty())
    throw std::invalid_argument("the fused CPU step cannot run this batch: " + unsupported +
                                "; make the step with training_step_make, which picks one that can");
  return model;
}

}  // namespace

FusedCpuStep::FusedCpuStep(Encoder& model, const TrainData& data, const TrainConfig& train)
    : model_(fused_cpu_supported(model)),
      adam_(model->parameters(), train.lr),
      batches_(model->members(), data, train.batch_size),
      positions_(data.train_inputs.size(1)) {}

torch::Tensor FusedCpuStep::run() {
  const int64_t B = batches_.batch_size(), T = positions_;
  const StepBatch batch = batches_.next();  // (M, B, T)
  model_->train();
  // This step's dropout masks: the kernel draws each example's from the stream itself, so
  // no buffer is filled.
  std::optional<DropoutMasks> masks;
  if (model_->shape().dropout > 0) masks.emplace(model_->dropout_masks(B, /*with_buffer=*/false));
  // Position IDs: this step's, each member from its own stream (undefined when all are sequential).
  const torch::Tensor positions = model_->training_positions(batch.inputs);  // (M, B, T)
  // The whole batch, example by example, gradients set (not accumulated); then the tables'
  // gradients on to the schemes' parameters.
  const PositionalTables tables = model_->positional_tables(model_->table_positions(T));
  PositionalTables table_grads;
  const bool learned = tables.any_learned();
  const torch::Tensor member_loss = fused_cpu_loss_backward(*model_, tables, batch.inputs, batch.targets,
                                                            masks ? &*masks : nullptr, learned ? &table_grads : nullptr,
                                                            positions);  // (M)
  if (learned) model_->positional_backward(tables, table_grads);
  adam_.step();
  return member_loss;
}

}  // namespace copytask
