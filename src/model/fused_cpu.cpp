#include "model/fused_cpu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "model/cpu_layers.h"

// The per-example functions are compiled twice, for x86-64-v3 (AVX2 and FMA) and for the
// generic target, and the loader picks one for the CPU it runs on; the layers of
// cpu_layers.h are inlined into each so they get the same instructions.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define COPYTASK_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define COPYTASK_CLONES
#endif

namespace copytask {
namespace {
using namespace cpu;

// ---- Parameters: one member's values and its flat gradient --------------------------------

// The stacked parameters in a fixed order; a member's gradient is one flat buffer, parameter
// j at offset[j], then the slots of the tables' gradients (MemberConstants).
enum Global : int { kTok, kLnfW, kLnfB, kHeadW, kHeadB, kFirstBlock };
enum PerBlock : int { kLn1W, kLn1B, kQkv, kProjW, kProjB, kLn2W, kLn2B, kFc1W, kFc1B, kFc2W, kFc2B, kPerBlock };

struct ParameterTable {
  std::vector<torch::Tensor> tensors;  // (M, ...) each
  std::vector<const float*> base;      // data of member 0
  std::vector<int64_t> per_member;     // elements per member
  std::vector<int64_t> offset;         // start in a member's flat gradient
  int64_t total = 0;                   // the parameters' floats per member

