#include "train/host_adam.h"

namespace copytask {

HostAdam::HostAdam(std::vector<torch::Tensor> parameters, double lr)
    : adam_(std::move(parameters), torch::optim::AdamOptions(lr)) {}

void HostAdam::set_lr(double lr) {
  for (auto& group : adam_.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
}

}  // namespace copytask
