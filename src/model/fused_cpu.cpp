#include "model/fused_cpu.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "model/cpu_attention_lanes.h"
#include "model/cpu_lanes_layers.h"
#include "model/cpu_layers.h"
#include "model/float_layout.h"
#include "model/hooks/cpu_hook.h"
#include "model/hooks/registry.h"
#include "model/parameter_layout.h"

// The group's and the example's functions are compiled three times (on_cpu_variant, model/cpu_layers.h),
// for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 and FMA) and the generic target, and
// cpu_variant_active() picks one (model/cpu_variant.h); the layers of cpu_layers.h are
// inlined into each so they get the same instructions. The positional hooks' kernels are
// compiled the same way in their own files.

namespace copytask {
namespace {
using namespace cpu;

// ---- Parameters: one member's values and its flat gradient --------------------------------

// The stacked parameters in the encoder's layout (model/parameter_layout.h): the globals,
// then block by block. A member's gradient is one flat buffer, parameter j at offset[j],
// then the slots of the tables' gradients (MemberConstants).
constexpr int kTok = parameter_position(kGlobalParameterNames, "tok_emb");
constexpr int kLnfW = parameter_position(kGlobalParameterNames, "ln_f.weight");
constexpr int kLnfB = parameter_position(kGlobalParameterNames, "ln_f.bias");
constexpr int kHeadW = parameter_position(kGlobalParameterNames, "head.weight");
constexpr int kHeadB = parameter_position(kGlobalParameterNames, "head.bias");
constexpr int kFirstBlock = static_cast<int>(kGlobalParameterNames.size());
// Where a group runs across the lanes, every parameter from the final layer norm on (it, the
// head, the blocks: the layout's last) has its gradient summed a lane apart (LanesGradient);
// the token embedding's stays in rows.
constexpr int kFirstInLanes = kLnfW;
static_assert(kLnfB == kLnfW + 1 && kHeadW == kLnfW + 2 && kHeadB == kLnfW + 3 && kFirstBlock == kLnfW + 4,
              "the parameters summed a lane apart must be the layout's last");
constexpr int kLn1W = parameter_position(kBlockParameterNames, "ln1.weight");
constexpr int kLn1B = parameter_position(kBlockParameterNames, "ln1.bias");
constexpr int kQkv = parameter_position(kBlockParameterNames, "attn.qkv.weight");
constexpr int kProjW = parameter_position(kBlockParameterNames, "attn.proj.weight");
constexpr int kProjB = parameter_position(kBlockParameterNames, "attn.proj.bias");
constexpr int kLn2W = parameter_position(kBlockParameterNames, "ln2.weight");
constexpr int kLn2B = parameter_position(kBlockParameterNames, "ln2.bias");
constexpr int kFc1W = parameter_position(kBlockParameterNames, "ff.fc1.weight");
constexpr int kFc1B = parameter_position(kBlockParameterNames, "ff.fc1.bias");
constexpr int kFc2W = parameter_position(kBlockParameterNames, "ff.fc2.weight");
constexpr int kFc2B = parameter_position(kBlockParameterNames, "ff.fc2.bias");
constexpr int kPerBlock = static_cast<int>(kBlockParameterNames.size());

struct ParameterTable {
  std::vector<torch::Tensor> tensors;  // (M, ...) each
  std::vector<const float*> base;      // data of member 0
  std::vector<int64_t> per_member;     // elements per member
  std::vector<int64_t> offset;         // start in a member's flat gradient
  int64_t total = 0;                   // the parameters' floats per member

