#pragma once
// Which examples each member trains on at each step, for every kind of training step: the
// whole train split (a full batch: the same views every step), or each member's own seeded
// minibatch rows (train/batcher.h), drawn from its seed alone so that a member's batches
// never depend on the members beside it. Shapes: M members, B batch, N examples, T positions.
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "model/member.h"

namespace copytask {

class MemberBatcher;
struct TrainData;

// Each member's minibatch stream seed (from its own seed alone), for its MemberBatcher.
std::vector<uint64_t> minibatch_seeds(const std::vector<MemberSpec>& members);

// One step's examples of every member.
struct StepBatch {
  torch::Tensor inputs, targets;  // (M, B, T) int64 each, on the data's device
};

class StepBatches {
 public:
  // batch_size: train.batch_size (0 = full batch, B = N).
  StepBatches(const std::vector<MemberSpec>& members, const TrainData& data, int64_t batch_size);
  ~StepBatches();

  bool full_batch() const { return full_batch_; }
  int64_t batch_size() const { return batch_size_; }  // B: examples per member per step

  // The next step's batch: the full batch's views, or every member's next minibatch.
  StepBatch next();
  // Minibatches only: the next step's rows of every member, M * B indices, member-major
  // (host data: a GPU step copies them into a fixed device tensor before its replay).
  std::vector<int64_t> next_rows();
  // The examples at `rows` (M * B int64 indices on the data's device, as next_rows gives).
  StepBatch at_rows(const torch::Tensor& rows) const;
  // Full batch only: every member sees the whole split, the same (M, N, T) views every step.
  const StepBatch& full() const { return full_; }

 private:
  const TrainData& data_;
  int64_t members_, positions_;
  bool full_batch_;
  int64_t batch_size_;
  std::unique_ptr<MemberBatcher> batcher_;  // minibatches only
  StepBatch full_;                          // full batch only
};

}  // namespace copytask