  explicit ParameterTable(EncoderImpl& model) {
    tensors = {model.tok_emb, model.ln_f->weight, model.ln_f->bias, model.head->weight, model.head->bias};
    for (const auto& module : *model.blocks) {
      auto block = module->as<BlockImpl>();
      for (const torch::Tensor& t :
           {block->ln1->weight, block->ln1->bias, block->attn->qkv->weight, block->attn->proj->weight,
            block->attn->proj->bias, block->ln2->weight, block->ln2->bias, block->ff->fc1->weight, block->ff->fc1->bias,
            block->ff->fc2->weight, block->ff->fc2->bias})
        tensors.push_back(t);
    }
    for (const auto& t : tensors) {
      TORCH_CHECK(t.is_contiguous(), "fused_cpu: parameters must be contiguous");
      base.push_back(t.data_ptr<float>());
      per_member.push_back(t.numel() / t.size(0));
      offset.push_back(total);
      total += per_member.back();
    }
  }
  const float* value(int j, int64_t m) const { return base[j] + m * per_member[j]; }
};

inline int block_index(int64_t block, int which) { return kFirstBlock + static_cast<int>(block) * kPerBlock + which; }

struct Shape {
  int64_t B, T, D, H, Dh, F, V, L;
};

// One member's constants for a step: its parameters, the transposed weights the backward
// reads, its positional tables, and where its tables' gradients go.
struct MemberConstants {
  std::vector<const float*> value;             // per parameter index
  std::vector<std::vector<float>> weight;      // per parameter index (weights only): (I, O) + slack
  std::vector<std::vector<float>> transposed;  // per parameter index (weights only): (O, I) + slack
  int64_t P = 0;                               // positions the tables cover (T, or L under randomized positions)
  const float* additive = nullptr;             // (P, D), or null
  bool rotates = false;
  std::vector<float> cos_table, sin_table;     // (P, Dh/2)
  const float* bias = nullptr;                 // (H, P, P), or null
  bool causal = false;
  const DropoutStream* stream = nullptr;       // this step's dropout masks, or null
  int64_t member = 0;                          // the member's index in the stream
  // Offsets of the tables' gradients in the member's flat gradient; -1 when not wanted.
  int64_t grad_additive = -1, grad_angles = -1, grad_bias = -1;
};

// The tables one example reads, and where its tables' gradients go: the member's own
// (positions 0..T-1), or this example's rows of them gathered into the workspace
// (randomized positions; their gradients are then scattered back, tables_scatter).
struct ExampleTables {
  const float *additive = nullptr, *cos = nullptr, *sin = nullptr, *bias = nullptr;  // (T, D), (T, Dh/2) x 2, (H, T, T)
  float *grad_additive = nullptr, *grad_angles = nullptr, *grad_bias = nullptr;      // the same shapes, or null
};

// Every activation of one example that the backward reads, per block, plus the final
// layer; and the scratch gradients. Sized once per partition, reused example by example.
class ExampleWorkspace {
 public:
  explicit ExampleWorkspace(const Shape& s) : s_(s) {
    const int64_t TD = s.T * s.D, TF = s.T * s.F, HTT = s.H * s.T * s.T;
    per_block_ = 8 * TD + 2 * s.T + HTT + 2 * TF + (HTT + 2 * TD + TF);
    data_.resize(s.L * per_block_ + 9 * TD + 3 * TD + 2 * s.T + s.T * s.V + 2 * TF + kSlack);
  }
  // Randomized positions: this example's rows of the tables, and their gradients.
  struct Gathered {
    std::vector<float> additive, cos, sin, bias, grad_additive, grad_angles, grad_bias;
  };
  Gathered& gathered() { return gathered_; }
  // Block l's activations and this example's dropout masks there.
  struct Block {
    float *normalized1, *rstd1, *attn_in, *qkv, *weights, *mixed, *normalized2, *rstd2, *ff_in, *pre_relu, *hidden;
    float* masks[kDropoutSites];
  };
  Block block(int64_t l) {
    const int64_t TD = s_.T * s_.D, TF = s_.T * s_.F;
    float* p = data_.data() + l * per_block_;
    Block b;
    b.normalized1 = p; p += TD;
    b.rstd1 = p; p += s_.T;
    b.attn_in = p; p += TD;
    b.qkv = p; p += 3 * TD;
    b.weights = p; p += s_.H * s_.T * s_.T;
    b.mixed = p; p += TD;
    b.normalized2 = p; p += TD;
    b.rstd2 = p; p += s_.T;
    b.ff_in = p; p += TD;
    b.pre_relu = p; p += TF;
    b.hidden = p; p += TF;
    b.masks[kAttentionWeights] = p; p += s_.H * s_.T * s_.T;
    b.masks[kAttentionOutput] = p; p += TD;
    b.masks[kHidden] = p; p += TF;
    b.masks[kFeedForwardOutput] = p;
    return b;
  }
  // The residual stream, the final layer's activations and the scratch gradients.
  struct Tail {
    float *x, *normalized_f, *final_in, *rstd_f, *logits, *grad_x, *grad_a, *grad_b, *grad_qkv, *grad_hidden, *grad_pre,
        *scratch;
  };
  Tail tail() {
    const int64_t TD = s_.T * s_.D, TF = s_.T * s_.F;
    float* p = data_.data() + s_.L * per_block_;
    Tail t;
    t.x = p; p += TD;                 // (T, D)
    t.normalized_f = p; p += TD;
    t.final_in = p; p += TD;
    t.rstd_f = p; p += s_.T;
    t.logits = p; p += s_.T * s_.V;   // (T, V), then d(loss)/d(logits)
    t.grad_x = p; p += TD;            // d(loss)/d(the residual stream)
    t.grad_a = p; p += TD;            // at a layer's output, then its input
    t.grad_b = p; p += TD;
    t.grad_qkv = p; p += 3 * TD;
    t.grad_hidden = p; p += TF;
    t.grad_pre = p; p += TF;
    t.scratch = p;                    // T floats (one attention row's d(weights)), and more slack
    return t;
  }