  explicit ParameterTable(EncoderImpl& model) {
    for (const auto& [name, tensor] : model.stacked_parameters()) tensors.push_back(tensor);
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

// One member's constants for a step: its parameters, the transposed weights the backward
// reads, its positional hooks' kernels (model/hooks/cpu_hook.h) sorted by site, and where
// each hook's workspace and table gradient are.
struct MemberConstants {
  std::vector<const float*> value;             // per parameter index
  std::vector<std::vector<float>> weight;      // per parameter index (weights only): (I, O) + slack
  std::vector<std::vector<float>> transposed;  // per parameter index (weights only): (O, I) + slack
  bool causal = false;
  Activation activation = Activation::relu;    // the feed-forward's (model.activation)
  const DropoutStream* stream = nullptr;       // this step's dropout masks, or null
  int64_t member = 0;                          // the member's index in the stream
  // The member's hooks, in the registry's order, and for each: where its floats start in
  // the example's hook workspace, and its table gradient's slot in the flat gradient (-1:
  // none wanted).
  std::vector<std::unique_ptr<CpuHook>> hooks;
  std::vector<int64_t> work_offset, grad_slot;
  // Indices into hooks, by site; the score bias hook (at most one), or -1.
  std::vector<int> embedding, query_key, scores, softmax;
  int bias = -1;
  bool staged = false;                         // a hook needs the attention in stages
  bool replaces_scores = false;                // a hook's score replaces q.k / sqrt(Dh) (staged too)
  bool query_key_lanes = false;                // one query_key hook, with a form across the lanes
};

// Floats from a cache line's start (64 bytes): out of the lanes, the examples' rows are
// stored in vectors (cpu_attention_lanes.h, from_lanes), and a vector store across two lines
// cost twice the rest of the transposition.
class LineAlignedFloats {
 public:
  void resize(int64_t n) {
    storage_.assign(static_cast<size_t>(n + 16), 0.0f);
    const auto address = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + (64 - address % 64) % 64 / sizeof(float);
  }
  float* data() { return data_; }

 private:
  std::vector<float> storage_;
  float* data_ = nullptr;
};

// Every activation of a group of up to G examples that the backward reads, per block, plus
// the final layer; the scratch gradients; the positional hooks' workspace; and for members
// whose attention runs in stages, its scores and gradients, and the q | k snapshots between
// query_key hooks. Every part holds G examples' floats one after another, so a part of rows
// is G T rows; block(l, g), tail(g) and the rest point at example g's. Sized once per
// partition, reused group by group.
class GroupWorkspace {
 public:
  // The parts of one block's activations, and of the tail after the blocks, in their order.
  enum BlockPart {
    kBlockNormalized1, kBlockRstd1, kBlockAttnIn, kBlockQkv, kBlockWeights, kBlockMixed, kBlockNormalized2, kBlockRstd2, kBlockFfIn, kBlockPreActivation, kBlockHidden,
    kBlockWeightsMask, kBlockAttentionOutputMask, kBlockHiddenMask, kBlockFeedForwardOutputMask, kBlockParts
  };
  enum TailPart {
    kTailX, kTailNormalizedF, kTailFinalIn, kTailRstdF, kTailLogits, kTailGradX, kTailGradA, kTailGradB, kTailGradQkv, kTailGradHidden, kTailGradPre, kTailScratch,
    kTailSlack, kTailParts
  };

  GroupWorkspace(const Shape& s, int64_t group, int64_t hook_floats, bool staged, int64_t snapshots)
      : s_(s), group_(group) {
    const int64_t TD = s.T * s.D, TF = s.T * s.F, HTT = s.H * s.T * s.T;
    std::vector<FloatLayout::Part> block(kBlockParts), tail(kTailParts);
    block[kBlockNormalized1] = {"normalized1", TD};
    block[kBlockRstd1] = {"rstd1", s.T};
    block[kBlockAttnIn] = {"attn_in", TD};
    block[kBlockQkv] = {"qkv", 3 * TD};
    block[kBlockWeights] = {"attention weights, key-major", HTT};
    block[kBlockMixed] = {"mixed", TD};
    block[kBlockNormalized2] = {"normalized2", TD};
    block[kBlockRstd2] = {"rstd2", s.T};
    block[kBlockFfIn] = {"ff_in", TD};
    block[kBlockPreActivation] = {"pre_activation", TF};
    block[kBlockHidden] = {"hidden", TF};
    block[kBlockWeightsMask] = {"dropout mask of the attention weights, key-major", HTT};
    block[kBlockAttentionOutputMask] = {"dropout mask of the attention output", TD};
    block[kBlockHiddenMask] = {"dropout mask of the hidden layer", TF};
    block[kBlockFeedForwardOutputMask] = {"dropout mask of the feed-forward output", TD};
    tail[kTailX] = {"x, the residual stream", TD};
    tail[kTailNormalizedF] = {"normalized_f", TD};
    tail[kTailFinalIn] = {"final_in", TD};
    tail[kTailRstdF] = {"rstd_f", s.T};
    tail[kTailLogits] = {"logits, then d(loss)/d(logits)", s.T * s.V};
    tail[kTailGradX] = {"grad_x", TD};
    tail[kTailGradA] = {"grad_a", TD};
    tail[kTailGradB] = {"grad_b", TD};
    tail[kTailGradQkv] = {"grad_qkv", 3 * TD};
    tail[kTailGradHidden] = {"grad_hidden", TF};
    tail[kTailGradPre] = {"grad_pre", TF};
    // Used by one layer at a time: the attention's, a layer norm's backward or the loss's (T);
    // room for all three, so a layer's use never reaches past it.
    tail[kTailScratch] = {"scratch", attention_scratch_floats(s.T, s.Dh) + layernorm_backward_scratch_floats(s.D) + s.T};
    // A buffer that must be followed by kSlack readable floats (qkv, grad_mixed) is followed
    // by the next part (or the next example's); the last one by these.
    tail[kTailSlack] = {"slack", kSlack};
    // Each part above is one example's: G of them (the slack once, at the end).
    for (auto& part : block) part.floats *= group;
    for (int i = 0; i < kTailSlack; ++i) tail[i].floats *= group;
    block_layout_ = FloatLayout(std::move(block));
    tail_layout_ = FloatLayout(std::move(tail));
    // Each part's start and one example's floats, looked up once here: block() and tail()
    // are called example by example in every layer (a division and two checked lookups a
    // part had been 2 to 3% of the step).
    for (int i = 0; i < kBlockParts; ++i) {
      block_offset_[i] = block_layout_.offset(i);
      block_example_floats_[i] = block_layout_.part(i).floats / group;
    }
    for (int i = 0; i < kTailParts; ++i) {
      tail_offset_[i] = tail_layout_.offset(i);
      tail_example_floats_[i] = tail_layout_.part(i).floats / group;
    }
    data_.resize(s.L * block_layout_.total() + tail_layout_.total());
    hook_floats_ = hook_floats;
    hooks_.resize(static_cast<size_t>(group * hook_floats));
    staged_floats_ = staged ? (s.L + 2) * HTT + TD : 0;
    staged_.resize(static_cast<size_t>(group * staged_floats_));
    snapshot_floats_ = s.L * snapshots * 3 * TD;
    snapshots_.resize(static_cast<size_t>(group * snapshot_floats_));
    if (lanes()) {
      const int64_t L = kExampleLanes;
      // q | k | v block by block: the forward's, read again by the backward.
      std::vector<FloatLayout::Part> parts{{"q | k | v across the lanes, every block's", s.L * L * 3 * TD},
                                           {"the gradient at mixed across the lanes", L * TD},
                                           {"grad_qkv across the lanes", L * 3 * TD},
                                           {"score bias or a weights mask across the lanes", L * HTT},
                                           {"gradient at the logits across the lanes", L * HTT},
                                           {"attention scratch across the lanes", attention_lanes_scratch_floats(s.T)},
                                           // The examples' rows out of the lanes: the residual stream and its
                                           // gradient at the ends, the masks on their way into the lanes.
                                           {"rows out of the lanes", L * std::max({3 * TD, TF, HTT})}};
      lanes_layout_ = FloatLayout(std::move(parts));
      lanes_data_.resize(lanes_layout_.total());
    }
  }
  // Whether the group can take its examples across the lanes (cpu_lanes_layers.h): a group of
  // exactly that many. Where the step runs in lanes (group_in_lanes), the parts of block() and
  // tail() that the blocks' layers use hold the group's floats in the lanes layout.
  bool lanes() const { return group_ == kExampleLanes; }
  // The buffers of the step across the lanes (lanes() only): block l's q | k | v, the others
  // shared by the blocks; in lanes layout but the rows.
  struct Lanes {
    float *qkv, *grad_mixed, *grad_qkv, *bias, *grad_logits, *scratch, *rows;
  };
  Lanes lanes_buffers(int64_t l = 0) {
    if (!lanes()) throw std::logic_error("GroupWorkspace: no lanes buffers in a group of " + std::to_string(group_));
    block_check(l);
    float* p = lanes_data_.data();
    return {p + lanes_layout_.offset(0) + l * kExampleLanes * 3 * s_.T * s_.D,
            p + lanes_layout_.offset(1), p + lanes_layout_.offset(2), p + lanes_layout_.offset(3),
            p + lanes_layout_.offset(4), p + lanes_layout_.offset(5), p + lanes_layout_.offset(6)};
  }
  // Block l's activations and its dropout masks, from example g's.
  struct Block {
    float *normalized1, *rstd1, *attn_in, *qkv, *weights, *mixed, *normalized2, *rstd2, *ff_in, *pre_activation, *hidden;
    float* masks[kDropoutSites];
  };
  Block block(int64_t l, int64_t g = 0) {
    block_check(l);
    example_check(g);
    float* p = data_.data() + l * block_layout_.total();
    auto at = [&](BlockPart part) { return p + block_offset_[part] + g * block_example_floats_[part]; };
    Block b;
    b.normalized1 = at(kBlockNormalized1);
    b.rstd1 = at(kBlockRstd1);
    b.attn_in = at(kBlockAttnIn);
    b.qkv = at(kBlockQkv);
    b.weights = at(kBlockWeights);
    b.mixed = at(kBlockMixed);
    b.normalized2 = at(kBlockNormalized2);
    b.rstd2 = at(kBlockRstd2);
    b.ff_in = at(kBlockFfIn);
    b.pre_activation = at(kBlockPreActivation);
    b.hidden = at(kBlockHidden);
    b.masks[kAttentionWeights] = at(kBlockWeightsMask);
    b.masks[kAttentionOutput] = at(kBlockAttentionOutputMask);
    b.masks[copytask::kHidden] = at(kBlockHiddenMask);
    b.masks[kFeedForwardOutput] = at(kBlockFeedForwardOutputMask);
    return b;
  }
  // The residual stream, the final layer's activations and the scratch gradients, from
  // example g's.
  struct Tail {
    float *x, *normalized_f, *final_in, *rstd_f, *logits, *grad_x, *grad_a, *grad_b, *grad_qkv, *grad_hidden, *grad_pre,
        *scratch;
  };
  Tail tail(int64_t g = 0) {
    example_check(g);
    float* p = data_.data() + s_.L * block_layout_.total();
    auto at = [&](TailPart part) { return p + tail_offset_[part] + g * tail_example_floats_[part]; };
    return {at(kTailX),     at(kTailNormalizedF), at(kTailFinalIn), at(kTailRstdF),      at(kTailLogits),  at(kTailGradX),
            at(kTailGradA), at(kTailGradB),       at(kTailGradQkv), at(kTailGradHidden), at(kTailGradPre), at(kTailScratch)};
  }
  // Example g's floats of the positional hooks.
  float* hooks(int64_t g) {
    example_check(g);
    return hooks_.data() + g * hook_floats_;
  }
  // Staged attention, example g's: block l's scores (H, T, T); the gradient at the logits
  // and at the scores (H, T, T) each; the gradient at the attention's input from the hooks
  // (T, D).
  struct Staged {
    float *scores, *grad_logits, *grad_scores, *grad_input;
  };
  Staged staged(int64_t l, int64_t g) {
    example_check(g);
    const int64_t HTT = s_.H * s_.T * s_.T;
    float* p = staged_.data() + g * staged_floats_;
    return {p + l * HTT, p + s_.L * HTT, p + (s_.L + 1) * HTT, p + (s_.L + 2) * HTT};
  }
  // Example g's q | k | v (T, 3D) of block l after its query_key hook k (all but the last).
  float* snapshot(int64_t l, int64_t k, int64_t per_block, int64_t g) {
    example_check(g);
    return snapshots_.data() + g * snapshot_floats_ + (l * per_block + k) * 3 * s_.T * s_.D;
  }

 private:
  void block_check(int64_t l) const {
    if (l < 0 || l >= s_.L) throw std::logic_error("GroupWorkspace: block " + std::to_string(l) + " of " + std::to_string(s_.L));
  }
  void example_check(int64_t g) const {
    if (g < 0 || g >= group_)
      throw std::logic_error("GroupWorkspace: example " + std::to_string(g) + " of a group of " + std::to_string(group_));
  }
  Shape s_;
  int64_t group_;
  FloatLayout block_layout_, tail_layout_;  // the blocks' parts, then the tail's: data_
  std::array<int64_t, kBlockParts> block_offset_{}, block_example_floats_{};
  std::array<int64_t, kTailParts> tail_offset_{}, tail_example_floats_{};
  FloatLayout lanes_layout_;  // lanes_buffers()
  LineAlignedFloats data_, lanes_data_;
  std::vector<float> hooks_, staged_, snapshots_;
  int64_t hook_floats_ = 0, staged_floats_ = 0, snapshot_floats_ = 0;  // one example's
};

// An example's view of each of the member's hooks: its positions, its workspace, its
// table gradient (null without one, or in a forward pass).
// One slot per registered hook (kHookCount), the most a member can have.
using HookExamples = std::array<HookExample, kHookCount>;
COPYTASK_INLINE void hook_examples_begin(const MemberConstants& c, const int64_t* pos, float* grad, float* work,
                                         HookExamples& out) {
  for (size_t k = 0; k < c.hooks.size(); ++k) {
    HookExample& e = out[k];
    e.positions = pos;
    e.causal = c.causal;
    e.work = work + c.work_offset[k];
    e.grad = grad && c.grad_slot[k] >= 0 ? grad + c.grad_slot[k] : nullptr;
    c.hooks[k]->example_begin(e);
  }
}

// ---- One member's model, a group of examples ------------------------------------------------

// A group of n <= G consecutive examples of one member: their tokens, targets and position
// IDs (the tokens' and targets' rows strided as the inputs'), and each one's hooks' view.
struct Group {
  int64_t n = 0, first = 0;  // examples first .. first + n - 1 of the batch
  const int64_t* tokens = nullptr;
  int64_t token_example = 0, token_stride = 0;    // between examples, between positions
  const int64_t* targets = nullptr;
  int64_t target_example = 0, target_stride = 0;
  const int64_t* positions = nullptr;             // (n, T), or null
  std::vector<HookExamples> hooks;                // one per example of the group
  const int64_t* tokens_of(int64_t g) const { return tokens + g * token_example; }
  const int64_t* targets_of(int64_t g) const { return targets + g * target_example; }
  const int64_t* positions_of(int64_t g, int64_t T) const { return positions ? positions + g * T : nullptr; }
};

// Whether a member's step takes the group across the lanes (cpu_lanes_layers.h,
// cpu_attention_lanes.h): a group of that many, and no hook at the scores or the softmax
// (those run the attention in stages, example by example, and the member the whole step in
// rows).
inline bool group_in_lanes(const MemberConstants& c, const GroupWorkspace& work) { return work.lanes() && !c.staged; }

// Example g's query_key hooks on its q | k | v rows (T, 3D) of block l, in order. Each hook's
// backward reads the values it made: kept where a later hook changes them.
COPYTASK_INLINE void query_key_forward(const MemberConstants& c, const HookExamples& e, int64_t l, int64_t g,
                                       float* qkv, GroupWorkspace& work, int64_t TD) {
  const int64_t snapshots = static_cast<int64_t>(c.query_key.size()) - 1;
  for (size_t k = 0; k < c.query_key.size(); ++k) {
    c.hooks[c.query_key[k]]->query_key_forward(e[c.query_key[k]], l, qkv);
    if (static_cast<int64_t>(k) < snapshots)
      std::copy(qkv, qkv + 3 * TD, work.snapshot(l, static_cast<int64_t>(k), snapshots, g));
  }
}

// Their backward, from the last: grad_qkv (T, 3D), example g's, through each hook, which reads
// what it made (its snapshot, or for the last the block's q | k | v rows).
COPYTASK_INLINE void query_key_backward(const MemberConstants& c, const HookExamples& e, int64_t l, int64_t g,
                                        float* grad_qkv, GroupWorkspace& work) {
  const int64_t snapshots = static_cast<int64_t>(c.query_key.size()) - 1;
  for (int64_t k = snapshots; k >= 0; --k) {
    const float* made = k < snapshots ? work.snapshot(l, k, snapshots, g) : work.block(l, g).qkv;
    c.hooks[c.query_key[k]]->query_key_backward(e[c.query_key[k]], l, grad_qkv, made);
  }
}

// Whether every example's masks at every site start at a word of the stream (four masks a
// word): each site's size a multiple of 4, so its start and every example's within it are.
inline bool masks_in_whole_words(const DropoutLayout& layout) {
  for (int site = 0; site < kDropoutSites; ++site)
    if (layout.example_size(static_cast<DropoutSite>(site)) % 4 != 0) return false;
  return true;
}

// Where the lanes keep the stream's elements of an example's site, in the elements' order:
// the same place, or for the attention weights (drawn query-major, (H, T queries, T keys)),
// their place key-major, as the weights are kept.
struct SamePlace {
  int64_t next = 0;
  int64_t operator()() { return next++; }
};
struct KeyMajorPlace {
  int64_t T, h = 0, i = 0, j = 0;  // the next element: head h, query i, key j
  int64_t operator()() {
    const int64_t place = (h * T + j) * T + i;
    if (++j == T) {
      j = 0;
      if (++i == T) i = 0, ++h;
    }
    return place;
  }
};

// The group's dropout masks straight into the lanes, where the step takes the group across
// them and every example's masks are whole words of the stream (DropoutStream::fill_lanes):
// the masks masks_draw's rows would give after their transposition, with none.
COPYTASK_INLINE void masks_draw_lanes(const Shape& s, const MemberConstants& c, const DropoutLayout& layout,
                                      const Group& group, GroupWorkspace& work) {
  for (int64_t l = 0; l < s.L; ++l)
    for (int site = 0; site < kDropoutSites; ++site) {
      const auto which = static_cast<DropoutSite>(site);
      uint64_t first_word[kExampleLanes];
      for (int64_t g = 0; g < kExampleLanes; ++g)  // a partial group's last example again past it (never read)
        first_word[g] = static_cast<uint64_t>(layout.start(l, which, group.first + std::min(g, group.n - 1))) / 4;
      const int64_t words = layout.example_size(which) / 4;
      float* masks = work.block(l).masks[site];
      if (which == kAttentionWeights) {
        KeyMajorPlace place{s.T};
        c.stream->fill_lanes(c.member, first_word, words, place, masks);
      } else {
        SamePlace place;
        c.stream->fill_lanes(c.member, first_word, words, place, masks);
      }
    }
}

// The masks a variant's register holds (DropoutStream::fill): its width, 16 with AVX-512 and
// 8 with AVX2; 0 (word by word) for the generic target, whose 8-wide vectors are two SSE
// registers.
template <class Lanes>
inline constexpr int kDropoutMaskLanes = Lanes::kVariant == CpuVariant::generic ? 0 : Lanes::kWidth;

// The group's dropout masks, drawn from the stream where the whole batch's row holds them
// (eight words at a time in vectors where the variant has AVX2 or AVX-512). The stream
// orders the attention weights' mask query-major, as every step draws it; it is kept
// key-major, as the weights are (cpu_layers.h, Attention).
template <class Lanes>
COPYTASK_INLINE void masks_draw(const Shape& s, const MemberConstants& c, const DropoutLayout& layout, const Group& group,
                                GroupWorkspace& work) {
  // With AVX-512 only: on AVX2 the 64-bit words' narrowing to the masks' 32-bit lanes takes
  // shuffles, and the draw in lanes measured 4% slower a step than the rows' and their
  // transposition (docs/performance.md).
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v4)
    if (group_in_lanes(c, work) && masks_in_whole_words(layout)) return masks_draw_lanes(s, c, layout, group, work);
  for (int64_t g = 0; g < group.n; ++g)
    for (int64_t l = 0; l < s.L; ++l) {
      auto a = work.block(l, g);
      for (int site = 0; site < kDropoutSites; ++site) {
        const auto which = static_cast<DropoutSite>(site);
        c.stream->fill<kDropoutMaskLanes<Lanes>>(c.member, layout.start(l, which, group.first + g),
                                                 layout.example_size(which), a.masks[site]);
      }
      for (int64_t h = 0; h < s.H; ++h) square_transpose(a.masks[kAttentionWeights] + h * s.T * s.T, s.T);
    }
  // Where the step takes the group across the lanes (and an example's masks are not whole
  // words of the stream: masks_draw_lanes), its masks are read there: each site's, the
  // examples' one after another, turned into lanes in place.
  if (group_in_lanes(c, work)) {
    float* lanes = work.lanes_buffers().rows;  // free until the forward
    for (int64_t l = 0; l < s.L; ++l)
      for (int site = 0; site < kDropoutSites; ++site) {
        const int64_t n = layout.example_size(static_cast<DropoutSite>(site));
        float* masks = work.block(l).masks[site];
        to_lanes<Lanes>(masks, n, group.n, n, lanes);
        std::copy(lanes, lanes + n * kExampleLanes, masks);
      }
  }
}

// The gradients of a member's partition of the parameters from the final layer norm on
// (kFirstInLanes), summed a lane apart (cpu_lanes_layers.h: each lane its examples' terms in
// order): element e of parameter j at data[16 (offset[j] - offset[kFirstInLanes] + e) +
// lane]. Added across the lanes, in the lanes' order, into the partition's flat gradient at
// its end (lanes_gradient_add).
struct LanesGradient {
  float* data = nullptr;
  const std::vector<int64_t>* offset = nullptr;  // ParameterTable::offset
  float* of(int j) const { return data + kExampleLanes * ((*offset)[j] - (*offset)[kFirstInLanes]); }
};

// ---- One member's model, a group of 16 examples across the lanes ----------------------------
// The layers of cpu_lanes_layers.h and cpu_attention_lanes.h, the blocks' activations and
// their gradients in the lanes layout, in the parts of block() and tail() (G = 16: a part's
// floats are as many as the lanes'). A member's one query_key hook with a form across the
// lanes (the rotation) runs there; other query_key hooks act on the examples' rows (the block's
// qkv part and the tail's grad_qkv). The final layer norm, the head and the loss run in lanes
// too (the tail's parts); in rows only the embedding and its hooks, the residual stream
// transposed into the lanes before the first block and its gradient out of them after it.

// The group's examples' views of the member's query_key hook, where it runs across the lanes
// (MemberConstants::query_key_lanes).
inline std::array<const HookExample*, kExampleLanes> query_key_views(const MemberConstants& c, const Group& group) {
  std::array<const HookExample*, kExampleLanes> views{};
  if (c.query_key_lanes)
    for (int64_t g = 0; g < group.n; ++g) views[g] = &group.hooks[g][c.query_key[0]];
  return views;
}

// Block l's attention of the group in lanes: the examples' q | k | v (after their query_key
// hooks) in the block's lanes buffer, the score biases into lanes, the attention; the
// mixed values (the block's mixed) and the weights (the block's weights) in lanes, where the
// backward reads them.
template <class Lanes>
COPYTASK_INLINE void attention_forward_lanes_group(const Shape& s, const MemberConstants& c, const Group& group,
                                                   int64_t l, bool dropout, GroupWorkspace& work) {
  const int64_t T = s.T, TD = s.T * s.D, n = group.n;
  auto a = work.block(l);
  const auto x = work.lanes_buffers(l);
  const auto views = query_key_views(c, group);
  if (c.query_key_lanes) {
    c.hooks[c.query_key[0]]->query_key_forward_lanes(HookLanes{views.data(), n}, l, x.qkv);
  } else if (!c.query_key.empty()) {
    // The hooks act on each example's rows: out of the lanes and back.
    from_lanes<Lanes>(x.qkv, 3 * TD, n, a.qkv, 3 * TD);
    for (int64_t g = 0; g < n; ++g) query_key_forward(c, group.hooks[g], l, g, work.block(l, g).qkv, work, TD);
    to_lanes<Lanes>(a.qkv, 3 * TD, n, 3 * TD, x.qkv);
  }
  if (c.bias >= 0) {
    // bias (H, T queries, T keys) of each example, into the lanes key-major.
    std::fill(x.bias, x.bias + s.H * T * T * kExampleLanes, 0.0f);
    for (int64_t g = 0; g < n; ++g) {
      const float* bias = c.hooks[c.bias]->score_bias(group.hooks[g][c.bias]);
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j) x.bias[((h * T + j) * T + i) * kExampleLanes + g] = bias[(h * T + i) * T + j];
    }
  }
  attention_forward_lanes<Lanes>(x.qkv, c.bias >= 0 ? x.bias : nullptr, c.causal,
                                 dropout ? a.masks[kAttentionWeights] : nullptr, a.weights, a.mixed, x.scratch, T, s.H,
                                 s.Dh);
}

// Its backward, from the gradient at the mixed values (the lanes buffer's grad_mixed): the
// gradient at q | k | v in the lanes buffer's grad_qkv (through the query_key hooks' backward,
// which act on the examples' rows: out of the lanes and back); each example's score bias
// gradient, where the hook wants one, added to.
template <class Lanes>
COPYTASK_INLINE void attention_backward_lanes_group(const Shape& s, const MemberConstants& c, const Group& group,
                                                    int64_t l, bool dropout, GroupWorkspace& work) {
  const int64_t T = s.T, TD = s.T * s.D, n = group.n;
  auto a = work.block(l);
  auto t = work.tail();
  const auto x = work.lanes_buffers(l);  // its q | k | v as the forward left them
  std::array<float*, kExampleLanes> grad_bias{};
  bool bias_gradient = false;
  if (c.bias >= 0)
    for (int64_t g = 0; g < n; ++g) {
      grad_bias[g] = c.hooks[c.bias]->score_bias_grad(group.hooks[g][c.bias]);
      bias_gradient = bias_gradient || grad_bias[g];
    }
  attention_backward_lanes<Lanes>(x.qkv, a.weights, c.causal, dropout ? a.masks[kAttentionWeights] : nullptr,
                                  x.grad_mixed, x.grad_qkv, bias_gradient ? x.grad_logits : nullptr, x.scratch, T, s.H,
                                  s.Dh);
  for (int64_t g = 0; g < n; ++g)
    if (grad_bias[g])
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j)
            grad_bias[g][(h * T + i) * T + j] += x.grad_logits[((h * T + j) * T + i) * kExampleLanes + g];
  if (c.query_key_lanes) {
    const auto views = query_key_views(c, group);
    c.hooks[c.query_key[0]]->query_key_backward_lanes(HookLanes{views.data(), n}, l, x.grad_qkv, x.qkv);
    return;
  }
  if (c.query_key.empty()) return;
  from_lanes<Lanes>(x.grad_qkv, 3 * TD, n, t.grad_qkv, 3 * TD);
  for (int64_t g = 0; g < n; ++g) query_key_backward(c, group.hooks[g], l, g, work.tail(g).grad_qkv, work);
  to_lanes<Lanes>(t.grad_qkv, 3 * TD, n, 3 * TD, x.grad_qkv);
}

// Block l's forward of the group in lanes: x (T, D) in lanes in and out; keeps its
// activations in the workspace, in lanes.
template <class Lanes>
COPYTASK_INLINE void block_forward_lanes(const Shape& s, const MemberConstants& c, const Group& group, int64_t l,
                                         bool dropout, GroupWorkspace& work, float* x) {
  const int64_t T = s.T, D = s.D, F = s.F;
  auto a = work.block(l);
  auto mask = [&](DropoutSite site) -> const float* { return dropout ? a.masks[site] : nullptr; };
  // x += dropout(proj(attention(ln1(x)))).
  layernorm_forward_lanes<Lanes>(x, c.value[block_index(l, kLn1W)], c.value[block_index(l, kLn1B)], a.normalized1,
                                 a.rstd1, a.attn_in, T, D);
  linear_forward_lanes<Lanes>(a.attn_in, c.weight[block_index(l, kQkv)].data(), nullptr, work.lanes_buffers(l).qkv, T, D,
                              3 * D);  // (T, 3D): q | k | v
  attention_forward_lanes_group<Lanes>(s, c, group, l, dropout, work);
  linear_residual_lanes<Lanes>(a.mixed, c.weight[block_index(l, kProjW)].data(), c.value[block_index(l, kProjB)],
                               mask(kAttentionOutput), x, T, D, D);
  // x += dropout(fc2(dropout(f(fc1(ln2(x)))))), f the activation: ReLU's in fc1's tiles.
  layernorm_forward_lanes<Lanes>(x, c.value[block_index(l, kLn2W)], c.value[block_index(l, kLn2B)], a.normalized2,
                                 a.rstd2, a.ff_in, T, D);
  linear_activation_lanes<Lanes>(c.activation, a.ff_in, c.weight[block_index(l, kFc1W)].data(),
                                 c.value[block_index(l, kFc1B)], mask(kHidden), a.pre_activation, a.hidden, T, D, F);
  linear_residual_lanes<Lanes>(a.hidden, c.weight[block_index(l, kFc2W)].data(), c.value[block_index(l, kFc2B)],
                               mask(kFeedForwardOutput), x, T, F, D);
}

// A linear layer's backward in lanes: its weight (and bias) gradient a lane apart, into
// grad_w_l and grad_bias_l (LanesGradient), and grad_in = grad_out @ w^T where wanted; the
// activations in lanes.
template <class Lanes>
COPYTASK_INLINE void linear_backward_lanes(const float* in_l, const float* grad_out_l, const float* w_t, float* grad_w_l,
                                           float* grad_bias_l, float* grad_in_l, int64_t T, int64_t I, int64_t O) {
  linear_weight_gradient_lanes<Lanes>(in_l, grad_out_l, grad_w_l, grad_bias_l, T, I, O);
  if (grad_in_l) linear_input_gradient_lanes<Lanes>(grad_out_l, w_t, grad_in_l, T, I, O);
}

// A layer norm's backward in lanes: grad_x += the gradient through it of grad_out; its weight
// and bias gradients a lane apart (LanesGradient); the activations in lanes.
template <class Lanes>
COPYTASK_INLINE void layernorm_backward_lanes(const float* normalized_l, const float* rstd_l, const float* weight,
                                              const float* grad_out_l, float* grad_weight_l, float* grad_bias_l,
                                              float* grad_x_l, int64_t T, int64_t D, float* scratch_l) {
  layernorm_parameter_gradients_lanes<Lanes>(normalized_l, grad_out_l, grad_weight_l, grad_bias_l, T, D);
  layernorm_input_gradient_lanes<Lanes>(normalized_l, rstd_l, weight, grad_out_l, grad_x_l, T, D, scratch_l);
}

// Block l's backward of the group in lanes: t.grad_x (lanes) is d(loss)/d(the block's
// output) on entry, d(its input) on exit; the block's parameter gradients accumulate a lane
// apart into `lanes` (LanesGradient), the tables' into `grad`.
template <class Lanes>
COPYTASK_INLINE void block_backward_lanes(const Shape& s, const MemberConstants& c, const Group& group,
                                          const LanesGradient& lanes, int64_t l, bool dropout, GroupWorkspace& work) {
  const int64_t T = s.T, D = s.D, F = s.F;
  const int64_t RD = kExampleLanes * T * D;  // a part's lanes floats
  auto a = work.block(l);
  auto t = work.tail();
  const auto x = work.lanes_buffers(l);
  auto mask = [&](DropoutSite site) -> const float* { return dropout ? a.masks[site] : nullptr; };
  auto grad_of = [&](int which) { return lanes.of(block_index(l, which)); };
  auto transposed = [&](int which) { return c.transposed[block_index(l, which)].data(); };

  // Feed-forward: out = in + dropout(fc2(hidden)).
  residual_backward(t.grad_x, mask(kFeedForwardOutput), t.grad_a, RD);
  linear_weight_gradient_lanes<Lanes>(a.hidden, t.grad_a, grad_of(kFc2W), grad_of(kFc2B), T, F, D);
  linear_input_gradient_activation_lanes<Lanes>(c.activation, t.grad_a, transposed(kFc2W), a.pre_activation,
                                                mask(kHidden), t.grad_hidden, t.grad_pre, T, F, D);
  linear_backward_lanes<Lanes>(a.ff_in, t.grad_pre, transposed(kFc1W), grad_of(kFc1W), grad_of(kFc1B), t.grad_b, T, D,
                               F);
  layernorm_backward_lanes<Lanes>(a.normalized2, a.rstd2, c.value[block_index(l, kLn2W)], t.grad_b, grad_of(kLn2W),
                                  grad_of(kLn2B), t.grad_x, T, D, t.scratch);

  // Attention: out = in + dropout(proj(mixed)).
  residual_backward(t.grad_x, mask(kAttentionOutput), t.grad_a, RD);
  linear_backward_lanes<Lanes>(a.mixed, t.grad_a, transposed(kProjW), grad_of(kProjW), grad_of(kProjB), x.grad_mixed, T,
                               D, D);
  attention_backward_lanes_group<Lanes>(s, c, group, l, dropout, work);  // x.grad_qkv
  linear_backward_lanes<Lanes>(a.attn_in, x.grad_qkv, transposed(kQkv), grad_of(kQkv), nullptr, t.grad_b, T, D, 3 * D);
  layernorm_backward_lanes<Lanes>(a.normalized1, a.rstd1, c.value[block_index(l, kLn1W)], t.grad_b, grad_of(kLn1W),
                                  grad_of(kLn1B), t.grad_x, T, D, t.scratch);
}

// The forward pass of the group in lanes up to its logits (the tail's logits, (T, V) in
// lanes): the embedding in rows, into the lanes for the blocks, the final layer norm and the
// head (the tail's normalized_f, rstd_f and final_in in lanes).
template <class Lanes>
COPYTASK_INLINE void group_forward_lanes(const Shape& s, const MemberConstants& c, const Group& group, bool dropout,
                                         GroupWorkspace& work) {
  auto t = work.tail();
  const auto x = work.lanes_buffers();
  const int64_t TD = s.T * s.D;
  for (int64_t g = 0; g < group.n; ++g) {
    float* x_g = x.rows + g * TD;
    embedding_forward(c.value[kTok], group.tokens_of(g), group.token_stride, x_g, s.T, s.D);
    for (int k : c.embedding) c.hooks[k]->embedding_forward(group.hooks[g][k], x_g);
  }
  to_lanes<Lanes>(x.rows, TD, group.n, TD, t.x);
  for (int64_t l = 0; l < s.L; ++l) block_forward_lanes<Lanes>(s, c, group, l, dropout, work, t.x);
  layernorm_forward_lanes<Lanes>(t.x, c.value[kLnfW], c.value[kLnfB], t.normalized_f, t.rstd_f, t.final_in, s.T, s.D);
  linear_forward_lanes<Lanes>(t.final_in, c.weight[kHeadW].data(), c.value[kHeadB], t.logits, s.T, s.D, s.V);
}

// The group's loss and backward in lanes after group_forward_lanes, up to the gradient at the
// embedding's output: the cross-entropy, the head, the final layer norm and the blocks from
// the last in lanes (their parameters' gradients a lane apart into `lanes`), then that
// gradient out of the lanes into the lanes buffers' rows (the examples' rows).
template <class Lanes>
COPYTASK_INLINE void group_loss_backward_lanes(const Shape& s, const MemberConstants& c, const Group& group,
                                               float loss_weight, const LanesGradient& lanes, bool dropout,
                                               GroupWorkspace& work, double& loss) {
  auto t = work.tail();
  const int64_t TD = s.T * s.D;
  std::array<const int64_t*, kExampleLanes> targets{};
  for (int64_t g = 0; g < group.n; ++g) targets[g] = group.targets_of(g);
  crossentropy_forward_backward_lanes<Lanes>(t.logits, targets.data(), group.target_stride, group.n, loss_weight, s.T,
                                             s.V, t.scratch, loss);
  linear_backward_lanes<Lanes>(t.final_in, t.logits, c.transposed[kHeadW].data(), lanes.of(kHeadW), lanes.of(kHeadB),
                               t.grad_a, s.T, s.D, s.V);
  std::fill(t.grad_x, t.grad_x + kExampleLanes * TD, 0.0f);
  layernorm_backward_lanes<Lanes>(t.normalized_f, t.rstd_f, c.value[kLnfW], t.grad_a, lanes.of(kLnfW), lanes.of(kLnfB),
                                  t.grad_x, s.T, s.D, t.scratch);
  for (int64_t l = s.L - 1; l >= 0; --l) block_backward_lanes<Lanes>(s, c, group, lanes, l, dropout, work);
  from_lanes<Lanes>(t.grad_x, TD, group.n, work.lanes_buffers().rows, TD);
}

// ---- One member's model, a group of examples in rows ----------------------------------------

// The attention of block l of example g in stages, for a member with hooks at the scores or
// softmax site: scores (none when a hook replaces them: polar), the score bias, the scores
// hooks, the softmax hooks, softmax and the mix.
template <class Lanes>
COPYTASK_INLINE void attention_forward_staged(const Shape& s, const MemberConstants& c, const HookExamples& e,
                                              int64_t l, int64_t g, const float* dropout, GroupWorkspace& work) {
  auto a = work.block(l, g);
  const auto staged = work.staged(l, g);
  const int64_t n = s.H * s.T * s.T;
  const float* bias = c.bias >= 0 ? c.hooks[c.bias]->score_bias(e[c.bias]) : nullptr;
  if (c.replaces_scores) {
    // A hook makes the whole score (polar): no plain scores; the logits start from the bias.
    if (bias)
      std::copy(bias, bias + n, a.weights);
    else
      std::fill(a.weights, a.weights + n, 0.0f);
  } else {
    attention_scores<Lanes>(a.qkv, c.causal, staged.scores, work.tail().scratch, s.T, s.H, s.Dh);
    if (bias)
      for (int64_t i = 0; i < n; ++i) a.weights[i] = staged.scores[i] + bias[i];
    else
      std::copy(staged.scores, staged.scores + n, a.weights);
  }
  const float* scores = c.replaces_scores ? nullptr : staged.scores;
  const ScoresSite site{a.qkv, a.attn_in, scores, bias, a.weights};
  for (int k : c.scores) c.hooks[k]->scores_forward(e[k], l, site);
  for (int k : c.softmax) c.hooks[k]->softmax_forward(e[k], l, a.weights);
  attention_softmax_mix<Lanes>(a.qkv, c.causal, dropout, a.weights, a.mixed, work.tail().scratch, s.T, s.H, s.Dh);
}

// Its backward, from grad_mixed (T, D): example g's grad_qkv set, the hooks' gradients
// accumulated, and the gradient the hooks send to the attention's input in the staged
// grad_input.
template <class Lanes>
COPYTASK_INLINE void attention_backward_staged(const Shape& s, const MemberConstants& c, const HookExamples& e,
                                               int64_t l, int64_t g, const float* dropout, const float* grad_mixed,
                                               GroupWorkspace& work) {
  auto a = work.block(l, g);
  float* grad_qkv = work.tail(g).grad_qkv;
  float* scratch = work.tail().scratch;
  const auto staged = work.staged(l, g);
  const int64_t n = s.H * s.T * s.T;
  attention_softmax_backward<Lanes>(a.qkv, a.weights, c.causal, dropout, grad_mixed, grad_qkv, staged.grad_logits,
                                    scratch, s.T, s.H, s.Dh);
  for (auto k = c.softmax.rbegin(); k != c.softmax.rend(); ++k) c.hooks[*k]->softmax_backward(e[*k], l, staged.grad_logits);
  std::copy(staged.grad_logits, staged.grad_logits + n, staged.grad_scores);
  std::fill(staged.grad_input, staged.grad_input + s.T * s.D, 0.0f);
  const float* bias = c.bias >= 0 ? c.hooks[c.bias]->score_bias(e[c.bias]) : nullptr;
  float* grad_bias = c.bias >= 0 ? c.hooks[c.bias]->score_bias_grad(e[c.bias]) : nullptr;
  const ScoresSite site{a.qkv, a.attn_in, c.replaces_scores ? nullptr : staged.scores, bias, nullptr};
  const ScoresGrad grad{staged.grad_logits, staged.grad_scores, grad_qkv, staged.grad_input, grad_bias};
  for (auto k = c.scores.rbegin(); k != c.scores.rend(); ++k) c.hooks[*k]->scores_backward(e[*k], l, site, grad);
  if (grad_bias)
    for (int64_t i = 0; i < n; ++i) grad_bias[i] += staged.grad_logits[i];
  // Replaced scores have no path to q and k: the replacing hook sent the gradient there.
  if (!c.replaces_scores)
    attention_scores_backward<Lanes>(a.qkv, c.causal, staged.grad_scores, grad_qkv, scratch, s.T, s.H, s.Dh);
}

// Block l's forward of the group: x (n T, D) in and out; keeps its activations in the
// workspace. The row-wise layers take the group's rows at once, the hooks and the attention
// example by example.
template <class Lanes>
COPYTASK_INLINE void block_forward(const Shape& s, const MemberConstants& c, const Group& group, int64_t l, bool dropout,
                                   GroupWorkspace& work, float* x, float* scratch) {
  const int64_t T = s.T, D = s.D, F = s.F, TD = T * D;
  const int64_t rows = group.n * T, RD = rows * D, RF = rows * F;  // the group's rows
  auto a = work.block(l);
  auto mask = [&](DropoutSite site) -> const float* { return dropout ? a.masks[site] : nullptr; };
  // x += dropout(proj(attention(ln1(x)))).
  layernorm_forward(x, c.value[block_index(l, kLn1W)], c.value[block_index(l, kLn1B)], a.normalized1, a.rstd1, a.attn_in,
                    rows, D);
  linear_forward<Lanes>(a.attn_in, c.weight[block_index(l, kQkv)].data(), nullptr, a.qkv, rows, D, 3 * D);  // (n T, 3D): q | k | v
  for (int64_t g = 0; g < group.n; ++g) {
    const HookExamples& e = group.hooks[g];
    auto a_g = work.block(l, g);
    query_key_forward(c, e, l, g, a_g.qkv, work, TD);
    const float* weights_mask = dropout ? a_g.masks[kAttentionWeights] : nullptr;
    if (c.staged) {
      attention_forward_staged<Lanes>(s, c, e, l, g, weights_mask, work);
    } else {
      const float* bias = c.bias >= 0 ? c.hooks[c.bias]->score_bias(e[c.bias]) : nullptr;
      attention_forward<Lanes>(a_g.qkv, bias, c.causal, weights_mask, a_g.weights, a_g.mixed, work.tail().scratch, T,
                               s.H, s.Dh);
    }
  }
  linear_forward<Lanes>(a.mixed, c.weight[block_index(l, kProjW)].data(), c.value[block_index(l, kProjB)], scratch, rows,
                        D, D);
  residual_forward(x, scratch, mask(kAttentionOutput), RD);
  // x += dropout(fc2(dropout(f(fc1(ln2(x)))))), f the activation.
  layernorm_forward(x, c.value[block_index(l, kLn2W)], c.value[block_index(l, kLn2B)], a.normalized2, a.rstd2, a.ff_in,
                    rows, D);
  linear_forward<Lanes>(a.ff_in, c.weight[block_index(l, kFc1W)].data(), c.value[block_index(l, kFc1B)], a.pre_activation, rows,
                        D, F);
  activation_forward(c.activation, a.pre_activation, mask(kHidden), a.hidden, RF);
  linear_forward<Lanes>(a.hidden, c.weight[block_index(l, kFc2W)].data(), c.value[block_index(l, kFc2B)], scratch, rows,
                        F, D);
  residual_forward(x, scratch, mask(kFeedForwardOutput), RD);
}

// Block l's backward of the group: t.grad_x is d(loss)/d(the block's output) on entry,
// d(its input) on exit; parameter and table gradients accumulate into `grad`, the weights'
// over the group's rows in the examples' order.
template <class Lanes>
COPYTASK_INLINE void block_backward(const Shape& s, const MemberConstants& c, const Group& group,
                                    const std::vector<int64_t>& offset, int64_t l, bool dropout, GroupWorkspace& work,
                                    float* grad) {
  const int64_t T = s.T, D = s.D, F = s.F, TD = T * D;
  const int64_t rows = group.n * T, RD = rows * D, RF = rows * F;  // the group's rows
  auto a = work.block(l);
  auto t = work.tail();
  auto mask = [&](DropoutSite site) -> const float* { return dropout ? a.masks[site] : nullptr; };
  auto grad_of = [&](int which) { return grad + offset[block_index(l, which)]; };
  auto transposed = [&](int which) { return c.transposed[block_index(l, which)].data(); };

  // Feed-forward: out = in + dropout(fc2(hidden)).
  residual_backward(t.grad_x, mask(kFeedForwardOutput), t.grad_a, RD);
  linear_backward<Lanes>(a.hidden, t.grad_a, transposed(kFc2W), grad_of(kFc2W), grad_of(kFc2B), t.grad_hidden, rows, F,
                         D);
  activation_backward(c.activation, a.pre_activation, mask(kHidden), t.grad_hidden, t.grad_pre, RF);
  linear_backward<Lanes>(a.ff_in, t.grad_pre, transposed(kFc1W), grad_of(kFc1W), grad_of(kFc1B), t.grad_b, rows, D, F);
  layernorm_backward(a.normalized2, a.rstd2, c.value[block_index(l, kLn2W)], t.grad_b, grad_of(kLn2W), grad_of(kLn2B),
                     t.grad_x, rows, D, t.scratch);

  // Attention: out = in + dropout(proj(mixed)).
  residual_backward(t.grad_x, mask(kAttentionOutput), t.grad_a, RD);
  linear_backward<Lanes>(a.mixed, t.grad_a, transposed(kProjW), grad_of(kProjW), grad_of(kProjB), t.grad_b, rows, D, D);
  for (int64_t g = 0; g < group.n; ++g) {
    const HookExamples& e = group.hooks[g];
    auto a_g = work.block(l, g);
    auto t_g = work.tail(g);
    const float* weights_mask = dropout ? a_g.masks[kAttentionWeights] : nullptr;
    if (c.staged) {
      attention_backward_staged<Lanes>(s, c, e, l, g, weights_mask, t_g.grad_b, work);
    } else {
      float* grad_bias = c.bias >= 0 ? c.hooks[c.bias]->score_bias_grad(e[c.bias]) : nullptr;
      attention_backward<Lanes>(a_g.qkv, a_g.weights, c.causal, weights_mask, t_g.grad_b, t_g.grad_qkv, grad_bias,
                                t.scratch, T, s.H, s.Dh);
    }
    query_key_backward(c, e, l, g, t_g.grad_qkv, work);
  }
  linear_backward<Lanes>(a.attn_in, t.grad_qkv, transposed(kQkv), grad_of(kQkv), nullptr, t.grad_b, rows, D, 3 * D);
  if (c.staged)
    for (int64_t g = 0; g < group.n; ++g) {
      const float* from_hooks = work.staged(l, g).grad_input;  // a term that reads the attention's input (fox)
      float* grad_b = work.tail(g).grad_b;
      for (int64_t i = 0; i < TD; ++i) grad_b[i] += from_hooks[i];
    }
  layernorm_backward(a.normalized1, a.rstd1, c.value[block_index(l, kLn1W)], t.grad_b, grad_of(kLn1W), grad_of(kLn1B),
                     t.grad_x, rows, D, t.scratch);
}

// The forward pass of the group up to its logits (the tail's logits, (n T, V)).
template <class Lanes>
COPYTASK_INLINE void group_forward(const Shape& s, const MemberConstants& c, const Group& group, bool dropout,
                                   GroupWorkspace& work) {
  auto t = work.tail();
  const int64_t rows = group.n * s.T;
  for (int64_t g = 0; g < group.n; ++g) {
    float* x = work.tail(g).x;
    embedding_forward(c.value[kTok], group.tokens_of(g), group.token_stride, x, s.T, s.D);
    for (int k : c.embedding) c.hooks[k]->embedding_forward(group.hooks[g][k], x);
  }
  for (int64_t l = 0; l < s.L; ++l) block_forward<Lanes>(s, c, group, l, dropout, work, t.x, t.grad_a);
  layernorm_forward(t.x, c.value[kLnfW], c.value[kLnfB], t.normalized_f, t.rstd_f, t.final_in, rows, s.D);
  linear_forward<Lanes>(t.final_in, c.weight[kHeadW].data(), c.value[kHeadB], t.logits, rows, s.D, s.V);
}

// Forward and backward of a group of one member's examples; adds their parameter (and
// table) gradients to `grad` (the blocks' to `lanes_gradient` instead, where the group runs
// in lanes) and their summed cross-entropies over the T positions to `loss`, example by
// example.
void group_forward_backward(const Shape& s, const MemberConstants& c, const std::vector<int64_t>& offset,
                            const DropoutLayout& layout, Group& group, float loss_weight, GroupWorkspace& work,
                            float* grad, const LanesGradient& lanes_gradient, double& loss) {
  on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY {
    using Lanes = decltype(lanes);
    const bool dropout = c.stream != nullptr;
    const bool in_lanes = group_in_lanes(c, work);
    const int64_t rows = group.n * s.T;
    if (dropout) masks_draw<Lanes>(s, c, layout, group, work);
    for (int64_t g = 0; g < group.n; ++g)
      hook_examples_begin(c, group.positions_of(g, s.T), grad, work.hooks(g), group.hooks[g]);
    if (in_lanes) {
      group_forward_lanes<Lanes>(s, c, group, dropout, work);
      group_loss_backward_lanes<Lanes>(s, c, group, loss_weight, lanes_gradient, dropout, work, loss);
    } else {
      group_forward<Lanes>(s, c, group, dropout, work);
      for (int64_t g = 0; g < group.n; ++g)
        loss += crossentropy_forward_backward(work.tail(g).logits, group.targets_of(g), group.target_stride,
                                              loss_weight, s.T, s.V, work.tail().scratch);
      // Head and final layer norm, then the blocks from the last: the gradient at the blocks'
      // output, and then at their input, in the tail's grad_x.
      auto t = work.tail();
      linear_backward<Lanes>(t.final_in, t.logits, c.transposed[kHeadW].data(), grad + offset[kHeadW],
                             grad + offset[kHeadB], t.grad_a, rows, s.D, s.V);
      std::fill(t.grad_x, t.grad_x + rows * s.D, 0.0f);
      layernorm_backward(t.normalized_f, t.rstd_f, c.value[kLnfW], t.grad_a, grad + offset[kLnfW],
                         grad + offset[kLnfB], t.grad_x, rows, s.D, t.scratch);
      for (int64_t l = s.L - 1; l >= 0; --l) block_backward<Lanes>(s, c, group, offset, l, dropout, work, grad);
    }
    // Then the embedding, from the gradient at its output in the examples' rows: the tail's
    // grad_x, or (the blocks in lanes) the lanes buffers' rows.
    const float* grad_x = in_lanes ? work.lanes_buffers().rows : work.tail().grad_x;
    for (int64_t g = 0; g < group.n; ++g) {
      const HookExamples& e = group.hooks[g];
      const float* grad_x_g = grad_x + g * s.T * s.D;
      embedding_backward(grad_x_g, group.tokens_of(g), group.token_stride, grad + offset[kTok], s.T, s.D);
      for (int k : c.embedding) c.hooks[k]->embedding_backward(e[k], grad_x_g);
      for (size_t k = 0; k < c.hooks.size(); ++k) c.hooks[k]->example_end(e[k]);
    }
  });
}

