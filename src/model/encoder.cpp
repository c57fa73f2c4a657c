#include "model/encoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "compat/torch_compat.h"
#include "model/hooks/registry.h"
#include "model/parameter_layout.h"
#include "model/position_ids.h"

namespace copytask {

AttentionImpl::AttentionImpl(int64_t members, int64_t embed, int64_t heads_) : heads(heads_) {
  qkv = register_module("qkv", StackedLinear(members, embed, 3 * embed, /*with_bias=*/false));
  proj = register_module("proj", StackedLinear(members, embed, embed, /*with_bias=*/true));
}

namespace {
// Applies every hook of `site` that a member of the batch uses, in the registry's order.
void site_apply(HookSite site, const PositionalTables& tables, SiteState& state) {
  const auto& hooks = hook_registry();
  for (size_t index = 0; index < hooks.size(); ++index)
    if (hooks[index]->site() == site && tables.hooks[index].any_used()) hooks[index]->apply(tables.hooks[index], state);
}
}  // namespace

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionContext& context,
                                     const torch::Tensor& dropout, torch::Tensor* attention_out, int64_t block,
                                     torch::Tensor* content_out) {
  const int64_t M = x.size(0), B = x.size(1), T = x.size(2), D = x.size(3), H = heads, Dh = D / H;
  auto qkv_out = qkv->forward(x).view({M, B, T, 3, H, Dh});   // (M, B, T, 3, H, Dh)
  auto split = qkv_out.permute({3, 0, 1, 4, 2, 5});           // (3, M, B, H, T, Dh)
  SiteState state;
  state.block = block;
  state.per_example = context.tables->per_example;
  state.input = x;
  state.q = split[0];                                         // (M, B, H, T, Dh)
  state.k = split[1];                                         // (M, B, H, T, Dh)
  state.causal = context.causal;
  state.causal_flags = context.causal_flags;
  state.content_out = content_out;
  site_apply(HookSite::query_key, *context.tables, state);
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  state.scores = torch::matmul(state.q, state.k.transpose(-1, -2)) * scale;  // (M, B, H, T, T)
  state.logits = state.scores;
  site_apply(HookSite::scores, *context.tables, state);
  site_apply(HookSite::softmax, *context.tables, state);
  // The causal mask last, after every hook (docs/design.md section 2).
  auto logits = context.mask.defined() ? state.logits.masked_fill(context.mask, -std::numeric_limits<float>::infinity())
                                       : state.logits;
  auto weights = torch::softmax(logits, -1);                               // (M, B, H, T, T)
  if (attention_out) *attention_out = weights.detach();
  auto kept = dropout.defined() ? weights * dropout : weights;
  auto mixed = torch::matmul(kept, split[2]);                              // (M, B, H, T, Dh)
  auto merged = mixed.permute({0, 1, 3, 2, 4}).reshape({M, B, T, D});      // (M, B, T, H*Dh)
  return proj->forward(merged);                                            // (M, B, T, D)
}

FeedForwardImpl::FeedForwardImpl(int64_t members, int64_t embed, int64_t hidden, Activation activation_)
    : activation(activation_) {
  fc1 = register_module("fc1", StackedLinear(members, embed, hidden, /*with_bias=*/true));
  fc2 = register_module("fc2", StackedLinear(members, hidden, embed, /*with_bias=*/true));
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x, const torch::Tensor& hidden_dropout) {
  auto pre = fc1->forward(x);                                  // (M, B, T, F)
  torch::Tensor hidden;
  switch (activation) {  // every value of model.activation (config/layer_form.h): a missing one fails the build
    case Activation::relu: hidden = torch::relu(pre); break;
    case Activation::gelu: hidden = torch::gelu(pre); break;  // approximate = "none": the erf form
  }
  if (hidden_dropout.defined()) hidden = hidden * hidden_dropout;
  return fc2->forward(hidden);                                 // (M, B, T, D)
}

BlockImpl::BlockImpl(int64_t members, const EncoderShape& shape, int64_t index_) : index(index_) {
  ln1 = register_module("ln1", StackedLayerNorm(members, shape.embed));
  attn = register_module("attn", Attention(members, shape.embed, shape.heads));
  ln2 = register_module("ln2", StackedLayerNorm(members, shape.embed));
  ff = register_module("ff", FeedForward(members, shape.embed, shape.hidden, shape.form.activation));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const AttentionContext& context, const DropoutMasks* masks,
                                 torch::Tensor* attention_out, torch::Tensor* content_out) {
  auto mask = [&](DropoutSite site) { return masks ? masks->site(index, site) : torch::Tensor(); };
  auto attended = attn->forward(ln1->forward(x), context, mask(kAttentionWeights), attention_out, index,
                                content_out);  // (M, B, T, D)
  if (masks) attended = attended * mask(kAttentionOutput);
  auto h = x + attended;
  auto fed = ff->forward(ln2->forward(h), mask(kHidden));                                         // (M, B, T, D)
  if (masks) fed = fed * mask(kFeedForwardOutput);
  return h + fed;
}

