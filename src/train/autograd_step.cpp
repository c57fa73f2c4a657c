#include "train/autograd_step.h"

#include <algorithm>
#include <optional>

#include "train/train_data.h"

namespace copytask {

AutogradStep::AutogradStep(Encoder& model, const TrainData& data, const TrainConfig& train,
                           int64_t cpu_chunk_examples, std::string fallback_reason)
    : model_(model),
      adam_(model->parameters(), train.lr),
      batches_(model->members(), data, train.batch_size),
      cpu_chunk_examples_(std::max<int64_t>(1, cpu_chunk_examples)),
      fallback_reason_(std::move(fallback_reason)) {}

torch::Tensor AutogradStep::run() {
  const int64_t B = batches_.batch_size();
  const StepBatch batch = batches_.next();  // (M, B, T)
  model_->train();
  // This step's dropout masks, for the whole batch: chunks take their examples' share.
  std::optional<DropoutMasks> masks;
  if (model_->shape().dropout > 0) masks.emplace(model_->dropout_masks(B, /*with_buffer=*/true));
  // Position IDs: this step's, each member from its own stream (undefined when all are sequential).
  const torch::Tensor positions = model_->training_positions(batch.inputs);  // (M, B, T)
  adam_.zero_grad();
  // On the CPU a full batch goes through in chunks of kCpuChunkExamples examples per
  // member, whose activations stay in the caches; gradients accumulate, and the loss
  // weights make their sum the full-batch mean. The chunk does not depend on M, so a
  // member trains the same alone or beside others.
  const int64_t chunk = (batches_.full_batch() && model_->device().is_cpu()) ? cpu_chunk_examples_ : B;
  torch::Tensor member_loss;  // (M)
  for (int64_t start = 0; start < B; start += chunk) {
    const int64_t n = std::min(chunk, B - start);
    std::optional<DropoutMasks> chunk_masks;
    if (masks) chunk_masks.emplace(masks->chunk(start, n));
    auto logits = model_->forward(batch.inputs.narrow(1, start, n), chunk_masks ? &*chunk_masks : nullptr, nullptr,
                                  positions.defined() ? positions.narrow(1, start, n) : positions);  // (M, n, T, V)
    // Each member's mean loss over the chunk, weighted by the chunk's share of the batch
    // (a batch in one piece, every minibatch step, needs no weight).
    auto chunk_loss = member_losses(logits, batch.targets.narrow(1, start, n));  // (M)
    if (n != B) chunk_loss = chunk_loss * (static_cast<double>(n) / B);
    // The sum over members: each member gets exactly its own gradient.
    chunk_loss.sum().backward();
    member_loss = member_loss.defined() ? member_loss + chunk_loss.detach() : chunk_loss.detach();
  }
  adam_.step();
  return member_loss;
}

}  // namespace copytask