// The forward pass of one example without dropout: its logits (T, V) to `logits`, and
// (when given) each block's attention weights (H, T, T) to weights[l].
void example_forward_only(const Shape& s, const MemberConstants& c, const int64_t* tokens, int64_t token_stride,
                          const int64_t* pos, GroupWorkspace& work, float* logits, const std::vector<float*>& weights) {
  on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY {
    using Lanes = decltype(lanes);
    Group group;
    group.hooks.resize(1);
    group.n = 1;
    group.tokens = tokens;
    group.token_stride = token_stride;
    hook_examples_begin(c, pos, nullptr, work.hooks(0), group.hooks[0]);
    group_forward<Lanes>(s, c, group, false, work);
    const float* out = work.tail().logits;
    std::copy(out, out + s.T * s.V, logits);
    for (size_t l = 0; l < weights.size(); ++l) {
      const float* key_major = work.block(static_cast<int64_t>(l)).weights;
      float* query_major = weights[l];  // (H, T, T), as the attention maps read them
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t i = 0; i < s.T; ++i)
          for (int64_t j = 0; j < s.T; ++j)
            query_major[(h * s.T + i) * s.T + j] = key_major[(h * s.T + j) * s.T + i];
    }
  });
}

// Partitions of a member's B examples: fixed by B alone (about 64 examples each, at most
// 16), so the summation order never depends on the threads or the members.
int64_t partition_count(int64_t batch) { return std::clamp<int64_t>(batch / 64, 1, 16); }

