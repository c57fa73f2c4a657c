#pragma once
// The host's Adam for the CPU's training steps (the fused CPU step and the autograd step):
// torch::optim::Adam over every stacked parameter of the batch, in one parameter group.
// Adam is element-wise, so this is exactly M independent optimizers, one per member; one
// group because every member follows the study's one learning-rate schedule. (A GPU's
// step keeps its Adam on the device instead: train/device_adam.h.)
#include <vector>

#include <torch/optim/adam.h>
#include <torch/types.h>

namespace copytask {

class HostAdam {
 public:
  HostAdam(std::vector<torch::Tensor> parameters, double lr);
  // The learning rate of the steps that follow (train_members sets it from the schedule).
  void set_lr(double lr);
  // Every gradient zeroed, for a step that accumulates into them (the autograd step's chunks).
  void zero_grad() { adam_.zero_grad(); }
  void step() { adam_.step(); }

 private:
  torch::optim::Adam adam_;
};

}  // namespace copytask
