#pragma once
// The member-batched encoder in LibTorch ops (docs/design.md sections 2 and 3): M independent
// models that share shapes, run as one. Per member:
//   x = tok_emb[tokens] (+ the embedding hooks: the additive table)
//   per block (pre-LN): x += dropout(proj(attention(ln1(x))));  x += dropout(ff(ln2(x)))
//     attention: fused q/k/v projection without bias; the query_key hooks (rotation, the
//                q/k scale); scores q.k / sqrt(Dh); the scores hooks (score bias, content
//                term); the softmax hooks (the length scale); causal mask, softmax,
//                dropout on the weights
//     ff: fc2(dropout(relu(fc1(x))))
//   logits = head(ln_f(x))
// Each member's positional scheme is a module of its own (model/positional.h) whose
// tables the hooks apply at their sites (model/hooks/hook.h). Dropout sites:
// model/dropout_sites.h.
//
// This is the autograd formulation: the GPU trains with it, and on the CPU it is what the
// hand-written step (model/fused_cpu.h) is checked against.
//
// Shapes: M members, B batch, T positions, D embed, H heads, Dh = D / H, F FF hidden,
// V vocab, L blocks.
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "model/dropout_masks.h"
#include "model/dropout_sites.h"
#include "model/dropout_stream.h"
#include "model/encoder_shape.h"
#include "model/member.h"
#include "model/position_ids.h"
#include "model/positional_tables.h"
#include "model/stacked.h"

namespace copytask {

// What attention reads besides its input: the members' positional tables (each hook
// applies its own at its site, model/hooks/hook.h), where the causal members may not look,
// (M, 1, 1, T, T) bool or undefined, and which members are causal.
struct AttentionContext {
  const PositionalTables* tables = nullptr;
  torch::Tensor mask;                             // (M, 1, 1, T, T): j > i for causal members
  const std::vector<uint8_t>* causal = nullptr;   // per member
  torch::Tensor causal_flags;                     // (M) bool on the device
};

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int64_t members, int64_t embed, int64_t heads);
  // x: (M, B, T, D) -> (M, B, T, D). dropout: (M, B, H, T, T) or undefined.
  // attention_out, when given, receives the weights (M, B, H, T, T); content_out the
  // content hook's terms (M, B, H, T, T), when a member has one.
  torch::Tensor forward(const torch::Tensor& x, const AttentionContext& context, const torch::Tensor& dropout,
                        torch::Tensor* attention_out, int64_t block, torch::Tensor* content_out = nullptr);
  StackedLinear qkv{nullptr}, proj{nullptr};
  int64_t heads;
};
TORCH_MODULE(Attention);

class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t members, int64_t embed, int64_t hidden, Activation activation);
  // x: (M, B, T, D) -> same; hidden_dropout: (M, B, T, F) or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& hidden_dropout);
  StackedLinear fc1{nullptr}, fc2{nullptr};
  Activation activation;
};
TORCH_MODULE(FeedForward);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t members, const EncoderShape& shape, int64_t index);
  torch::Tensor forward(const torch::Tensor& x, const AttentionContext& context, const DropoutMasks* masks,
                        torch::Tensor* attention_out, torch::Tensor* content_out = nullptr);
  StackedLayerNorm ln1{nullptr}, ln2{nullptr};
  Attention attn{nullptr};
  FeedForward ff{nullptr};
  int64_t index;  // which block: where its dropout masks are
};
TORCH_MODULE(Block);

class EncoderImpl : public torch::nn::Module {
 public:
  // Parameters are drawn on the CPU from each member's seed, in a fixed order that does not
  // depend on the scheme (so seed s starts from the same weights under every scheme), then
  // moved to `device`.
  EncoderImpl(const EncoderShape& shape, std::vector<MemberSpec> members, const torch::Device& device);

  // tokens: (M, B, T) int64 -> logits (M, B, T, V). Dropout only when `masks` is given.
  // attention_out, when given, receives each block's attention weights (M, B, H, T, T).
  // positions, when given (position IDs, model.position_ids): (M, B, T) int64, each example's positions.
  torch::Tensor forward(const torch::Tensor& tokens, const DropoutMasks* masks = nullptr,
                        std::vector<torch::Tensor>* attention_out = nullptr, const torch::Tensor& positions = {});
  // The same with the positional tables given (positional_tables(T), or tables a test
  // wants the gradients of). content_out, when given, receives each block's content terms
  // (M, B, H, T, T) (zeros for members without one; empty when no member has one).
  torch::Tensor forward(const torch::Tensor& tokens, const PositionalTables& tables, const DropoutMasks* masks,
                        std::vector<torch::Tensor>* attention_out,
                        std::vector<torch::Tensor>* content_out = nullptr);

  // The members' positional tables for P positions (with autograd to the scheme
  // parameters), and the step back from their gradients to those parameters.
  PositionalTables positional_tables(int64_t positions);

