#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "compat/torch_compat.h"
#include "model/fused_cpu.h"
#include "train/batcher.h"
#include "train/cuda_graph.h"
#include "train/device_step.h"
#include "train/lr_schedule.h"

namespace copytask {
namespace {

torch::Tensor upload(const std::vector<int64_t>& values, int64_t rows, int64_t columns, const torch::Device& device) {
  return torch::tensor(values, torch::kLong).view({rows, columns}).to(device);  // (N, T)
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TrainData train_data_upload(const CopyTask& task, const torch::Device& device) {
  TrainData data;
  data.train_inputs = upload(task.train.inputs, task.train.count, task.context, device);
  data.train_targets = upload(task.train.targets, task.train.count, task.context, device);
  data.test_inputs = upload(task.test.inputs, task.test.count, task.context, device);
  data.test_targets = upload(task.test.targets, task.test.count, task.context, device);
  return data;
}

std::vector<uint64_t> minibatch_seeds(const std::vector<MemberSpec>& members) {
  std::vector<uint64_t> seeds;
  for (const auto& member : members) seeds.push_back(stream_seed(member.seed, 3));
  return seeds;
}

TrainingStep::TrainingStep(Encoder& model, const TrainData& data, const TrainConfig& train, StepOptions options)
    : model_(model),
      data_(data),
      optimizer_(model->parameters(), torch::optim::AdamOptions(train.lr)),
      members_(model->member_count()),
      positions_(data.train_inputs.size(1)),
      full_batch_(train.batch_size == 0),
      batch_size_(full_batch_ ? data.train_inputs.size(0) : train.batch_size),
      cpu_chunk_examples_(std::max<int64_t>(1, options.cpu_chunk_examples)),
      fused_(options.fused_cpu && fused_cpu_unsupported(*model).empty()) {
  if (!fused_ && model->device().is_cpu())
    fallback_reason_ = options.fused_cpu ? fused_cpu_unsupported(*model) : "the fused CPU step is switched off";
  batcher_ = std::make_unique<MemberBatcher>(data.train_inputs.size(0), batch_size_, minibatch_seeds(model->members()));
  // Full batch: every member sees the whole split, the same tensors every step.
  if (full_batch_) {
    full_inputs_ = data.train_inputs.unsqueeze(0).expand({members_, batch_size_, positions_});    // (M, N, T)
    full_targets_ = data.train_targets.unsqueeze(0).expand({members_, batch_size_, positions_});  // (M, N, T)
  }
  if (model->device().is_cuda())
    device_step_ = std::make_unique<DeviceStep>(model, data, batch_size_, full_batch_ ? nullptr : batcher_.get(),
                                                train.lr, train.cuda_graph && cuda_graph_unavailable().empty());
}

TrainingStep::~TrainingStep() = default;

std::string TrainingStep::name() const {
  if (fused_) return "fused CPU";
  if (device_step_ && device_step_->capturing() && device_step_->capture_failure().empty()) return "CUDA graph";
  return "autograd";
}

std::string TrainingStep::fallback_reason() const {
  if (device_step_ && !device_step_->capture_failure().empty())
    return "the CUDA graph's capture failed (" + device_step_->capture_failure() + ")";
  return fallback_reason_;
}

void TrainingStep::set_lr(double lr) {
  if (device_step_) {
    device_step_->set_lr(lr);  // the GPU's step keeps its own Adam, on the device
    return;
  }
  // One parameter group: every member's parameters share the study's schedule.
  for (auto& group : optimizer_.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
}

torch::Tensor TrainingStep::run() {
  if (device_step_) return device_step_->run();
  const int64_t M = members_, B = batch_size_, T = positions_;
  torch::Tensor inputs = full_inputs_, targets = full_targets_;
  if (!full_batch_) {
    auto rows = torch::tensor(batcher_->next(), torch::kLong).to(data_.train_inputs.device());  // (M*B)
    inputs = data_.train_inputs.index_select(0, rows).view({M, B, T});                         // (M, B, T)
    targets = data_.train_targets.index_select(0, rows).view({M, B, T});                       // (M, B, T)
  }
  model_->train();
  // This step's dropout masks, for the whole batch: chunks take their examples' share.
  std::optional<DropoutMasks> masks;
  // (The fused step draws each example's masks from the stream itself: no buffer.)
  if (model_->shape().dropout > 0) masks.emplace(model_->dropout_masks(B, /*with_buffer=*/!fused_));
  // Randomized positions: this step's, each member from its own stream (undefined when off).
  const torch::Tensor positions = model_->training_positions(B, T);  // (M, B, T)
  if (fused_) {
    // The whole batch, example by example, gradients set (not accumulated); then the
    // tables' gradients on to the schemes' parameters.
    const PositionalTables tables = model_->positional_tables(model_->table_positions(T));
    PositionalTables table_grads;
    const bool learned = tables.any_learned();
    const torch::Tensor member_loss = fused_cpu_loss_backward(*model_, tables, inputs, targets, masks ? &*masks : nullptr,
                                                              learned ? &table_grads : nullptr, positions);
    if (learned) model_->positional_backward(tables, table_grads);
    optimizer_.step();
    return member_loss;
  }
  optimizer_.zero_grad();
  // On the CPU a full batch goes through in chunks of kCpuChunkExamples examples per
  // member, whose activations stay in the caches; gradients accumulate, and the loss
  // weights make their sum the full-batch mean. The chunk does not depend on M, so a
  // member trains the same alone or beside others.
  const int64_t chunk = (full_batch_ && model_->device().is_cpu()) ? cpu_chunk_examples_ : B;
  torch::Tensor member_loss;  // (M)
  for (int64_t start = 0; start < B; start += chunk) {
    const int64_t n = std::min(chunk, B - start);
    std::optional<DropoutMasks> chunk_masks;
    if (masks) chunk_masks.emplace(masks->chunk(start, n));
    auto logits = model_->forward(inputs.narrow(1, start, n), chunk_masks ? &*chunk_masks : nullptr, nullptr,
                                  positions.defined() ? positions.narrow(1, start, n) : positions);  // (M, n, T, V)
    // Each member's mean loss over the chunk, weighted by the chunk's share of the batch
    // (a batch in one piece, every minibatch step, needs no weight).
    auto chunk_loss = member_losses(logits, targets.narrow(1, start, n));  // (M)
    if (n != B) chunk_loss = chunk_loss * (static_cast<double>(n) / B);
    // The sum over members: each member gets exactly its own gradient.
    chunk_loss.sum().backward();
    member_loss = member_loss.defined() ? member_loss + chunk_loss.detach() : chunk_loss.detach();
  }
  optimizer_.step();
  return member_loss;
}

TrainOutcome train_members(Encoder& model, const TrainData& data, const TrainConfig& train,
                           const EvaluationCallback& on_evaluation, const StepCallback& on_step,
                           const StartCallback& on_start) {
  TrainingStep training_step(model, data, train);
  if (on_start) on_start(training_step);
  TrainOutcome outcome;
  const auto loop_start = std::chrono::steady_clock::now();
  double evaluation_seconds = 0;
  for (int64_t step = 1; step <= train.steps; ++step) {
    if (stop_requested()) throw Interrupted();
    training_step.set_lr(scheduled_lr(train, step));
    const torch::Tensor member_loss = training_step.run();  // (M)
    if (on_step) on_step(step, member_loss);

    if (step % train.eval_every == 0 || step == train.steps) {
      const auto evaluation_start = std::chrono::steady_clock::now();
      Evaluation evaluation;
      evaluation.step = step;
      evaluation.train = evaluate_split(model, data.train_inputs, data.train_targets);
      evaluation.test = evaluate_split(model, data.test_inputs, data.test_targets);
      if (!data.lengths.empty()) evaluation.lengths = evaluate_lengths(model, data.lengths);
      evaluation_seconds += seconds_since(evaluation_start);
      evaluation.seconds = seconds_since(loop_start) - evaluation_seconds;
      if (on_evaluation) on_evaluation(evaluation);
      outcome.final = evaluation;
    }
  }
  outcome.steps = train.steps;
  outcome.seconds = seconds_since(loop_start);
  // After the loop: a capture that failed after the warm-up shows here.
  outcome.training_step = training_step.name();
  outcome.fallback_reason = training_step.fallback_reason();
  return outcome;
}

}  // namespace copytask
