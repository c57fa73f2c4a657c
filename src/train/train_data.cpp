#include "train/train_data.h"

#include <torch/torch.h>

namespace copytask {
namespace {

torch::Tensor upload(const std::vector<int64_t>& values, int64_t rows, int64_t columns, const torch::Device& device) {
  return torch::tensor(values, torch::kLong).view({rows, columns}).to(device);  // (N, T)
}

}  // namespace

TrainData train_data_upload(const CopyTask& task, const torch::Device& device) {
  TrainData data;
  data.train_inputs = upload(task.train.inputs, task.train.count, task.context, device);
  data.train_targets = upload(task.train.targets, task.train.count, task.context, device);
  data.test_inputs = upload(task.test.inputs, task.test.count, task.context, device);
  data.test_targets = upload(task.test.targets, task.test.count, task.context, device);
  const int64_t evaluated = task.train_evaluated > 0 ? task.train_evaluated : task.train.count;
  data.train_evaluated_inputs = data.train_inputs.narrow(0, 0, evaluated);    // (n, T)
  data.train_evaluated_targets = data.train_targets.narrow(0, 0, evaluated);  // (n, T)
  data.noise_token = task.noise_token;
  return data;
}

}  // namespace copytask
