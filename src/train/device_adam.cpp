#include "train/device_adam.h"

#include <c10/util/Exception.h>
#include <torch/torch.h>

namespace copytask {

DeviceAdam::DeviceAdam(std::vector<torch::Tensor> parameters, double lr) : parameters_(std::move(parameters)) {
  TORCH_CHECK(!parameters_.empty(), "DeviceAdam: no parameters");
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(parameters_.front().device());
  step_ = torch::zeros({}, options);
  lr_ = torch::full({}, lr, options);
  for (const auto& p : parameters_) {
    exp_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    exp_avg_sq_.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
  }
}

void DeviceAdam::set_lr(double lr) { lr_.fill_(lr); }

void DeviceAdam::step() {
  torch::NoGradGuard no_grad;
  step_.add_(1);
  // The bias corrections from the device's step count, in float64 as torch::optim::Adam's
  // host scalars; each 0-dim float64 tensor meets the float32 moments as a scalar would.
  const auto correction1 = 1 - torch::pow(kBeta1, step_);              // ()
  const auto correction2_sqrt = (1 - torch::pow(kBeta2, step_)).sqrt();  // ()
  const auto minus_step_size = -lr_ / correction1;                      // ()
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    const auto& grad = p.grad();
    if (!grad.defined()) continue;
    exp_avg_[i].mul_(kBeta1).add_(grad, 1 - kBeta1);
    exp_avg_sq_[i].mul_(kBeta2).addcmul_(grad, grad, 1 - kBeta2);
    auto denom = (exp_avg_sq_[i].sqrt() / correction2_sqrt).add_(kEps);
    // addcdiv_(m, denom, -step_size) computes p + (-step_size * m) / denom: the same order.
    p.addcdiv_(exp_avg_[i] * minus_step_size, denom);
  }
}

}  // namespace copytask