 private:
  Shape s_;
  int64_t per_block_;
  std::vector<float> data_;
  Gathered gathered_;
};

// The tables example b reads. Without positions, the member's own (its tables are for T
// positions). With positions (pos: T increasing indices into 0..P-1), its rows gathered
// into the workspace, and zeroed gradient buffers where the member wants the tables'.
COPYTASK_INLINE ExampleTables tables_for(const Shape& s, const MemberConstants& c, const int64_t* pos, float* grad,
                                         ExampleWorkspace& work) {
  ExampleTables e;
  const int64_t T = s.T, D = s.D, R = s.Dh / 2, P = c.P;
  if (!pos) {
    e.additive = c.additive;
    e.cos = c.cos_table.data();
    e.sin = c.sin_table.data();
    e.bias = c.bias;
    e.grad_additive = c.grad_additive >= 0 ? grad + c.grad_additive : nullptr;
    e.grad_angles = c.grad_angles >= 0 ? grad + c.grad_angles : nullptr;
    e.grad_bias = c.grad_bias >= 0 ? grad + c.grad_bias : nullptr;
    return e;
  }
  auto& g = work.gathered();
  if (c.additive) {
    g.additive.resize(T * D);
    for (int64_t t = 0; t < T; ++t) std::copy(c.additive + pos[t] * D, c.additive + (pos[t] + 1) * D, g.additive.data() + t * D);
    e.additive = g.additive.data();
  }
  if (c.rotates) {
    g.cos.resize(T * R);
    g.sin.resize(T * R);
    for (int64_t t = 0; t < T; ++t) {
      std::copy(c.cos_table.data() + pos[t] * R, c.cos_table.data() + (pos[t] + 1) * R, g.cos.data() + t * R);
      std::copy(c.sin_table.data() + pos[t] * R, c.sin_table.data() + (pos[t] + 1) * R, g.sin.data() + t * R);
    }
    e.cos = g.cos.data();
    e.sin = g.sin.data();
  }
  if (c.bias) {
    g.bias.resize(s.H * T * T);
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) g.bias[(h * T + i) * T + j] = c.bias[(h * P + pos[i]) * P + pos[j]];
    e.bias = g.bias.data();
  }
  auto zeroed = [](std::vector<float>& v, int64_t n) {
    v.assign(n, 0.0f);
    return v.data();
  };
  if (c.grad_additive >= 0) e.grad_additive = zeroed(g.grad_additive, T * D);
  if (c.grad_angles >= 0) e.grad_angles = zeroed(g.grad_angles, T * R);
  if (c.grad_bias >= 0) e.grad_bias = zeroed(g.grad_bias, s.H * T * T);
  return e;
}

// Adds one example's table gradients (at its positions) into the member's (P positions).
COPYTASK_INLINE void tables_scatter(const Shape& s, const MemberConstants& c, const int64_t* pos, const ExampleTables& e,
                                    float* grad) {
  const int64_t T = s.T, D = s.D, R = s.Dh / 2, P = c.P;
  if (e.grad_additive)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) grad[c.grad_additive + pos[t] * D + d] += e.grad_additive[t * D + d];
  if (e.grad_angles)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < R; ++r) grad[c.grad_angles + pos[t] * R + r] += e.grad_angles[t * R + r];
  if (e.grad_bias)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j)
          grad[c.grad_bias + (h * P + pos[i]) * P + pos[j]] += e.grad_bias[(h * T + i) * T + j];
}

// ---- One member's model, per example --------------------------------------------------------

// Example b's dropout masks, drawn from the stream where the whole batch's row holds them.
COPYTASK_INLINE void masks_draw(const Shape& s, const MemberConstants& c, const DropoutLayout& layout, int64_t b,
                                ExampleWorkspace& work) {
  for (int64_t l = 0; l < s.L; ++l) {
    auto a = work.block(l);
    for (int site = 0; site < kDropoutSites; ++site) {
      const auto which = static_cast<DropoutSite>(site);
      c.stream->fill(c.member, layout.start(l, which, b), layout.example_size(which), a.masks[site]);
    }
  }
}

