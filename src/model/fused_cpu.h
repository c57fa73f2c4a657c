#pragma once
// The encoder on the CPU by hand (the layers of model/cpu_layers.h), a few examples at a
// time: the training step's forward and backward, and the forward pass evaluation uses. A
// group's activations (G x T x D = 4 x 10 x 20 floats per site) stay in the first two cache
// levels from the embedding to the loss and back, where LibTorch's op-by-op autograd streams
// every site of the whole batch through memory, pass after pass, and runs thousands of tiny
// matrix products as loops. The same function as Encoder::forward + member_losses + backward
// (tests compare the loss, every gradient and the tables' gradients with that path and
// with the PyTorch fixtures), summed in another order.
//
// The positional tables come in as inputs (model/positional_tables.h) and their gradients
// go out, so the step never knows a scheme: the trainer carries those gradients on to the
// schemes' parameters (EncoderImpl::positional_backward).
//
// Determinism: each member's examples are cut into K partitions that depend only on the
// batch size B; a partition's gradient is summed example by example in its own buffer and
// the partitions are added in order. So the result does not depend on the thread count,
// nor on the members beside a member.
//
// Groups: the training step runs G consecutive examples of a partition through each layer
// together. In rows (any G): the linear layers, layer norms, residuals and ReLUs take the
// group's G T rows at once, the attention and the positional hooks one example at a time.
// Across the lanes (G = 16, the default, for a member with no hook at the scores or the
// softmax): every layer of the blocks takes the 16 examples side by side in a vector's lanes
// (model/cpu_lanes_layers.h, cpu_attention_lanes.h), the dropout masks drawn straight into
// the lanes, and a member's one hook on q and k with a lanes form (the rotation) run there,
// as do the final layer norm, the head and the loss; the embedding and the other positional
// hooks stay in rows.
// The losses and every gradient at an activation are the same whatever G and whichever
// layout, bit for bit (tested): a product's element is the same sum in the same order
// whatever its rows or lanes. The parameters' gradients in rows sum a group's rows in the
// examples' order, as the examples one after another did: the same bits whatever G. Across
// the lanes the parameters' gradients but the token embedding's (the blocks', the final layer
// norm's and the head's) sum each lane's examples apart over a whole partition, then the 16
// lanes in order at its end: the same terms in another order, so the same numbers within
// float rounding (about 1e-6 of a gradient's largest element, tested), and always the same
// bits for the same batch, members and partitions, whatever the threads.
// One more exception, within float rounding: a table that the blocks share (the score bias, a
// learned rotation or scale), whose hook at positions 0..T-1 sums its gradient straight into
// the member's block after block, gets the group's terms of the last block first, then the
// block before. (Under position IDs each example's table gradient is summed apart and added
// at its end: exact again.) A group makes the small products larger (fewer calls, and the
// weight gradients' sums run over G T rows, not T, so their accumulators are loaded and
// stored a G-th as often); docs/performance.md has the timings.
//
// Shapes: M members, B examples per member, T positions, D embed, H heads, Dh = D / H,
// F FF hidden, V vocab, L blocks, K partitions of the examples, G examples a group.
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/encoder.h"

namespace copytask {

// The training step's examples a group: 16, so that the blocks take the group's examples
// across a vector's lanes (above; a member whose hooks act at the scores or the softmax runs
// in rows). In rows the step is as fast with 16 as with 4, which had measured faster than 1
// and 2 and as fast as 8 (docs/performance.md); a group's workspace is about 32 KB an example.
constexpr int64_t kFusedCpuGroupExamples = 16;

// Why the fused step cannot run this model ("" when it can): not float32 on the CPU.
std::string fused_cpu_unsupported(const EncoderImpl& model);

// The training step's forward and backward: sets every stacked parameter's gradient to
// d(sum over members of the member's mean cross-entropy over its B*T positions)/d(parameter),
// exactly what member_losses(model->forward(inputs, masks), targets).sum().backward() gives,
// and returns each member's loss (M). tables: model.positional_tables(T). table_grads,
// when given, receives the loss's gradients with respect to the tables (the tables'
// shapes), for the members whose tables are learned (tables.learned; zero for the others).
// inputs, targets: (M, B, T) int64 (views with any strides); masks: this step's dropout
// masks for the whole batch of B (as drawn by model.dropout_masks(B)), or nullptr for none.
// positions (position IDs, model.position_ids): (M, B, T) int64, each example's positions; then tables
// are model.positional_tables(model.table_positions(T)), each example reads its rows, and
// table_grads gathers every example's gradient back at them. group_examples: G (above), 0
// for kFusedCpuGroupExamples; the tests set others to check that no number depends on it.
torch::Tensor fused_cpu_loss_backward(EncoderImpl& model, const PositionalTables& tables, const torch::Tensor& inputs,
                                      const torch::Tensor& targets, const DropoutMasks* masks,
                                      PositionalTables* table_grads = nullptr, const torch::Tensor& positions = {},
                                      int64_t group_examples = 0);

// The forward pass without dropout (evaluation): logits (M, N, T, V) of inputs (M, N, T),
// the same numbers as the training step's forward. attention_out, when given, receives
// each block's attention weights (M, N, H, T, T).
torch::Tensor fused_cpu_forward(EncoderImpl& model, const PositionalTables& tables, const torch::Tensor& inputs,
                                std::vector<torch::Tensor>* attention_out = nullptr, const torch::Tensor& positions = {});

}  // namespace copytask