EncoderImpl::EncoderImpl(const EncoderShape& shape, std::vector<MemberSpec> members, const torch::Device& device)
    : shape_(shape), members_(std::move(members)), device_(device) {
  const int64_t M = member_count();
  tok_emb = register_parameter("tok_emb", torch::zeros({M, shape.vocab, shape.embed}));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t l = 0; l < shape.blocks; ++l) blocks->push_back(Block(M, shape, l));
  ln_f = register_module("ln_f", StackedLayerNorm(M, shape.embed));
  head = register_module("head", StackedLinear(M, shape.embed, shape.vocab, /*with_bias=*/true));
  positional = register_module("positional", torch::nn::ModuleList());
  for (const auto& member : members_) {
    const PositionalShape positional_shape{shape.context, shape.embed, shape.heads, shape.blocks, member.causal};
    schemes_.push_back(positional_scheme_make(member.positional, member.options, positional_shape));
    positional->push_back(schemes_.back());
  }

  for (int64_t m = 0; m < M; ++m) {
    at::Generator init_generator = generator_make(torch::kCPU, stream_seed(members_[m].seed, 1));
    at::Generator scheme_generator = generator_make(torch::kCPU, stream_seed(members_[m].seed, 4));
    init_member(m, init_generator, scheme_generator);
    dropout_keys_.push_back(stream_seed(members_[m].seed, 2));
    const PositionalOptions& options = members_[m].options;
    position_ids_.push_back({position_id_kind(options.position_ids), copytask::position_ids_vary(options) ? options.position_range : 0,
                             stream_seed(members_[m].seed, 5)});
  }
  to(device);
  table_maker_ = std::make_unique<PositionalTableMaker>(schemes_, shape, device);

  std::vector<int64_t> causal_flags;
  for (const auto& member : members_) {
    causal_flags.push_back(member.causal ? 1 : 0);
    causal_.push_back(member.causal ? 1 : 0);
  }
  const int64_t T = shape.context;
  causal_flags_ = torch::tensor(causal_flags).to(torch::kBool).view({M, 1, 1, 1, 1}).to(device);  // (M, 1, 1, 1, 1)
  if (std::find(causal_flags.begin(), causal_flags.end(), 1) != causal_flags.end())
    causal_mask_ = causal_mask(T);  // the training context's, kept
  token_offsets_ = (torch::arange(M, torch::kLong) * shape.vocab).view({M, 1, 1}).to(device);  // (M, 1, 1)
}

void EncoderImpl::init_member(int64_t m, at::Generator& generator, at::Generator& scheme_generator) {
  // A fixed order, the same for every scheme: embeddings N(0, 1) as nn.Embedding, a (T, D)
  // N(0, 1) position draw (the learned table starts from it), linear layers as nn.Linear,
  // layer norms 1 and 0; then whatever else the scheme draws, from its own stream.
  torch::NoGradGuard no_grad;
  tok_emb[m].normal_(0.0, 1.0, generator);
  const torch::Tensor position_draw = torch::empty({shape_.context, shape_.embed}).normal_(0.0, 1.0, generator);
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
  // The scheme, then each option attached to it, from the member's scheme stream.
  for (PositionalScheme* component : schemes_[static_cast<size_t>(m)]->components())
    component->init(position_draw, scheme_generator);
}

std::vector<std::pair<std::string, torch::Tensor>> EncoderImpl::stacked_parameters() {
  const auto named = named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (int64_t i = 0; i < parameter_count(shape_.blocks); ++i) {
    const std::string name = parameter_name(i);
    const torch::Tensor* value = named.find(name);
    TORCH_CHECK(value, "the encoder has no parameter ", name, " of its layout (model/parameter_layout.h)");
    out.emplace_back(name, *value);
  }
  // Every parameter outside the positional schemes is in the layout.
  size_t positional = 0;
  for (const auto& item : named)
    if (item.key().rfind("positional.", 0) == 0) ++positional;
  TORCH_CHECK(named.size() == out.size() + positional, "the encoder has parameters outside its layout (model/parameter_layout.h)");
  return out;
}

PositionalTables EncoderImpl::positional_tables(int64_t positions) { return table_maker_->make(positions); }

torch::Tensor EncoderImpl::causal_mask(int64_t T) const {
  auto ahead = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(device_)).triu(1);  // (T, T) j > i
  return causal_flags_ & ahead.view({1, 1, 1, T, T});                                                   // (M, 1, 1, T, T)
}

