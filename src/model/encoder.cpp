#include "model/encoder.h"

#include <cmath>
#include <limits>

#include <ATen/Parallel.h>

#include "compat/torch_compat.h"
#include "model/attention_core.h"

namespace copytask {

EncoderShape encoder_shape_of(const Config& c) {
  return EncoderShape{c.task.vocab_size, c.task.context, c.model.embed, c.model.heads,
                      c.model.blocks,    c.model.hidden,  c.model.dropout};
}

DropoutMasks DropoutMasks::chunk(int64_t start, int64_t count) const {
  DropoutMasks part(buffer_, batch_, stream_);
  part.start_ = start;
  part.count_ = count;
  return part;
}

torch::Tensor DropoutMasks::take(const std::vector<int64_t>& shape) {
  TORCH_CHECK(buffer_.defined(), "DropoutMasks: drawn without a buffer (dropout_masks(batch, false))");
  // The site's masks for the whole batch, then this chunk's examples.
  std::vector<int64_t> whole_shape{buffer_.size(0), batch_};
  whole_shape.insert(whole_shape.end(), shape.begin() + 1, shape.end());
  int64_t count = 1;
  for (size_t i = 1; i < whole_shape.size(); ++i) count *= whole_shape[i];
  auto whole = buffer_.narrow(1, offset_, count).view(whole_shape);  // (M, B, shape[1:]...)
  offset_ += count;
  return count_ == batch_ ? whole : whole.narrow(1, start_, count_);  // (M, shape...)
}

AttentionImpl::AttentionImpl(int64_t members, int64_t embed, int64_t heads_) : heads(heads_) {
  qkv = register_module("qkv", StackedLinear(members, embed, 3 * embed, /*with_bias=*/false));
  proj = register_module("proj", StackedLinear(members, embed, embed, /*with_bias=*/true));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const PositionalHooks& hooks,
                                     const torch::Tensor& score_offset, DropoutMasks* masks,
                                     torch::Tensor* attention_out) {
  const int64_t M = x.size(0), B = x.size(1), T = x.size(2), D = x.size(3), H = heads, Dh = D / H;
  auto qkv_out = qkv->forward(x).view({M, B, T, 3, H, Dh});   // (M, B, T, 3, H, Dh)
  auto split = qkv_out.permute({3, 0, 1, 4, 2, 5});           // (3, M, B, H, T, Dh)
  auto q = split[0], k = split[1], v = split[2];              // (M, B, H, T, Dh) each
  hooks.rotate_qk(q, k);
  const torch::Tensor dropout = masks ? masks->take({B, H, T, T}) : torch::Tensor();  // (M, B, H, T, T)
  const AttentionOutput core = x.device().is_cpu() ? attention_core_cpu(q, k, v, score_offset, dropout)
                                                   : attention_core_matmul(q, k, v, score_offset, dropout);
  if (attention_out) *attention_out = core.weights;
  auto merged = core.mixed.permute({0, 1, 3, 2, 4}).reshape({M, B, T, D});  // (M, B, T, H*Dh)
  auto out = proj->forward(merged);                            // (M, B, T, D)
  if (masks) out = out * masks->take({B, T, D});
  return out;
}

FeedForwardImpl::FeedForwardImpl(int64_t members, int64_t embed, int64_t hidden) {
  fc1 = register_module("fc1", StackedLinear(members, embed, hidden, /*with_bias=*/true));
  fc2 = register_module("fc2", StackedLinear(members, hidden, embed, /*with_bias=*/true));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x, DropoutMasks* masks) {
  const int64_t B = x.size(1), T = x.size(2);
  auto hidden = torch::relu(fc1->forward(x));                  // (M, B, T, F)
  if (masks) hidden = hidden * masks->take({B, T, hidden.size(3)});
  auto out = fc2->forward(hidden);                             // (M, B, T, D)
  if (masks) out = out * masks->take({B, T, out.size(3)});
  return out;
}

BlockImpl::BlockImpl(int64_t members, const EncoderShape& shape) {
  ln1 = register_module("ln1", StackedLayerNorm(members, shape.embed));
  attn = register_module("attn", Attention(members, shape.embed, shape.heads));
  ln2 = register_module("ln2", StackedLayerNorm(members, shape.embed));
  ff = register_module("ff", FeedForward(members, shape.embed, shape.hidden));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const PositionalHooks& hooks,
                                 const torch::Tensor& score_offset, DropoutMasks* masks,
                                 torch::Tensor* attention_out) {
  auto h = x + attn->forward(ln1->forward(x), hooks, score_offset, masks, attention_out);  // (M, B, T, D)
  return h + ff->forward(ln2->forward(h), masks);                                        // (M, B, T, D)
}

namespace {
std::vector<std::string> positional_of(const std::vector<MemberSpec>& members) {
  std::vector<std::string> out;
  for (const auto& member : members) out.push_back(member.positional);
  return out;
}
}  // namespace

EncoderImpl::EncoderImpl(const EncoderShape& shape, std::vector<MemberSpec> members, const torch::Device& device)
    : shape_(shape),
      members_(std::move(members)),
      device_(device),
      hooks_(positional_of(members_), shape.context, shape.embed, shape.heads, device) {
  const int64_t M = member_count();
  tok_emb = register_parameter("tok_emb", torch::zeros({M, shape.vocab, shape.embed}));
  pos_emb = register_parameter("pos_emb", torch::zeros({M, shape.context, shape.embed}));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 0; l < shape.blocks; ++l) blocks->push_back(Block(M, shape));
  ln_f = register_module("ln_f", StackedLayerNorm(M, shape.embed));
  head = register_module("head", StackedLinear(M, shape.embed, shape.vocab, /*with_bias=*/true));

