#pragma once
// A training step's forward and backward of the whole encoder on the CPU, written by hand
// one example at a time. An example's activations (T x D = 10 x 20 floats per site) stay
// in the L1 cache from the embedding to the loss and back, where LibTorch's op-by-op
// autograd streams every site of the whole batch through memory, pass after pass, and
// runs thousands of tiny matrix products as loops. The same function as
// Encoder::forward + member_losses + backward (tests compare the loss and every gradient
// with that path and with the PyTorch fixtures), summed in another order.
//
// Determinism: each member's examples are cut into K partitions that depend only on the
// batch size B; a partition's gradient is summed example by example in its own buffer and
// the partitions are added in order. So the result does not depend on the thread count,
// nor on the members beside a member.
//
// Shapes: M members, B examples per member, T positions, D embed, H heads, Dh = D / H,
// F FF hidden, V vocab, L blocks, K partitions of the examples, P one member's parameters.
#include <string>

#include <torch/types.h>

#include "model/encoder.h"

namespace copytask {

// Why the fused step cannot run this model ("" when it can): not float32 on the CPU, or a
// positional rotation other than RoPE's pair rotation.
std::string fused_cpu_unsupported(const EncoderImpl& model);

// The training step's forward and backward: sets every parameter's gradient to
// d(sum over members of the member's mean cross-entropy over its B*T positions)/d(parameter),
// exactly what member_losses(model->forward(inputs, masks), targets).sum().backward() gives,
// and returns each member's loss (M).
// inputs, targets: (M, B, T) int64 (views with any strides); masks: this step's dropout
// masks for the whole batch of B (as drawn by model.dropout_masks(B)), or nullptr for none.
torch::Tensor fused_cpu_loss_backward(EncoderImpl& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                                      const DropoutMasks* masks);

}  // namespace copytask
