#include "train/device_step.h"

#include <optional>
#include <utility>

#include <torch/torch.h>

#include "train/train_data.h"

namespace copytask {

DeviceStep::DeviceStep(Encoder& model, const TrainData& data, const TrainConfig& train, bool capture,
                       DeviceStepKernels kernels, const FusedGpuExecution& execution, std::string fallback)
    : model_(model),
      batches_(model->members(), data, train.batch_size),
      members_(model->member_count()),
      positions_(data.train_inputs.size(1)),
      capture_(capture),
      fallback_(std::move(fallback)),
      adam_(model->parameters(), train.lr) {
  const int64_t M = members_, B = batches_.batch_size(), T = positions_;
  const auto device = model->device();
  if (!batches_.full_batch())
    rows_ = torch::zeros({M * B}, torch::TensorOptions().dtype(torch::kLong).device(device));  // (M*B)
  if (model->position_ids_vary())
    positions_buffer_ = torch::zeros({M, B, T}, torch::TensorOptions().dtype(torch::kLong).device(device));  // (M, B, T)
  dropout_step_ = torch::full({}, model->next_dropout_step(), torch::TensorOptions().dtype(torch::kLong).device(device));
  member_loss_ = torch::zeros({M}, torch::TensorOptions().device(device));  // (M)
  if (kernels == DeviceStepKernels::fused) fused_ = std::make_unique<FusedGpuKernels>(*model, B, T, execution);
}

DeviceStep::~DeviceStep() = default;

std::string DeviceStep::name() const {
  const bool captured = capture_ && capture_failure_.empty();
  if (fused_) return captured ? "fused GPU, CUDA graph" : "fused GPU";
  return captured ? "CUDA graph" : "autograd";
}

std::string DeviceStep::fallback_reason() const {
  std::string reason = fallback_;
  if (!capture_failure_.empty())
    reason += (reason.empty() ? "" : "; ") + std::string("the CUDA graph's capture failed (") + capture_failure_ + ")";
  return reason;
}

void DeviceStep::forget_gradients() {
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();
}

void DeviceStep::work() {
  const int64_t B = batches_.batch_size();
  const StepBatch batch = batches_.full_batch() ? batches_.full() : batches_.at_rows(rows_);  // (M, B, T)
  if (fused_) {
    // The kernels: the tables as inputs, their gradients on to the schemes' parameters.
    const PositionalTables tables = model_->positional_tables(model_->table_positions(positions_));
    const torch::Tensor keys = model_->shape().dropout > 0 ? model_->dropout_step_keys_at(dropout_step_) : torch::Tensor();
    PositionalTables table_grads;
    const torch::Tensor loss = fused_->loss_backward(tables, batch.inputs, batch.targets, positions_buffer_, keys,
                                                     &table_grads);  // (M)
    if (tables.any_learned()) model_->positional_backward(tables, table_grads);
    adam_.step();
    torch::NoGradGuard no_grad;
    dropout_step_.add_(1);
    member_loss_.copy_(loss);
    return;
  }
  std::optional<DropoutMasks> masks;
  if (model_->shape().dropout > 0) masks.emplace(model_->dropout_masks_at(B, dropout_step_));
  auto logits = model_->forward(batch.inputs, masks ? &*masks : nullptr, nullptr, positions_buffer_);  // (M, B, T, V)
  auto loss = member_losses(logits, batch.targets);                                                    // (M)
  // The sum over members: each member gets exactly its own gradient.
  loss.sum().backward();
  adam_.step();
  torch::NoGradGuard no_grad;
  dropout_step_.add_(1);
  member_loss_.copy_(loss.detach());
}

torch::Tensor DeviceStep::run() {
  // This step's batch into the fixed tensors (host work, before the device's).
  if (!batches_.full_batch()) rows_.copy_(torch::tensor(batches_.next_rows(), torch::kLong));  // (M*B)
  if (positions_buffer_.defined()) {
    const StepBatch batch = batches_.full_batch() ? batches_.full() : batches_.at_rows(rows_);  // (M, B, T)
    positions_buffer_.copy_(model_->training_positions(batch.inputs));
  }
  model_->train();
  const bool replay = capture_ && capture_failure_.empty() && steps_run_ >= kWarmupSteps;
  if (replay && !graph_) {
    // The gradients' buffers are made inside the capture, in the graph's memory, and every
    // replay rewrites them (as torch.cuda.graph's whole-network example does).
    forget_gradients();
    auto graph = std::make_unique<CudaGraph>();
    try {
      graph->capture([this] { work(); });  // records only: the step runs at the replay below
      graph_ = std::move(graph);
    } catch (const std::exception& error) {
      capture_failure_ = error.what();
    }
  }
  if (graph_) {
    graph_->replay();
  } else {
    forget_gradients();  // backward sets them afresh, as the uncaptured autograd step's zeroing does
    work();
  }
  ++steps_run_;
  if (model_->shape().dropout > 0) model_->skip_dropout_steps(1);  // the host's count follows the device's
  return member_loss_.clone();
}

}  // namespace copytask