// Block l's forward: x (T, D) in and out; keeps its activations in the workspace.
COPYTASK_INLINE void block_forward(const Shape& s, const MemberConstants& c, const ExampleTables& e, int64_t l,
                                   bool dropout, ExampleWorkspace& work, float* x, float* scratch) {
  const int64_t T = s.T, D = s.D, F = s.F, TD = T * D, TF = T * F;
  auto a = work.block(l);
  auto mask = [&](DropoutSite site) -> const float* { return dropout ? a.masks[site] : nullptr; };
  // x += dropout(proj(attention(ln1(x)))).
  layernorm_forward(x, c.value[block_index(l, kLn1W)], c.value[block_index(l, kLn1B)], a.normalized1, a.rstd1, a.attn_in,
                    T, D);
  linear_forward(a.attn_in, c.weight[block_index(l, kQkv)].data(), nullptr, a.qkv, T, D, 3 * D);  // (T, 3D): q | k | v
  if (c.rotates) {
    rotation_forward(a.qkv, 3 * D, e.cos, e.sin, T, s.H, s.Dh);      // q
    rotation_forward(a.qkv + D, 3 * D, e.cos, e.sin, T, s.H, s.Dh);  // k
  }
  attention_forward(a.qkv, e.bias, c.causal, mask(kAttentionWeights), a.weights, a.mixed, T, s.H, s.Dh);
  linear_forward(a.mixed, c.weight[block_index(l, kProjW)].data(), c.value[block_index(l, kProjB)], scratch, T, D, D);
  residual_forward(x, scratch, mask(kAttentionOutput), TD);
  // x += dropout(fc2(dropout(relu(fc1(ln2(x)))))).
  layernorm_forward(x, c.value[block_index(l, kLn2W)], c.value[block_index(l, kLn2B)], a.normalized2, a.rstd2, a.ff_in,
                    T, D);
  linear_forward(a.ff_in, c.weight[block_index(l, kFc1W)].data(), c.value[block_index(l, kFc1B)], a.pre_relu, T, D, F);
  relu_forward(a.pre_relu, mask(kHidden), a.hidden, TF);
  linear_forward(a.hidden, c.weight[block_index(l, kFc2W)].data(), c.value[block_index(l, kFc2B)], scratch, T, F, D);
  residual_forward(x, scratch, mask(kFeedForwardOutput), TD);
}

// Block l's backward: t.grad_x is d(loss)/d(the block's output) on entry, d(its input) on
// exit; parameter and table gradients accumulate into `grad`.
COPYTASK_INLINE void block_backward(const Shape& s, const MemberConstants& c, const ExampleTables& e,
                                    const std::vector<int64_t>& offset, int64_t l, bool dropout, ExampleWorkspace& work,
                                    float* grad) {
  const int64_t T = s.T, D = s.D, F = s.F, TD = T * D, TF = T * F;
  auto a = work.block(l);
  auto t = work.tail();
  auto mask = [&](DropoutSite site) -> const float* { return dropout ? a.masks[site] : nullptr; };
  auto grad_of = [&](int which) { return grad + offset[block_index(l, which)]; };
  auto transposed = [&](int which) { return c.transposed[block_index(l, which)].data(); };

  // Feed-forward: out = in + dropout(fc2(hidden)).
  residual_backward(t.grad_x, mask(kFeedForwardOutput), t.grad_a, TD);
  linear_backward(a.hidden, t.grad_a, transposed(kFc2W), grad_of(kFc2W), grad_of(kFc2B), t.grad_hidden, T, F, D);
  relu_backward(a.pre_relu, mask(kHidden), t.grad_hidden, t.grad_pre, TF);
  linear_backward(a.ff_in, t.grad_pre, transposed(kFc1W), grad_of(kFc1W), grad_of(kFc1B), t.grad_b, T, D, F);
  layernorm_backward(a.normalized2, a.rstd2, c.value[block_index(l, kLn2W)], t.grad_b, grad_of(kLn2W), grad_of(kLn2B),
                     t.grad_x, T, D);

  // Attention: out = in + dropout(proj(mixed)).
  residual_backward(t.grad_x, mask(kAttentionOutput), t.grad_a, TD);
  linear_backward(a.mixed, t.grad_a, transposed(kProjW), grad_of(kProjW), grad_of(kProjB), t.grad_b, T, D, D);
  attention_backward(a.qkv, a.weights, c.causal, mask(kAttentionWeights), t.grad_b, t.grad_qkv,
                     e.grad_bias, t.scratch, T, s.H, s.Dh);
  if (c.rotates) {
    rotation_backward(t.grad_qkv, a.qkv, 3 * D, e.cos, e.sin, e.grad_angles, T, s.H, s.Dh);
    rotation_backward(t.grad_qkv + D, a.qkv + D, 3 * D, e.cos, e.sin, e.grad_angles, T, s.H, s.Dh);
  }
  linear_backward(a.attn_in, t.grad_qkv, transposed(kQkv), grad_of(kQkv), nullptr, t.grad_b, T, D, 3 * D);
  layernorm_backward(a.normalized1, a.rstd1, c.value[block_index(l, kLn1W)], t.grad_b, grad_of(kLn1W), grad_of(kLn1B),
                     t.grad_x, T, D);
}