// What the members' constants need of the whole batch: the flat gradient's floats, and the
// largest hook workspace and query_key snapshots a member needs.
struct BatchLayout {
  int64_t flat_size = 0;     // floats of one member's flat gradient: parameters, then table slots
  int64_t hook_floats = 0;   // the largest member's hook workspace per example
  bool staged = false;       // some member's attention runs in stages
  int64_t snapshots = 0;     // the most query_key hooks but one of a member
  std::vector<int64_t> slot; // per registered hook: its table gradient's slot, or -1
};

// A member's weights, as the kernel reads them: each linear layer's (I, O) values with the
// slack the vector loads need, and their transpose (O, I) for the backward pass.
void member_weights_copy(const ParameterTable& parameters, const Shape& s, MemberConstants& c) {
  std::vector<int> weights{kHeadW};
  for (int64_t l = 0; l < s.L; ++l)
    for (int which : {kQkv, kProjW, kFc1W, kFc2W}) weights.push_back(block_index(l, which));
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
}

// Member m's hooks, each made from its table, sorted by the site it acts at; each hook's
// gradient slot is its registry index for now (gradient_slots_assign makes it a slot), and
// slot_size grows to the largest gradient a hook of that index needs. Returns the member's
// hook workspace floats per example.
int64_t member_hooks_make(const PositionalTables& tables, const Shape& s, bool table_grads, bool gathers, int64_t m,
                          MemberConstants& c, std::vector<int64_t>& slot_size) {
  const auto& registry = hook_registry();
  int64_t work = 0;
  for (size_t index = 0; index < registry.size(); ++index) {
    const HookTable& table = tables.hooks[index];
    if (!table.used[m]) continue;
    const torch::Tensor mine = table.of(m);
    CpuHookMaking making;
    making.table = mine.defined() ? mine.data_ptr<float>() : nullptr;
    making.positions = tables.positions;
    making.shape = &s;
    making.causal = c.causal;
    making.wants_grad = table_grads && table.learned[m];
    making.gathers = gathers;
    making.owner = table.owners[m];
    const int k = static_cast<int>(c.hooks.size());
    c.hooks.push_back(registry[index]->cpu(making));
    CpuHook& hook = *c.hooks.back();
    c.work_offset.push_back(work);
    work += hook.workspace_floats();
    c.grad_slot.push_back(static_cast<int64_t>(index));
    slot_size[index] = std::max(slot_size[index], hook.grad_floats());
    switch (registry[index]->site()) {
      case HookSite::embedding: c.embedding.push_back(k); break;
      case HookSite::query_key: c.query_key.push_back(k); break;
      case HookSite::scores:
        if (hook.stages_attention()) c.scores.push_back(k);
        else c.bias = k;
        break;
      case HookSite::softmax: c.softmax.push_back(k); break;
    }
    c.staged = c.staged || hook.stages_attention();
    c.replaces_scores = c.replaces_scores || hook.replaces_scores();
  }
  TORCH_CHECK(c.hooks.size() <= HookExamples().size(), "fused_cpu: a member with more hooks than the step holds");
  // More than one keeps snapshots between them (query_key_forward), which only the rows do.
  c.query_key_lanes = c.query_key.size() == 1 && c.hooks[c.query_key[0]]->query_key_in_lanes();
  return work;
}

