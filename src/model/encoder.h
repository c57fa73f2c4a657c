#pragma once
// The member-batched encoder (DESIGN.md sections 2 and 3): M independent models that
// share shapes, run as one. Per member:
//   x = tok_emb[tokens] (+ additive positions)
//   per block (pre-LN): x += dropout(proj(attention(ln1(x))));  x += dropout(ff(ln2(x)))
//     attention: fused q/k/v projection without bias, RoPE on q and k, scores / sqrt(Dh)
//                + score bias, causal mask, softmax, dropout on the weights
//     ff: fc2(dropout(relu(fc1(x))))
//   logits = head(ln_f(x))
// Dropout sites follow PyTorch's nn.TransformerEncoderLayer (attention weights, after the
// attention projection, inside and after the feed-forward); none on the embeddings.
//
// Shapes: M members, B batch, T positions, D embed, H heads, Dh = D / H, F FF hidden,
// V vocab, L blocks.
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "config/config.h"
#include "model/dropout_stream.h"
#include "model/member.h"
#include "model/positional_hooks.h"
#include "model/stacked.h"

namespace copytask {

struct EncoderShape {
  int64_t vocab = 11, context = 10, embed = 20, heads = 1, blocks = 2, hidden = 32;
  double dropout = 0.1;
};

// The shape a config asks for (task.vocab_size, task.context, model.*).
EncoderShape encoder_shape_of(const Config& config);

// Each member's dropout masks for one step, drawn from that member's own stream, so a
// member's randomness never depends on the members beside it. One buffer (M, S) holds
// every site's mask (0 or 1/(1-p)) for the step's whole batch of B examples; the forward
// pass takes the sites in order. A chunk of the batch (a CPU full-batch step runs in
// chunks) takes the same masks its examples have in the whole batch, so chunking never
// changes which examples are dropped. On the CPU the masks come from a counter-based
// stream (model/dropout_stream.h), which a kernel can draw itself instead of the buffer.
class DropoutMasks {
 public:
  DropoutMasks(torch::Tensor buffer, int64_t batch, DropoutStream stream = {})
      : buffer_(std::move(buffer)), batch_(batch), count_(batch), stream_(std::move(stream)) {}
  // The masks of examples start .. start+count-1, to take site by site from the first.
  DropoutMasks chunk(int64_t start, int64_t count) const;
  // The next site's mask for this chunk's examples: shape = (examples, ...) -> (M, shape...).
  torch::Tensor take(const std::vector<int64_t>& shape);
  bool used_up() const { return offset_ == buffer_.size(1); }
  // For kernels that draw the masks themselves (model/fused_cpu.h): the CPU stream (null
  // on other devices), the batch, and whether nothing is taken yet. The buffer, when it is
  // filled, holds the same values: element e of member m's row is stream()->fill(m, e, 1).
  const DropoutStream* stream() const { return stream_.step_keys.empty() ? nullptr : &stream_; }
  int64_t batch() const { return batch_; }
  bool whole_and_untaken() const { return start_ == 0 && count_ == batch_ && offset_ == 0; }

 private:
  torch::Tensor buffer_;  // (M, S), or undefined when only the stream was drawn
  int64_t batch_;         // B: the examples the buffer holds masks for
  int64_t start_ = 0, count_;
  int64_t offset_ = 0;
  DropoutStream stream_;
};

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int64_t members, int64_t embed, int64_t heads);
  // x: (M, B, T, D) -> (M, B, T, D). attention_out, when given, receives the weights (M, B, H, T, T).
  // score_offset: (M, 1, H, T, T) score bias and causal mask (-inf), or undefined.
  torch::Tensor forward(const torch::Tensor& x, const PositionalHooks& hooks, const torch::Tensor& score_offset,
                        DropoutMasks* masks, torch::Tensor* attention_out);
  StackedLinear qkv{nullptr}, proj{nullptr};
  int64_t heads;
};
TORCH_MODULE(Attention);

class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t members, int64_t embed, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x, DropoutMasks* masks);  // (M, B, T, D) -> same
  StackedLinear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(FeedForward);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(int64_t members, const EncoderShape& shape);
  torch::Tensor forward(const torch::Tensor& x, const PositionalHooks& hooks, const torch::Tensor& score_offset,
                        DropoutMasks* masks, torch::Tensor* attention_out);
  StackedLayerNorm ln1{nullptr}, ln2{nullptr};
  Attention attn{nullptr};
  FeedForward ff{nullptr};
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
  torch::Tensor forward(const torch::Tensor& tokens, DropoutMasks* masks = nullptr,
                        std::vector<torch::Tensor>* attention_out = nullptr);

  // Draws this step's dropout masks for a batch of `batch` examples (each member from its
  // own stream). Call once per training step, before forward. On the CPU, with_buffer =
  // false draws only the stream (for a kernel that draws its masks itself).
  DropoutMasks dropout_masks(int64_t batch, bool with_buffer = true);
  // The number of elements of one step's masks per member (S) for a batch of `batch`.
  int64_t dropout_elements(int64_t batch) const;

  int64_t member_count() const { return static_cast<int64_t>(members_.size()); }
  const std::vector<MemberSpec>& members() const { return members_; }
  const EncoderShape& shape() const { return shape_; }
  const torch::Device& device() const { return device_; }
  const PositionalHooks& hooks() const { return hooks_; }
  const torch::Tensor& score_offset() const { return score_offset_; }  // (M, 1, H, T, T) or undefined

  torch::Tensor tok_emb;  // (M, V, D)
  torch::Tensor pos_emb;  // (M, T, D) used by learned members only
  torch::nn::ModuleList blocks{nullptr};
  StackedLayerNorm ln_f{nullptr};
  StackedLinear head{nullptr};

 private:
  void init_member(int64_t member, at::Generator& generator);

  EncoderShape shape_;
  std::vector<MemberSpec> members_;
  torch::Device device_;
  PositionalHooks hooks_;
  torch::Tensor score_offset_;   // (M, 1, H, T, T) score bias, -inf where a causal member may not look
  torch::Tensor token_offsets_;  // (M, 1, 1) int64: m * V, to index the stacked embedding table
  // Each member's dropout randomness: a stream key and the step count on the CPU,
  // generators on other devices.
  std::vector<uint64_t> cpu_dropout_keys_;
  uint64_t cpu_dropout_steps_ = 0;
  std::vector<at::Generator> dropout_generators_;
};
TORCH_MODULE(Encoder);

// Each member's mean cross-entropy over all B*T positions: logits (M, B, T, V),
// targets (M, B, T) or (B, T) -> (M). The training loss is the sum over members.
torch::Tensor member_losses(const torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace copytask