int64_t EncoderImpl::position_limit() const {
  int64_t limit = std::numeric_limits<int64_t>::max();
  for (const auto& scheme : schemes_) limit = std::min(limit, scheme->position_limit());
  return limit;
}

bool EncoderImpl::position_ids_vary() const {
  return std::any_of(position_ids_.begin(), position_ids_.end(),
                     [](const MemberPositionIds& ids) { return ids.kind != PositionIdKind::sequential; });
}

int64_t EncoderImpl::table_positions(int64_t T) const {
  int64_t P = T;
  for (const auto& ids : position_ids_) P = std::max(P, ids.range);
  return P;
}

namespace {
// The tokens as the position IDs read them: on the host where a member couples (its IDs
// read the tokens), else as they are (only their sizes are read).
torch::Tensor tokens_for_ids(const std::vector<MemberPositionIds>& members, const torch::Tensor& inputs) {
  const bool couples = std::any_of(members.begin(), members.end(),
                                   [](const MemberPositionIds& ids) { return ids.kind == PositionIdKind::coupled; });
  return couples && !inputs.device().is_cpu() ? inputs.cpu() : inputs;
}
}  // namespace

torch::Tensor EncoderImpl::training_positions(const torch::Tensor& inputs) {
  if (!position_ids_vary()) return {};
  return position_ids_training(position_ids_, position_steps_++, 0, tokens_for_ids(position_ids_, inputs), shape_.task())
      .to(device_);
}

torch::Tensor EncoderImpl::evaluation_positions(const torch::Tensor& inputs, int64_t first) const {
  if (!position_ids_vary()) return {};
  return position_ids_evaluation(position_ids_, first, tokens_for_ids(position_ids_, inputs), shape_.task(),
                                 evaluation_start_)
      .to(device_);
}

PositionalTables EncoderImpl::tables_at(const PositionalTables& tables, const torch::Tensor& positions) const {
  const int64_t M = member_count(), T = positions.size(2);
  TORCH_CHECK(positions.size(0) == M, "tables_at: positions for ", positions.size(0), " members, the model has ", M);
  PositionalTables out = tables;
  out.positions = T;
  out.per_example = true;
  const auto& hooks = hook_registry();
  for (size_t index = 0; index < hooks.size(); ++index)
    if (hooks[index]->reads_positions() && out.hooks[index].stacked.defined())
      out.hooks[index].stacked = hooks[index]->gather(tables.hooks[index].stacked, positions);  // (M, B, ...)
  return out;
}

void EncoderImpl::positional_backward(const PositionalTables& tables, const PositionalTables& table_grads) {
  table_maker_->backward(tables, table_grads);
}

void EncoderImpl::rope_rescaling_set(const RopeRescaling& rescaling) {
  for (const auto& scheme : schemes_) scheme->rescale_for_evaluation(rescaling);
  // Each rescaling's tables kept apart from the trained ones, which a captured step reads.
  table_maker_->variant_use(rescaling.active() ? rescaling.method + " x" + std::to_string(rescaling.factor) + " from " +
                                                     std::to_string(rescaling.trained_context)
                                               : std::string());
}

bool EncoderImpl::rotates(int64_t member) { return scheme(member).owner_of(rotation_hook()) != nullptr; }

std::vector<torch::Tensor> EncoderImpl::content_terms(const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  const bool was_training = is_training();
  eval();
  std::vector<torch::Tensor> terms;
  const int64_t T = tokens.size(2);
  // At the evaluation position IDs, as evaluation reads the tables.
  const torch::Tensor positions = evaluation_positions(tokens, 0);
  const PositionalTables tables =
      positions.defined() ? tables_at(positional_tables(table_positions(T)), positions) : positional_tables(T);
  forward(tokens, tables, nullptr, nullptr, &terms);
  if (was_training) train();
  return terms;
}

AttentionContext EncoderImpl::attention_context(const PositionalTables& tables, int64_t T) {
  AttentionContext context;
  context.tables = &tables;
  context.causal = &causal_;
  context.causal_flags = causal_flags_.view({member_count()});
  // The training context's mask is kept; another length (evaluation beyond it) gets its own.
  if (causal_mask_.defined()) context.mask = T == causal_mask_.size(-1) ? causal_mask_ : causal_mask(T);
  return context;
}

torch::Tensor EncoderImpl::forward(const torch::Tensor& tokens, const DropoutMasks* masks,
                                   std::vector<torch::Tensor>* attention_out, const torch::Tensor& positions) {
  const int64_t T = tokens.size(2);
  if (!positions.defined()) return forward(tokens, positional_tables(T), masks, attention_out);
  return forward(tokens, tables_at(positional_tables(table_positions(T)), positions), masks, attention_out);
}