// The tables' gradient slots, after the parameters in every member's flat gradient: one per
// registry index that some member's hook needs, shared by the members that have one.
void gradient_slots_assign(const ParameterTable& parameters, const std::vector<int64_t>& slot_size,
                           std::vector<MemberConstants>& constants, BatchLayout* layout) {
  layout->slot.assign(slot_size.size(), -1);
  int64_t next = parameters.total;
  for (size_t index = 0; index < slot_size.size(); ++index)
    if (slot_size[index] > 0) {
      layout->slot[index] = next;
      next += slot_size[index];
    }
  layout->flat_size = next;
  for (auto& c : constants)
    for (size_t k = 0; k < c.hooks.size(); ++k)
      c.grad_slot[k] = c.hooks[k]->grad_floats() > 0 ? layout->slot[static_cast<size_t>(c.grad_slot[k])] : -1;
}

// Every member's constants. A member's learned tables (when table_grads are wanted) get a
// gradient slot, one per hook, shared by the members that have one.
std::vector<MemberConstants> member_constants(EncoderImpl& model, const ParameterTable& parameters, const Shape& s,
                                              const PositionalTables& tables, bool table_grads, bool gathers,
                                              const DropoutMasks* masks, BatchLayout* layout) {
  const int64_t M = model.member_count();
  std::vector<MemberConstants> constants(M);
  std::vector<int64_t> slot_size(hook_registry().size(), 0);
  for (int64_t m = 0; m < M; ++m) {
    MemberConstants& c = constants[m];
    for (size_t j = 0; j < parameters.tensors.size(); ++j) c.value.push_back(parameters.value(static_cast<int>(j), m));
    member_weights_copy(parameters, s, c);
    c.causal = model.members()[m].causal;
    c.activation = model.shape().form.activation;
    if (masks) c.stream = masks->stream();
    c.member = m;
    const int64_t work = member_hooks_make(tables, s, table_grads, gathers, m, c, slot_size);
    layout->hook_floats = std::max(layout->hook_floats, work);
    layout->staged = layout->staged || c.staged;
    layout->snapshots = std::max<int64_t>(layout->snapshots, static_cast<int64_t>(c.query_key.size()) - 1);
  }
  gradient_slots_assign(parameters, slot_size, constants, layout);
  return constants;
}

