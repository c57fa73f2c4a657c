#include "train/device_step.h"

#include <optional>

#include <c10/util/Exception.h>
#include <torch/torch.h>

#include "train/batcher.h"
#include "train/trainer.h"

namespace copytask {

DeviceStep::DeviceStep(Encoder& model, const TrainData& data, int64_t batch_size, MemberBatcher* batcher, double lr,
                       bool capture)
    : model_(model),
      data_(data),
      batcher_(batcher),
      members_(model->member_count()),
      batch_size_(batch_size),
      positions_(data.train_inputs.size(1)),
      capture_(capture),
      adam_(model->parameters(), lr) {
  const int64_t M = members_, B = batch_size_, T = positions_;
  const auto device = model->device();
  if (batcher_ == nullptr) {
    TORCH_CHECK(B == data.train_inputs.size(0), "DeviceStep: a full batch is the whole train split");
    full_inputs_ = data.train_inputs.unsqueeze(0).expand({M, B, T});    // (M, N, T)
    full_targets_ = data.train_targets.unsqueeze(0).expand({M, B, T});  // (M, N, T)
  } else {
    rows_ = torch::zeros({M * B}, torch::TensorOptions().dtype(torch::kLong).device(device));  // (M*B)
  }
  if (model->random_positions())
    positions_buffer_ = torch::zeros({M, B, T}, torch::TensorOptions().dtype(torch::kLong).device(device));  // (M, B, T)
  dropout_step_ = torch::full({}, model->next_dropout_step(), torch::TensorOptions().dtype(torch::kLong).device(device));
  member_loss_ = torch::zeros({M}, torch::TensorOptions().device(device));  // (M)
}

DeviceStep::~DeviceStep() = default;

void DeviceStep::forget_gradients() {
  for (auto& p : model_->parameters()) p.mutable_grad() = torch::Tensor();
}

void DeviceStep::work() {
  const int64_t M = members_, B = batch_size_, T = positions_;
  torch::Tensor inputs = full_inputs_, targets = full_targets_;
  if (batcher_ != nullptr) {
    inputs = data_.train_inputs.index_select(0, rows_).view({M, B, T});    // (M, B, T)
    targets = data_.train_targets.index_select(0, rows_).view({M, B, T});  // (M, B, T)
  }
  std::optional<DropoutMasks> masks;
  if (model_->shape().dropout > 0) masks.emplace(model_->dropout_masks_at(B, dropout_step_));
  auto logits = model_->forward(inputs, masks ? &*masks : nullptr, nullptr, positions_buffer_);  // (M, B, T, V)
  auto loss = member_losses(logits, targets);                                                    // (M)
  // The sum over members: each member gets exactly its own gradient.
  loss.sum().backward();
  adam_.step();
  torch::NoGradGuard no_grad;
  dropout_step_.add_(1);
  member_loss_.copy_(loss.detach());
}

torch::Tensor DeviceStep::run() {
  // This step's batch into the fixed tensors (host work, before the device's).
  if (batcher_ != nullptr) {
    const std::vector<int64_t> rows = batcher_->next();
    rows_.copy_(torch::tensor(rows, torch::kLong));  // (M*B)
  }
  if (positions_buffer_.defined()) positions_buffer_.copy_(model_->training_positions(batch_size_, positions_));
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
