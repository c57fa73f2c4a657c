#include "train/step_batches.h"

#include <stdexcept>

#include <torch/torch.h>

#include "compat/torch_compat.h"
#include "train/batcher.h"
#include "train/train_data.h"

namespace copytask {

std::vector<uint64_t> minibatch_seeds(const std::vector<MemberSpec>& members) {
  std::vector<uint64_t> seeds;
  for (const auto& member : members) seeds.push_back(stream_seed(member.seed, 3));
  return seeds;
}

StepBatches::StepBatches(const std::vector<MemberSpec>& members, const TrainData& data, int64_t batch_size)
    : data_(data),
      members_(static_cast<int64_t>(members.size())),
      positions_(data.train_inputs.size(1)),
      full_batch_(batch_size == 0),
      batch_size_(full_batch_ ? data.train_inputs.size(0) : batch_size) {
  const int64_t M = members_, B = batch_size_, T = positions_;
  if (full_batch_) {
    full_.inputs = data.train_inputs.unsqueeze(0).expand({M, B, T});    // (M, N, T)
    full_.targets = data.train_targets.unsqueeze(0).expand({M, B, T});  // (M, N, T)
  } else {
    batcher_ = std::make_unique<MemberBatcher>(data.train_inputs.size(0), B, minibatch_seeds(members));
  }
}

StepBatches::~StepBatches() = default;

std::vector<int64_t> StepBatches::next_rows() {
  if (full_batch_) throw std::logic_error("StepBatches::next_rows: a full batch has no rows to draw; use full()");
  return batcher_->next();
}

StepBatch StepBatches::at_rows(const torch::Tensor& rows) const {
  const int64_t M = members_, B = batch_size_, T = positions_;
  return {data_.train_inputs.index_select(0, rows).view({M, B, T}),    // (M, B, T)
          data_.train_targets.index_select(0, rows).view({M, B, T})};  // (M, B, T)
}

StepBatch StepBatches::next() {
  if (full_batch_) return full_;
  return at_rows(torch::tensor(next_rows(), torch::kLong).to(data_.train_inputs.device()));  // rows: (M*B)
}

}  // namespace copytask