// The tables as float32 contiguous CPU tensors the kernel can point into.
PositionalTables plain_tables(const PositionalTables& tables) {
  PositionalTables out = tables;
  for (auto& table : out.hooks) {
    if (table.stacked.defined()) table.stacked = table.stacked.detach().to(torch::kFloat32).contiguous();
    for (auto& member : table.members)
      if (member.defined()) member = member.detach().to(torch::kFloat32).contiguous();
  }
  return out;
}

}  // namespace

std::string fused_cpu_unsupported(const EncoderImpl& model) {
  if (!model.device().is_cpu()) return "the model is not on the CPU";
  if (model.tok_emb.scalar_type() != torch::kFloat32) return "the model is not float32";
  const std::string form = layer_form_unsupported(model.shape().form, kFusedCpuStep);
  if (!form.empty()) return form;
  for (const auto& member : model.members())
    if (!(positional_steps(member.positional, member.options) & kFusedCpuStep))
      return "member " + member.arm + "'s positional scheme " + member.positional + " has no fused CPU step";
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
  TORCH_CHECK(out.numel() == 0 || (out.min().item<int64_t>() >= 0 && out.max().item<int64_t>() < table_positions), where,
              ": a position ID outside the tables' 0..", table_positions - 1);
  return out;
}
}  // namespace