  for (int64_t m = 0; m < M; ++m) {
    at::Generator init_generator = generator_make(torch::kCPU, stream_seed(members_[m].seed, 1));
    init_member(m, init_generator);
    const uint64_t dropout_seed = stream_seed(members_[m].seed, 2);
    if (device.is_cpu()) cpu_dropout_keys_.push_back(dropout_seed);
    else dropout_generators_.push_back(generator_make(device, dropout_seed));
  }
  to(device);

  // What every score gets added before the softmax: the score-bias hook, then -inf where a
  // causal member may not look (j > i), applied after the bias (DESIGN.md section 2).
  bool any_causal = false;
  for (const auto& member : members_) any_causal = any_causal || member.causal;
  if (hooks_.score_bias().defined() || any_causal) {
    const int64_t T = shape.context;
    score_offset_ = hooks_.score_bias().defined() ? hooks_.score_bias().clone()
                                                  : torch::zeros({M, 1, shape.heads, T, T}, torch::TensorOptions().device(device));
    std::vector<int64_t> causal_flags;
    for (const auto& member : members_) causal_flags.push_back(member.causal ? 1 : 0);
    auto ahead = torch::ones({T, T}, torch::kBool).triu(1);  // (T, T) j > i
    auto flags = torch::tensor(causal_flags).to(torch::kBool);
    auto masked = (flags.view({M, 1, 1, 1, 1}) & ahead.view({1, 1, 1, T, T})).to(device);  // (M, 1, 1, T, T)
    score_offset_ = score_offset_.masked_fill(masked, -std::numeric_limits<float>::infinity());  // (M, 1, H, T, T)
  }
  token_offsets_ = (torch::arange(M, torch::kLong) * shape.vocab).view({M, 1, 1}).to(device);  // (M, 1, 1)
}

void EncoderImpl::init_member(int64_t m, at::Generator& generator) {
  // A fixed order, the same for every scheme: embeddings N(0, 1) as nn.Embedding, linear
  // layers as nn.Linear, layer norms 1 and 0.
  torch::NoGradGuard no_grad;
  tok_emb[m].normal_(0.0, 1.0, generator);
  pos_emb[m].normal_(0.0, 1.0, generator);
  for (const auto& module : *blocks) {
    auto block = module->as<BlockImpl>();
    block->ln1->init_member(m);
    block->attn->qkv->init_member(m, generator);
    block->attn->proj->init_member(m, generator);
    block->ln2->init_member(m);
    block->ff->fc1->init_member(m, generator);
    block->ff->fc2->init_member(m, generator);
  }
  ln_f->init_member(m);
  head->init_member(m, generator);
}