// The forward pass of one example up to its logits (the tail's logits, (T, V)).
COPYTASK_INLINE void example_forward(const Shape& s, const MemberConstants& c, const ExampleTables& e, const int64_t* tokens,
                                     int64_t token_stride, bool dropout, ExampleWorkspace& work) {
  auto t = work.tail();
  embedding_forward(c.value[kTok], e.additive, tokens, token_stride, t.x, s.T, s.D);
  for (int64_t l = 0; l < s.L; ++l) block_forward(s, c, e, l, dropout, work, t.x, t.grad_a);
  layernorm_forward(t.x, c.value[kLnfW], c.value[kLnfB], t.normalized_f, t.rstd_f, t.final_in, s.T, s.D);
  linear_forward(t.final_in, c.weight[kHeadW].data(), c.value[kHeadB], t.logits, s.T, s.D, s.V);
}

// Forward and backward of one example of one member; adds its parameter (and table)
// gradients to `grad` and returns its summed cross-entropy over the T positions.
COPYTASK_CLONES double example_forward_backward(const Shape& s, const MemberConstants& c,
                                                const std::vector<int64_t>& offset, const DropoutLayout& layout,
                                                const int64_t* tokens, int64_t token_stride, const int64_t* targets,
                                                int64_t target_stride, const int64_t* pos, int64_t b, float loss_weight,
                                                ExampleWorkspace& work, float* grad) {
  const bool dropout = c.stream != nullptr;
  if (dropout) masks_draw(s, c, layout, b, work);
  const ExampleTables e = tables_for(s, c, pos, grad, work);
  example_forward(s, c, e, tokens, token_stride, dropout, work);
  auto t = work.tail();
  const double loss = crossentropy_forward_backward(t.logits, targets, target_stride, loss_weight, s.T, s.V);

  // Head and final layer norm, then the blocks from the last, then the embedding.
  linear_backward(t.final_in, t.logits, c.transposed[kHeadW].data(), grad + offset[kHeadW], grad + offset[kHeadB],
                  t.grad_a, s.T, s.D, s.V);
  for (int64_t e = 0; e < s.T * s.D; ++e) t.grad_x[e] = 0.0f;
  layernorm_backward(t.normalized_f, t.rstd_f, c.value[kLnfW], t.grad_a, grad + offset[kLnfW], grad + offset[kLnfB],
                     t.grad_x, s.T, s.D);
  for (int64_t l = s.L - 1; l >= 0; --l) block_backward(s, c, e, offset, l, dropout, work, grad);
  embedding_backward(t.grad_x, tokens, token_stride, grad + offset[kTok], e.grad_additive, s.T, s.D);
  if (pos) tables_scatter(s, c, pos, e, grad);
  return loss;
}

// The forward pass of one example without dropout: its logits (T, V) to `logits`, and
// (when given) each block's attention weights (H, T, T) to weights[l].
COPYTASK_CLONES void example_forward_only(const Shape& s, const MemberConstants& c, const int64_t* tokens,
                                          int64_t token_stride, const int64_t* pos, ExampleWorkspace& work, float* logits,
                                          const std::vector<float*>& weights) {
  const ExampleTables e = tables_for(s, c, pos, nullptr, work);
  example_forward(s, c, e, tokens, token_stride, false, work);
  const float* out = work.tail().logits;
  std::copy(out, out + s.T * s.V, logits);
  for (size_t l = 0; l < weights.size(); ++l) {
    const float* w = work.block(static_cast<int64_t>(l)).weights;
    std::copy(w, w + s.H * s.T * s.T, weights[l]);
  }
}

// Partitions of a member's B examples: fixed by B alone (about 64 examples each, at most
// 16), so the summation order never depends on the threads or the members.
int64_t partition_count(int64_t batch) { return std::clamp<int64_t>(batch / 64, 1, 16); }