namespace {

// The batch's shape, after checking the inputs, the targets and the masks against the model.
Shape step_shape_checked(EncoderImpl& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                         const DropoutMasks* masks) {
  const std::string why = fused_cpu_unsupported(model);
  TORCH_CHECK(why.empty(), "fused_cpu_loss_backward: ", why);
  const EncoderShape& shape = model.shape();
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(0) == model.member_count(), "fused_cpu: inputs (M, B, T)");
  TORCH_CHECK(targets.sizes() == inputs.sizes(), "fused_cpu: targets must have the inputs' shape");
  TORCH_CHECK(inputs.scalar_type() == torch::kLong && targets.scalar_type() == torch::kLong, "fused_cpu: int64 tokens");
  const Shape s{inputs.size(1), inputs.size(2), shape.embed,  shape.heads,
                shape.head_dim(), shape.hidden, shape.vocab, shape.blocks};
  if (masks) {
    TORCH_CHECK(masks->whole_batch() && masks->layout().batch() == s.B, "fused_cpu: masks must be the whole batch's");
    TORCH_CHECK(masks->stream(), "fused_cpu: masks without a CPU stream");
  }
  return s;
}

// Each (member, partition) task's sums: its flat gradient (P floats) and its loss.
struct PartitionSums {
  int64_t K = 0, P = 0;        // partitions per member, floats of a flat gradient
  std::vector<float> gradient;  // (M, K, P), then kSlack
  std::vector<double> loss;     // (M, K)
};

