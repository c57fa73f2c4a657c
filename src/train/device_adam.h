#pragma once
// Adam whose whole state lives on the parameters' device: the moments, and also the step
// count and the learning rate, as 0-dim float64 tensors. torch::optim::Adam keeps its step
// count on the host and turns the bias corrections into host scalars; inside a CUDA graph
// those would be frozen at their captured values (docs/design.md section 7). Here every step's
// bias corrections are computed on the device from the device's step count, so a captured
// step replays as a real Adam step, and a loop of steps never waits for the host.
//
// The update is torch::optim::Adam's with its defaults (betas 0.9, 0.999, eps 1e-8, no
// weight decay, no AMSGrad), in the same order of operations:
//   t += 1;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// tested against torch::optim::Adam on the CPU (tests/test_device_step.cpp). A parameter
// whose gradient is undefined is skipped, as torch::optim::Adam does.
#include <vector>

#include <torch/types.h>

namespace copytask {

class DeviceAdam {
 public:
  DeviceAdam(std::vector<torch::Tensor> parameters, double lr);
  // One Adam step of every parameter with a gradient. Launches device work only.
  void step();
  // The learning rate of the steps that follow: written into the device tensor (a kernel,
  // no synchronisation), so a captured step reads it when replayed.
  void set_lr(double lr);
  // The step count (0-dim float64, on the parameters' device).
  const torch::Tensor& step_count() const { return step_; }

 private:
  std::vector<torch::Tensor> parameters_;
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_;  // one per parameter, its shape
  torch::Tensor step_, lr_;                          // () float64 on the device
  static constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
};

}  // namespace copytask