  // Position IDs (model.position_ids, model/position_ids.h). Whether any member's tokens
  // carry IDs other than 0..T-1; the positions its tables must cover for inputs of T tokens
  // (T, or the largest L of the members); this training step's IDs of the batch `inputs`
  // (M, B, T), each member from its own stream (call once per step); the IDs of evaluation
  // examples first..first+N-1, inputs (M, N, T) (the same at every evaluation and for every
  // member with the same kind and L). Sequential members get 0..T-1; undefined tensors when
  // every member is sequential. Coupled IDs read the inputs' tokens (on the host).
  bool position_ids_vary() const;
  int64_t table_positions(int64_t T) const;
  torch::Tensor training_positions(const torch::Tensor& inputs);
  torch::Tensor evaluation_positions(const torch::Tensor& inputs, int64_t first) const;
  // Where offset and coupled IDs start in evaluation (eval.position_start): at 0 unless set
  // to drawn, until set again.
  void evaluation_start_set(EvaluationStart start) { evaluation_start_ = start; }
  EvaluationStart evaluation_start() const { return evaluation_start_; }
  // Each example's rows of the tables (made for table_positions(T)): per_example tables.
  PositionalTables tables_at(const PositionalTables& tables, const torch::Tensor& positions) const;
  void positional_backward(const PositionalTables& tables, const PositionalTables& table_grads);

  // Evaluation with RoPE's rescalings (eval.rope_rescaling): the members that rotate q and k
  // make their tables rescaled until called again with an inactive one.
  void rope_rescaling_set(const RopeRescaling& rescaling);
  // Whether member m rotates q and k (the rescalings apply to it).
  bool rotates(int64_t member);
  // Each block's content terms of inputs (M, N, T) without dropout (at the evaluation
  // position IDs): (M, N, H, T, T) per block, zeros for members
  // without a content term; empty when no member has one.
  std::vector<torch::Tensor> content_terms(const torch::Tensor& tokens);

  // Draws this step's dropout masks for a batch of `batch` examples (each member from its
  // own stream). Call once per training step, before forward. On the CPU, with_buffer =
  // false draws only the stream (for the fused step, which draws its masks itself).
  DropoutMasks dropout_masks(int64_t batch, bool with_buffer = true);
  // The same masks computed from a step number held on the device (a 0-dim int64 tensor):
  // what dropout_masks draws at that step, without reading the host (a CUDA graph replays
  // it with the step its counter holds). It leaves the host's count alone: a caller that
  // draws this way says how many steps it drew with skip_dropout_steps, so that later
  // dropout_masks calls go on from there. next_dropout_step(): the step dropout_masks
  // draws next.
  DropoutMasks dropout_masks_at(int64_t batch, const torch::Tensor& step);
  // The key of each member's stream at that step (M) int64, on the device: the masks' keys
  // (model/dropout_stream.h), for a kernel that draws its masks itself (model/fused_gpu.h).
  torch::Tensor dropout_step_keys_at(const torch::Tensor& step);
  int64_t next_dropout_step() const { return static_cast<int64_t>(dropout_steps_); }
  void skip_dropout_steps(int64_t steps) { dropout_steps_ += static_cast<uint64_t>(steps); }

  int64_t member_count() const { return static_cast<int64_t>(members_.size()); }
  const std::vector<MemberSpec>& members() const { return members_; }
  const EncoderShape& shape() const { return shape_; }
  const torch::Device& device() const { return device_; }
  // Member m's positional: its scheme with its options attached (model/positional.h).
  PositionalScheme& scheme(int64_t member) { return *schemes_[static_cast<size_t>(member)]; }
  const std::vector<uint8_t>& causal_members() const { return causal_; }
  // The most positions every member's scheme can cover (a learned table's rows), so an
  // evaluation can ask for a context longer than the training one.
  int64_t position_limit() const;
  // The parameters with a leading member axis, by name (every parameter but the schemes').
  std::vector<std::pair<std::string, torch::Tensor>> stacked_parameters();

  torch::Tensor tok_emb;  // (M, V, D)
  torch::nn::ModuleList blocks{nullptr};
  StackedLayerNorm ln_f{nullptr};
  StackedLinear head{nullptr};
  torch::nn::ModuleList positional{nullptr};  // one scheme module per member

 private:
  void init_member(int64_t member, at::Generator& generator, at::Generator& scheme_generator);
  AttentionContext attention_context(const PositionalTables& tables, int64_t positions);
  // Where the causal members may not look at T positions: (M, 1, 1, T, T) bool, j > i.
  torch::Tensor causal_mask(int64_t T) const;

  EncoderShape shape_;
  std::vector<MemberSpec> members_;
  torch::Device device_;
  std::vector<std::shared_ptr<PositionalScheme>> schemes_;
  std::unique_ptr<PositionalTableMaker> table_maker_;
  torch::Tensor causal_mask_;    // (M, 1, 1, T, T) bool: j > i for causal members, or undefined
  torch::Tensor causal_flags_;   // (M, 1, 1, 1, 1) bool: which members are causal (a mask for another T)
  std::vector<uint8_t> causal_;  // per member, on the host
  torch::Tensor token_offsets_;  // (M, 1, 1) int64: m * V, to index the stacked embedding table
  // Each member's dropout randomness: its stream key, and the steps drawn so far (the same
  // counter-based stream on every device, model/dropout_stream.h).
  std::vector<uint64_t> dropout_keys_;
  torch::Tensor dropout_key_tensor_;  // (M) int64 on the device: dropout_keys_, for dropout_masks_at
  uint64_t dropout_steps_ = 0;
  // Position IDs: each member's kind, range L and stream key, and the steps drawn.
  std::vector<MemberPositionIds> position_ids_;
  uint64_t position_steps_ = 0;
  EvaluationStart evaluation_start_ = EvaluationStart::zero;
};
TORCH_MODULE(Encoder);

// Each member's mean cross-entropy over all B*T positions: logits (M, B, T, V),
// targets (M, B, T) or (B, T) -> (M); a target out of the loss (kOutOfLoss, task/tokens.h)
// counts as 0 in the sum, still divided by B*T. The training loss is the sum over members.
torch::Tensor member_losses(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace copytask
