#include "train/trainer.h"

#include <atomic>
#include <chrono>

#include <torch/optim/adam.h>

#include "compat/torch_compat.h"
#include "train/batcher.h"

namespace copytask {
namespace {

std::atomic<bool> stop_flag{false};

torch::Tensor upload(const std::vector<int64_t>& values, int64_t rows, int64_t columns, const torch::Device& device) {
  return torch::tensor(values, torch::kLong).view({rows, columns}).to(device);  // (N, T)
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void stop_request() { stop_flag = true; }
bool stop_requested() { return stop_flag; }

TrainData train_data_upload(const CopyTask& task, const torch::Device& device) {
  TrainData data;
  data.train_inputs = upload(task.train.inputs, task.train.count, task.context, device);
  data.train_targets = upload(task.train.targets, task.train.count, task.context, device);
  data.test_inputs = upload(task.test.inputs, task.test.count, task.context, device);
  data.test_targets = upload(task.test.targets, task.test.count, task.context, device);
  return data;
}

TrainOutcome train_members(Encoder& model, const TrainData& data, const TrainConfig& train,
                           const EvaluationCallback& on_evaluation, const StepCallback& on_step) {
  const int64_t M = model->member_count(), N = data.train_inputs.size(0), T = data.train_inputs.size(1);
  const bool full_batch = train.batch_size == 0;
  const int64_t B = full_batch ? N : train.batch_size;
  const bool use_dropout = model->shape().dropout > 0;

  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(train.lr));
  std::vector<uint64_t> batch_seeds;
  for (const auto& member : model->members()) batch_seeds.push_back(stream_seed(member.seed, 3));
  MemberBatcher batcher(N, B, batch_seeds);

  // Full batch: every member sees the whole split, the same tensors every step.
  torch::Tensor full_inputs, full_targets;
  if (full_batch) {
    full_inputs = data.train_inputs.unsqueeze(0).expand({M, N, T});    // (M, N, T)
    full_targets = data.train_targets.unsqueeze(0).expand({M, N, T});  // (M, N, T)
  }

  TrainOutcome outcome;
  const auto loop_start = std::chrono::steady_clock::now();
  double evaluation_seconds = 0;
  model->train();
  for (int64_t step = 1; step <= train.steps; ++step) {
    if (stop_requested()) throw Interrupted();
    torch::Tensor inputs = full_inputs, targets = full_targets;
    if (!full_batch) {
      auto rows = torch::tensor(batcher.next(), torch::kLong).to(data.train_inputs.device());  // (M*B)
      inputs = data.train_inputs.index_select(0, rows).view({M, B, T});                       // (M, B, T)
      targets = data.train_targets.index_select(0, rows).view({M, B, T});                     // (M, B, T)
    }
    std::optional<DropoutMasks> masks;
    if (use_dropout) masks.emplace(model->dropout_masks(B));
    auto logits = model->forward(inputs, masks ? &*masks : nullptr);  // (M, B, T, V)
    auto member_loss = member_losses(logits, targets);                // (M)
    optimizer.zero_grad();
    // The sum of the members' mean losses: each member gets exactly its own gradient.
    member_loss.sum().backward();
    optimizer.step();
    if (on_step) on_step(step, member_loss.detach());

    if (step % train.eval_every == 0 || step == train.steps) {
      const auto evaluation_start = std::chrono::steady_clock::now();
      Evaluation evaluation;
      evaluation.step = step;
      evaluation.train = evaluate_split(model, data.train_inputs, data.train_targets);
      evaluation.test = evaluate_split(model, data.test_inputs, data.test_targets);
      evaluation_seconds += seconds_since(evaluation_start);
      evaluation.seconds = seconds_since(loop_start) - evaluation_seconds;
      if (on_evaluation) on_evaluation(evaluation);
      outcome.final = evaluation;
    }
  }
  outcome.steps = train.steps;
  outcome.seconds = seconds_since(loop_start);
  return outcome;
}

}  // namespace copytask