torch::Tensor EncoderImpl::forward(const torch::Tensor& tokens, const PositionalTables& tables,
                                   const DropoutMasks* masks, std::vector<torch::Tensor>* attention_out,
                                   std::vector<torch::Tensor>* content_out) {
  const int64_t M = member_count(), B = tokens.size(1), T = tokens.size(2), D = shape_.embed;
  TORCH_CHECK(tokens.size(0) == M, "tokens carry ", tokens.size(0), " members, the model ", M);
  // Training runs at the model's context; evaluation may ask for any T every member's scheme
  // covers (the tables may span more positions, L under position IDs other than 0..T-1).
  TORCH_CHECK(T == shape_.context || (!masks && T <= position_limit()), "tokens carry ", T,
              " positions; the model trains at ", shape_.context, " and its positional tables cover at most ",
              position_limit());
  TORCH_CHECK(tables.positions == T, "positional tables for ", tables.positions, " positions, tokens of ", T);
  const AttentionContext context = attention_context(tables, T);
  // Member m's token t is row m * V + t of the stacked table (M * V, D).
  auto rows = (tokens + token_offsets_).reshape({-1});                                  // (M*B*T)
  SiteState embedding;
  embedding.per_example = tables.per_example;
  embedding.x = tok_emb.view({M * shape_.vocab, D}).index_select(0, rows).view({M, B, T, D});  // (M, B, T, D)
  site_apply(HookSite::embedding, tables, embedding);
  auto x = embedding.x;
  if (attention_out) attention_out->clear();
  const bool any_content = tables.of(content_hook()).any_used();
  if (content_out) content_out->clear();
  for (const auto& module : *blocks) {
    torch::Tensor weights, content;
    x = module->as<BlockImpl>()->forward(x, context, masks, attention_out ? &weights : nullptr,
                                         content_out && any_content ? &content : nullptr);
    if (attention_out) attention_out->push_back(weights);
    if (content_out && any_content) content_out->push_back(content);
  }
  return head->forward(ln_f->forward(x));  // (M, B, T, V)
}

DropoutMasks EncoderImpl::dropout_masks(int64_t batch, bool with_buffer) {
  DropoutLayout layout(shape_, batch);
  const int64_t per_member = layout.row();
  DropoutStream stream(dropout_keys_, dropout_steps_++, shape_.dropout);
  if (device_.is_cpu()) {
    if (!with_buffer) return DropoutMasks(torch::Tensor(), layout, std::move(stream));
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
    return DropoutMasks(std::move(buffer), layout, std::move(stream));
  }
  // Elsewhere the same stream on the device: the same masks as the CPU's, element for
  // element. Drawn before the stream moves into the result (a call's arguments may be
  // evaluated in any order: GCC moved the stream first, and the masks had no members).
  torch::Tensor buffer = dropout_stream_masks(stream, 0, per_member, device_);  // (M, S)
  return DropoutMasks(std::move(buffer), layout, std::move(stream));
}

torch::Tensor EncoderImpl::dropout_step_keys_at(const torch::Tensor& step) {
  if (!dropout_key_tensor_.defined()) {
    std::vector<int64_t> keys;
    for (uint64_t key : dropout_keys_) keys.push_back(static_cast<int64_t>(key));
    dropout_key_tensor_ = torch::tensor(keys, torch::kLong).to(device_);  // (M)
  }
  return dropout_step_keys(dropout_key_tensor_, step);  // (M)
}

DropoutMasks EncoderImpl::dropout_masks_at(int64_t batch, const torch::Tensor& step) {
  DropoutLayout layout(shape_, batch);
  // The stream's threshold and kept value (keys unused: they come from the device's step).
  const DropoutStream rates({}, 0, shape_.dropout);
  const auto step_keys = dropout_step_keys_at(step);  // (M)
  return DropoutMasks(dropout_stream_masks(step_keys, rates.threshold, rates.kept_value, 0, layout.row()), layout);  // (M, S)
}

torch::Tensor member_losses(const torch::Tensor& logits, const torch::Tensor& targets) {
  const int64_t M = logits.size(0);
  auto log_probs = torch::log_softmax(logits, -1);                                      // (M, B, T, V)
  auto expanded = targets.dim() == 3 ? targets : targets.unsqueeze(0).expand({M, targets.size(0), targets.size(1)});
  auto picked = log_probs.gather(-1, expanded.clamp_min(0).unsqueeze(-1)).squeeze(-1);  // (M, B, T)
  // A target out of the loss (kOutOfLoss) adds nothing; the mean stays over all B x T
  // positions, so that chunks of a batch still sum to the whole batch's loss.
  // Always masked (no host read of whether any is out: the device step captures this).
  picked = picked.masked_fill(expanded.lt(0), 0.0);  // (M, B, T)
  return -picked.reshape({M, -1}).mean(1);                                              // (M)
}

}  // namespace copytask