// Every member's constants. A member whose tables are learned (and table_grads wanted)
// also applies the tables of the hooks it does not use (zeros: adding, turning, biasing by
// nothing changes nothing), so that every table's gradient is there for it.
std::vector<MemberConstants> member_constants(EncoderImpl& model, const ParameterTable& parameters, const Shape& s,
                                              const PositionalTables& tables, bool table_grads,
                                              const DropoutMasks* masks, int64_t* flat_size) {
  const int64_t M = model.member_count();
  const std::vector<int> weights = [&] {
    std::vector<int> out{kHeadW};
    for (int64_t l = 0; l < s.L; ++l)
      for (int which : {kQkv, kProjW, kFc1W, kFc2W}) out.push_back(block_index(l, which));
    return out;
  }();
  const int64_t pairs = s.Dh / 2;
  // The tables' gradient slots follow the parameters in every member's flat gradient.
  const int64_t P = tables.positions;  // T, or L under randomized positions
  int64_t next = parameters.total;
  const int64_t additive_slot = tables.additive.defined() ? next : -1;
  next += tables.additive.defined() ? P * s.D : 0;
  const int64_t angles_slot = tables.angles.defined() ? next : -1;
  next += tables.angles.defined() ? P * pairs : 0;
  const int64_t bias_slot = tables.bias.defined() ? next : -1;
  next += tables.bias.defined() ? s.H * P * P : 0;
  *flat_size = table_grads ? next : parameters.total;

  std::vector<MemberConstants> constants(M);
  for (int64_t m = 0; m < M; ++m) {
    MemberConstants& c = constants[m];
    for (size_t j = 0; j < parameters.tensors.size(); ++j) c.value.push_back(parameters.value(static_cast<int>(j), m));
    c.weight.resize(parameters.tensors.size());
    c.transposed.resize(parameters.tensors.size());
    for (int j : weights) {
      const auto& w = parameters.tensors[j];  // (M, I, O)
      const int64_t I = w.size(1), O = w.size(2);
      const float* value = c.value[j];
      c.weight[j].assign(I * O + kSlack, 0.0f);
      std::copy(value, value + I * O, c.weight[j].begin());
      c.transposed[j].assign(I * O + kSlack, 0.0f);
      for (int64_t i = 0; i < I; ++i)
        for (int64_t o = 0; o < O; ++o) c.transposed[j][o * I + i] = value[i * O + o];
    }
    c.P = P;
    const bool wants = table_grads && tables.learned[m];
    const PositionalHook hook = tables.hooks[m];
    if (tables.additive.defined() && (hook == PositionalHook::additive || wants)) {
      c.additive = tables.additive.data_ptr<float>() + m * P * s.D;
      if (wants) c.grad_additive = additive_slot;
    }
    if (tables.angles.defined() && (hook == PositionalHook::rotation || wants)) {
      c.rotates = true;
      auto member_angles = tables.angles[m];  // (P, Dh/2)
      auto cos = member_angles.cos().contiguous(), sin = member_angles.sin().contiguous();
      c.cos_table.assign(cos.data_ptr<float>(), cos.data_ptr<float>() + cos.numel());
      c.sin_table.assign(sin.data_ptr<float>(), sin.data_ptr<float>() + sin.numel());
      if (wants) c.grad_angles = angles_slot;
    }
    if (tables.bias.defined() && (hook == PositionalHook::score_bias || wants)) {
      c.bias = tables.bias.data_ptr<float>() + m * s.H * P * P;
      if (wants) c.grad_bias = bias_slot;
    }
    c.causal = model.members()[m].causal;
    if (masks) c.stream = masks->stream();
    c.member = m;
  }
  return constants;
}

// The tables as float32 contiguous CPU tensors the kernel can point into.
PositionalTables plain_tables(const PositionalTables& tables) {
  PositionalTables out = tables;
  for (torch::Tensor* t : {&out.additive, &out.angles, &out.bias})
    if (t->defined()) *t = t->detach().to(torch::kFloat32).contiguous();
  return out;
}

}  // namespace

std::string fused_cpu_unsupported(const EncoderImpl& model) {
  if (!model.device().is_cpu()) return "the model is not on the CPU";
  if (model.tok_emb.scalar_type() != torch::kFloat32) return "the model is not float32";
  return "";
}

