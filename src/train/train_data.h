#pragma once
// The task's splits on the device the members train on: what every training step and
// evaluation reads. Shapes: N examples, T positions.
#include <torch/types.h>

#include "task/copy_task.h"
#include "train/evaluate.h"

namespace copytask {

// The task's splits as (N, T) int64 tensors on one device.
struct TrainData {
  torch::Tensor train_inputs, train_targets, test_inputs, test_targets;
  // The train split's rows the train numbers are measured on (CopyTask::train_evaluated):
  // views of its first rows.
  torch::Tensor train_evaluated_inputs, train_evaluated_targets;
  LengthData lengths;  // length generalization's sets (empty when eval.max_len is 0)
  int64_t noise_token = -1;  // selective's noise token, not counted in a content length; -1 = none
};
TrainData train_data_upload(const CopyTask& task, const torch::Device& device);

}  // namespace copytask