// A partition's gradients summed a lane apart (LanesGradient: from the final layer norm on)
// added into its flat gradient `grad`: each element's lanes one after another, in the lanes' order.
void lanes_gradient_add(const LanesGradient& lanes, int64_t floats, float* grad) {
  float* out = grad + (*lanes.offset)[kFirstInLanes];
  for (int64_t e = 0; e < floats; ++e) {
    float sum = out[e];
    for (int64_t lane = 0; lane < kExampleLanes; ++lane) sum += lanes.data[kExampleLanes * e + lane];
    out[e] = sum;
  }
}

// Every (member, partition) task sums its examples' gradients into its own buffer, G
// examples at a time, and its examples' loss. A member whose groups run in lanes sums its
// parameters' gradients but the token embedding's a lane apart first, and adds the lanes at
// the partition's end: the same partition, member and batch give the same order whatever the
// threads.
PartitionSums partitions_forward_backward(const Shape& s, const std::vector<MemberConstants>& constants,
                                          const ParameterTable& parameters, const BatchLayout& batch,
                                          const DropoutLayout& layout, const torch::Tensor& inputs,
                                          const torch::Tensor& targets, const int64_t* position_data, int64_t G) {
  const int64_t M = static_cast<int64_t>(constants.size());
  PartitionSums sums;
  sums.K = partition_count(s.B);
  sums.P = batch.flat_size;
  const int64_t K = sums.K, P = sums.P;
  sums.gradient.resize(static_cast<size_t>(M * K * P + kSlack));  // slack: see kSlack (cpu_layers.h)
  sums.loss.assign(static_cast<size_t>(M * K), 0.0);
  const int64_t* input_data = inputs.data_ptr<int64_t>();
  const int64_t* target_data = targets.data_ptr<int64_t>();
  const float loss_weight = 1.0f / static_cast<float>(s.B * s.T);
  // The blocks' parameters, the last in a member's parameters (model/parameter_layout.h), and
  // the final layer norm's and the head's before them: summed a lane apart in lanes.
  TORCH_CHECK(kFirstBlock + s.L * kPerBlock == static_cast<int64_t>(parameters.offset.size()),
              "fused_cpu: the blocks' parameters must be the last");
  const int64_t lanes_floats = parameters.total - parameters.offset[kFirstInLanes];
  // Each thread takes the next task until none is left, rather than a fixed share: a core
  // slower for a while (a cloud guest's core whose host runs something beside it, a hybrid
  // CPU's efficiency core) then does fewer tasks instead of holding the step back. Measured on
  // a 2-core guest, one member on two threads: the two threads' fixed halves took 0.123 and
  // 0.124 s in some runs and 0.122 and 0.163 in others (docs/performance.md). A task's sums
  // are its own whichever thread runs it, so the result does not change. In the tasks' order,
  // partition-major (partition k of every member, then k + 1), a thread's tasks run through
  // the members as its fixed range did.
  std::atomic<int64_t> next_task{0};
  at::parallel_for(0, at::get_num_threads(), 1, [&](int64_t, int64_t) {
    GroupWorkspace work(s, G, batch.hook_floats, batch.staged, batch.snapshots);
    std::vector<float> lanes_data(static_cast<size_t>(work.lanes() ? kExampleLanes * lanes_floats : 0));
    const LanesGradient lanes{lanes_data.data(), &parameters.offset};
    for (int64_t order = next_task++; order < M * K; order = next_task++) {
      const int64_t m = order % M, k = order / M, task = m * K + k;
      float* grad = sums.gradient.data() + task * P;
      std::fill(grad, grad + P, 0.0f);
      const bool in_lanes = group_in_lanes(constants[m], work);
      if (in_lanes) std::fill(lanes_data.begin(), lanes_data.end(), 0.0f);
      const int64_t first = k * s.B / K, last = (k + 1) * s.B / K;
      double loss = 0;
      Group group;
      group.hooks.resize(static_cast<size_t>(G));
      group.token_example = inputs.stride(1);
      group.token_stride = inputs.stride(2);
      group.target_example = targets.stride(1);
      group.target_stride = targets.stride(2);
      for (int64_t b = first; b < last; b += G) {
        group.n = std::min(G, last - b);
        group.first = b;
        group.tokens = input_data + m * inputs.stride(0) + b * inputs.stride(1);
        group.targets = target_data + m * targets.stride(0) + b * targets.stride(1);
        group.positions = position_data ? position_data + (m * s.B + b) * s.T : nullptr;
        group_forward_backward(s, constants[m], parameters.offset, layout, group, loss_weight, work, grad, lanes, loss);
      }
      if (in_lanes) lanes_gradient_add(lanes, lanes_floats, grad);
      sums.loss[task] = loss;
    }
  });
  return sums;
}

// The partitions added in order into each parameter's gradient (M, ...), set as its .grad,
// and, when wanted, into each member's learned tables' gradients (table_grads, the tables'
// shapes).
void gradients_from_partitions(const PartitionSums& sums, const std::vector<MemberConstants>& constants,
                               ParameterTable& parameters, const PositionalTables& tables,
                               PositionalTables* table_grads) {
  const int64_t M = static_cast<int64_t>(constants.size()), K = sums.K, P = sums.P;
  auto sum_partitions = [&](int64_t m, int64_t start, int64_t n, float* out) {
    const float* first = sums.gradient.data() + (m * K) * P + start;
    std::copy(first, first + n, out);
    for (int64_t k = 1; k < K; ++k) {
      const float* part = sums.gradient.data() + (m * K + k) * P + start;
      for (int64_t e = 0; e < n; ++e) out[e] += part[e];
    }
  };
  std::vector<torch::Tensor> grads;
  for (const auto& t : parameters.tensors) grads.push_back(torch::empty_like(t));
  if (table_grads) {
    *table_grads = tables;
    for (auto& table : table_grads->hooks) {
      if (table.stacked.defined()) table.stacked = torch::zeros_like(table.stacked);
      for (auto& member : table.members)
        if (member.defined()) member = torch::zeros_like(member);
    }
  }
  const auto& registry = hook_registry();
  at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      for (size_t j = 0; j < grads.size(); ++j) {
        const int64_t n = parameters.per_member[j];
        sum_partitions(m, parameters.offset[j], n, grads[j].data_ptr<float>() + m * n);
      }
      if (!table_grads) continue;
      const MemberConstants& c = constants[m];
      // The member's learned tables: its slot of each, in the registry's order of its hooks.
      size_t k = 0;
      for (size_t index = 0; index < registry.size(); ++index) {
        HookTable& table = table_grads->hooks[index];
        if (!table.used[m]) continue;
        const int64_t slot = c.grad_slot[k++];
        if (slot < 0) continue;
        torch::Tensor out = table.stacked.defined() ? table.stacked[m] : table.members[m];
        sum_partitions(m, slot, out.numel(), out.data_ptr<float>());
      }
    }
  });
  for (size_t j = 0; j < grads.size(); ++j) parameters.tensors[j].mutable_grad() = grads[j];
}

}  // namespace

torch::Tensor fused_cpu_loss_backward(EncoderImpl& model, const PositionalTables& given_tables,
                                      const torch::Tensor& inputs, const torch::Tensor& targets,
                                      const DropoutMasks* masks, PositionalTables* table_grads,
                                      const torch::Tensor& given_positions, int64_t group_examples) {
  const Shape s = step_shape_checked(model, inputs, targets, masks);
  const torch::Tensor positions = positions_checked(given_positions, inputs, given_tables.positions, "fused_cpu");
  const int64_t* position_data = positions.defined() ? positions.data_ptr<int64_t>() : nullptr;
  TORCH_CHECK(group_examples >= 0, "fused_cpu: group_examples must be >= 0 (0: the default)");
  const int64_t G = group_examples > 0 ? group_examples : kFusedCpuGroupExamples;

  ParameterTable parameters(model);
  const PositionalTables tables = plain_tables(given_tables);
  BatchLayout batch;
  const std::vector<MemberConstants> constants =
      member_constants(model, parameters, s, tables, table_grads != nullptr, position_data != nullptr, masks, &batch);
  const PartitionSums sums = partitions_forward_backward(s, constants, parameters, batch, DropoutLayout(model.shape(), s.B),
                                                         inputs, targets, position_data, G);
  gradients_from_partitions(sums, constants, parameters, tables, table_grads);

  const int64_t M = model.member_count();
  auto member_loss = torch::empty({M});  // (M)
  for (int64_t m = 0; m < M; ++m) {
    double total = 0;
    for (int64_t k = 0; k < sums.K; ++k) total += sums.loss[m * sums.K + k];
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
  BatchLayout batch;
  const std::vector<MemberConstants> constants =
      member_constants(model, parameters, s, tables, false, position_data != nullptr, nullptr, &batch);

  auto logits = torch::empty({M, s.B, s.T, s.V});  // (M, N, T, V)
  if (attention_out) {
    attention_out->clear();
    for (int64_t l = 0; l < s.L; ++l) attention_out->push_back(torch::empty({M, s.B, s.H, s.T, s.T}));
  }
  const int64_t* input_data = inputs.data_ptr<int64_t>();
  float* logits_data = logits.data_ptr<float>();
  at::parallel_for(0, M * s.B, 16, [&](int64_t begin, int64_t end) {
    GroupWorkspace work(s, 1, batch.hook_floats, batch.staged, batch.snapshots);
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