namespace {
// Checks positions against the inputs and the tables; returns them contiguous (or undefined).
torch::Tensor positions_checked(const torch::Tensor& positions, const torch::Tensor& inputs, int64_t table_positions,
                                const char* where) {
  if (!positions.defined()) {
    TORCH_CHECK(table_positions == inputs.size(2), where, ": tables for ", table_positions, " positions, inputs of ",
                inputs.size(2));
    return positions;
  }
  TORCH_CHECK(positions.sizes() == inputs.sizes() && positions.scalar_type() == torch::kLong, where,
              ": positions must be int64 with the inputs' shape (M, B, T)");
  auto out = positions.contiguous();
  TORCH_CHECK(out.numel() == 0 || out.max().item<int64_t>() < table_positions, where, ": a position beyond the tables' ",
              table_positions);
  return out;
}
}  // namespace

torch::Tensor fused_cpu_loss_backward(EncoderImpl& model, const PositionalTables& given_tables,
                                      const torch::Tensor& inputs, const torch::Tensor& targets,
                                      const DropoutMasks* masks, PositionalTables* table_grads,
                                      const torch::Tensor& given_positions) {
  const std::string why = fused_cpu_unsupported(model);
  TORCH_CHECK(why.empty(), "fused_cpu_loss_backward: ", why);
  const EncoderShape& shape = model.shape();
  const int64_t M = model.member_count();
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(0) == M, "fused_cpu: inputs (M, B, T)");
  TORCH_CHECK(targets.sizes() == inputs.sizes(), "fused_cpu: targets must have the inputs' shape");
  TORCH_CHECK(inputs.scalar_type() == torch::kLong && targets.scalar_type() == torch::kLong, "fused_cpu: int64 tokens");
  const Shape s{inputs.size(1), inputs.size(2), shape.embed,  shape.heads,
                shape.head_dim(), shape.hidden, shape.vocab, shape.blocks};
  const torch::Tensor positions = positions_checked(given_positions, inputs, given_tables.positions, "fused_cpu");
  const int64_t* position_data = positions.defined() ? positions.data_ptr<int64_t>() : nullptr;
  const DropoutLayout layout(shape, s.B);
  if (masks) {
    TORCH_CHECK(masks->whole_batch() && masks->layout().batch() == s.B, "fused_cpu: masks must be the whole batch's");
    TORCH_CHECK(masks->stream(), "fused_cpu: masks without a CPU stream");
  }

  ParameterTable parameters(model);
  const PositionalTables tables = plain_tables(given_tables);
  int64_t P = 0;  // floats of one member's flat gradient
  const std::vector<MemberConstants> constants =
      member_constants(model, parameters, s, tables, table_grads != nullptr, masks, &P);

  // Every (member, partition) task sums its examples' gradients into its own buffer.
  const int64_t K = partition_count(s.B);
  std::vector<float> partial(static_cast<size_t>(M * K * P + kSlack));  // slack: see matmul_rows
  std::vector<double> partial_loss(static_cast<size_t>(M * K), 0.0);
  const int64_t* input_data = inputs.data_ptr<int64_t>();
  const int64_t* target_data = targets.data_ptr<int64_t>();
  const float loss_weight = 1.0f / static_cast<float>(s.B * s.T);
  at::parallel_for(0, M * K, 1, [&](int64_t begin, int64_t end) {
    ExampleWorkspace work(s);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t m = task / K, k = task % K;
      float* grad = partial.data() + task * P;
      std::fill(grad, grad + P, 0.0f);
      const int64_t first = k * s.B / K, last = (k + 1) * s.B / K;
      double loss = 0;
      for (int64_t b = first; b < last; ++b) {
        const int64_t* tokens = input_data + m * inputs.stride(0) + b * inputs.stride(1);
        const int64_t* example_targets = target_data + m * targets.stride(0) + b * targets.stride(1);
        const int64_t* pos = position_data ? position_data + (m * s.B + b) * s.T : nullptr;
        loss += example_forward_backward(s, constants[m], parameters.offset, layout, tokens, inputs.stride(2),
                                         example_targets, targets.stride(2), pos, b, loss_weight, work, grad);
      }
      partial_loss[task] = loss;
    }
  });

  // Partitions added in order into each parameter's gradient (M, ...), and the tables'.
  auto sum_partitions = [&](int64_t m, int64_t start, int64_t n, float* out) {
    const float* first = partial.data() + (m * K) * P + start;
    std::copy(first, first + n, out);
    for (int64_t k = 1; k < K; ++k) {
      const float* part = partial.data() + (m * K + k) * P + start;
      for (int64_t e = 0; e < n; ++e) out[e] += part[e];
    }
  };
  std::vector<torch::Tensor> grads;
  for (const auto& t : parameters.tensors) grads.push_back(torch::empty_like(t));
  if (table_grads) {
    *table_grads = tables;
    for (torch::Tensor* t : {&table_grads->additive, &table_grads->angles, &table_grads->bias})
      if (t->defined()) *t = torch::zeros_like(*t);
  }
  at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      for (size_t j = 0; j < grads.size(); ++j) {
        const int64_t n = parameters.per_member[j];
        sum_partitions(m, parameters.offset[j], n, grads[j].data_ptr<float>() + m * n);
      }
      const MemberConstants& c = constants[m];
      const std::pair<int64_t, torch::Tensor*> slots[] = {{c.grad_additive, table_grads ? &table_grads->additive : nullptr},
                                                          {c.grad_angles, table_grads ? &table_grads->angles : nullptr},
                                                          {c.grad_bias, table_grads ? &table_grads->bias : nullptr}};
      for (const auto& [slot, table] : slots)
        if (slot >= 0) {
          const int64_t n = table->numel() / M;
          sum_partitions(m, slot, n, table->data_ptr<float>() + m * n);
        }
    }
  });
  for (size_t j = 0; j < grads.size(); ++j) parameters.tensors[j].mutable_grad() = grads[j];

  auto member_loss = torch::empty({M});  // (M)
  for (int64_t m = 0; m < M; ++m) {
    double total = 0;
    for (int64_t k = 0; k < K; ++k) total += partial_loss[m * K + k];
    member_loss[m] = total / static_cast<double>(s.B * s.T);
  }
  return member_loss;
}