torch::Tensor EncoderImpl::forward(const torch::Tensor& tokens, DropoutMasks* masks,
                                   std::vector<torch::Tensor>* attention_out) {
  const int64_t M = member_count(), B = tokens.size(1), T = tokens.size(2), D = shape_.embed;
  TORCH_CHECK(tokens.size(0) == M, "tokens carry ", tokens.size(0), " members, the model ", M);
  TORCH_CHECK(T == shape_.context, "tokens carry ", T, " positions, the model ", shape_.context);
  // Member m's token t is row m * V + t of the stacked table (M * V, D).
  auto rows = (tokens + token_offsets_).reshape({-1});                                  // (M*B*T)
  auto x = tok_emb.view({M * shape_.vocab, D}).index_select(0, rows).view({M, B, T, D});  // (M, B, T, D)
  auto additive = hooks_.additive(pos_emb);                                             // (M, 1, T, D)
  if (additive.defined()) x = x + additive;
  if (attention_out) attention_out->clear();
  for (const auto& module : *blocks) {
    torch::Tensor weights;
    x = module->as<BlockImpl>()->forward(x, hooks_, score_offset_, masks, attention_out ? &weights : nullptr);
    if (attention_out) attention_out->push_back(weights);
  }
  return head->forward(ln_f->forward(x));  // (M, B, T, V)
}

int64_t EncoderImpl::dropout_elements(int64_t batch) const {
  const int64_t T = shape_.context, D = shape_.embed, H = shape_.heads, F = shape_.hidden;
  // Sites per block: attention weights (B,H,T,T), attention output (B,T,D), FF hidden (B,T,F), FF output (B,T,D).
  return shape_.blocks * batch * (H * T * T + T * D + T * F + T * D);
}

DropoutMasks EncoderImpl::dropout_masks(int64_t batch, bool with_buffer) {
  const int64_t per_member = dropout_elements(batch);
  if (device_.is_cpu()) {
    DropoutStream stream(cpu_dropout_keys_, cpu_dropout_steps_++, shape_.dropout);
    if (!with_buffer) return DropoutMasks(torch::Tensor(), batch, std::move(stream));
    auto buffer = torch::empty({member_count(), per_member});  // (M, S)
    // Blocks of 2^16 elements of every member, drawn in parallel (the stream is counter-based).
    constexpr int64_t kBlock = 1 << 16;
    const int64_t blocks = (per_member + kBlock - 1) / kBlock;
    float* data = buffer.data_ptr<float>();
    at::parallel_for(0, member_count() * blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t m = task / blocks, first = (task % blocks) * kBlock;
        stream.fill(m, first, std::min(kBlock, per_member - first), data + m * per_member + first);
      }
    });
    return DropoutMasks(std::move(buffer), batch, std::move(stream));
  }
  auto buffer = torch::empty({member_count(), per_member}, torch::TensorOptions().device(device_));  // (M, S)
  const double keep = 1.0 - shape_.dropout;
  for (int64_t m = 0; m < member_count(); ++m) buffer[m].bernoulli_(keep, dropout_generators_[m]);
  buffer.mul_(1.0 / keep);
  return DropoutMasks(std::move(buffer), batch);
}

torch::Tensor member_losses(const torch::Tensor& logits, const torch::Tensor& targets) {
  const int64_t M = logits.size(0);
  auto log_probs = torch::log_softmax(logits, -1);                                      // (M, B, T, V)
  auto expanded = targets.dim() == 3 ? targets : targets.unsqueeze(0).expand({M, targets.size(0), targets.size(1)});
  auto picked = log_probs.gather(-1, expanded.unsqueeze(-1)).squeeze(-1);               // (M, B, T)
  return -picked.reshape({M, -1}).mean(1);                                              // (M)
}

}  // namespace copytask