torch::Tensor fused_cpu_forward(EncoderImpl& model, const PositionalTables& given_tables, const torch::Tensor& inputs,
                                std::vector<torch::Tensor>* attention_out, const torch::Tensor& given_positions) {
  const std::string why = fused_cpu_unsupported(model);
  TORCH_CHECK(why.empty(), "fused_cpu_forward: ", why);
  const EncoderShape& shape = model.shape();
  const int64_t M = model.member_count();
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(0) == M && inputs.scalar_type() == torch::kLong,
              "fused_cpu_forward: int64 inputs (M, N, T)");
  const Shape s{inputs.size(1), inputs.size(2), shape.embed,  shape.heads,
                shape.head_dim(), shape.hidden, shape.vocab, shape.blocks};
  const torch::Tensor positions = positions_checked(given_positions, inputs, given_tables.positions, "fused_cpu_forward");
  const int64_t* position_data = positions.defined() ? positions.data_ptr<int64_t>() : nullptr;
  ParameterTable parameters(model);
  const PositionalTables tables = plain_tables(given_tables);
  int64_t P = 0;
  const std::vector<MemberConstants> constants = member_constants(model, parameters, s, tables, false, nullptr, &P);

  auto logits = torch::empty({M, s.B, s.T, s.V});  // (M, N, T, V)
  if (attention_out) {
    attention_out->clear();
    for (int64_t l = 0; l < s.L; ++l) attention_out->push_back(torch::empty({M, s.B, s.H, s.T, s.T}));
  }
  const int64_t* input_data = inputs.data_ptr<int64_t>();
  float* logits_data = logits.data_ptr<float>();
  at::parallel_for(0, M * s.B, 16, [&](int64_t begin, int64_t end) {
    ExampleWorkspace work(s);
    std::vector<float*> weights(attention_out ? s.L : 0);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t m = task / s.B, b = task % s.B;
      for (size_t l = 0; l < weights.size(); ++l)
        weights[l] = (*attention_out)[l].data_ptr<float>() + task * s.H * s.T * s.T;
      const int64_t* tokens = input_data + m * inputs.stride(0) + b * inputs.stride(1);
      const int64_t* pos = position_data ? position_data + task * s.T : nullptr;  // task = m * B + b
      example_forward_only(s, constants[m], tokens, inputs.stride(2), pos, work, logits_data + task * s.T * s.V, weights);
    }
  });
  return logits;
}

}  // namespace copytask
