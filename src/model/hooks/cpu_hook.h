#pragma once
// A hook on the fused CPU step (model/fused_cpu.h): one member's kernel for one step, which
// the step calls at the hook's site for every example, forward and backward. The step never
// knows a hook by name: each hook's file makes its CpuHook (Hook::cpu) and the step calls the
// member's hooks through this interface.
//
// Per example the step calls, for each of the member's hooks:
//   example_begin                  its view of the table (its rows at the example's
//                                  IDs (model.position_ids)) and a zeroed
//                                  gradient for them
//   embedding_forward / ..._backward, query_key_forward / ..._backward,
//   score_bias / scores_forward / scores_backward, softmax_forward / softmax_backward
//                                  at its site, block by block (backward in reverse)
//   example_end                    its table's gradient added into the member's
// State of one example lives in `work` (workspace_floats() floats of the thread's
// workspace), so one CpuHook serves every thread; its methods are const.
//
// The hot loops of a hook's kernel are compiled for x86-64-v4, x86-64-v3 and the generic
// target (on_cpu_variant, model/cpu_layers.h), as the step's own.
//
// Shapes of one example: T positions, D embed, H heads, Dh = D / H, L blocks; q | k | v of a
// position are one row of 3D floats, head h at columns h*Dh of each third; attention
// matrices (H, T, T) with row = query i, column = key j, only the seen keys (j <= i when
// causal) meaningful.
#include <cstdint>

namespace copytask::cpu {

// The sizes of one step: B examples per member, and the model's.
struct Shape {
  int64_t B, T, D, H, Dh, F, V, L;
};

// One example as one of a member's hooks sees it.
struct HookExample {
  const int64_t* positions = nullptr;  // T rows of the table, each below P: the example's position IDs (model.position_ids), or null: rows 0..T-1
  bool causal = false;
  float* work = nullptr;               // this hook's workspace_floats() floats for this example
  float* grad = nullptr;               // the member's gradient of this hook's table (its slot in the step's
                                       // flat gradient), or null: no gradient wanted, or a forward pass only
};

// A group of examples side by side across a vector's lanes (model/cpu_attention_lanes.h):
// element i of the group's example e at [16 i + e]; the lanes past n hold numbers that are
// never read back.
struct HookLanes {
  const HookExample* const* example = nullptr;  // example[e]: the e-th example's view of the hook, e < n
  int64_t n = 0;
};

// One block's attention of one example at the scores site.
struct ScoresSite {
  const float* qkv = nullptr;     // (T, 3D) after the query_key hooks
  const float* input = nullptr;   // (T, D) the attention's input ln1(x)
  const float* scores = nullptr;  // (H, T, T) q.k / sqrt(Dh), before any hook; null when a hook replaces them
  const float* bias = nullptr;    // (H, T, T) the score bias as added, or null
  float* logits = nullptr;        // (H, T, T) in and out (forward only)
};

// Its backward: the gradient at the logits the scores site left, and where a hook's terms
// send theirs.
struct ScoresGrad {
  const float* grad_logits = nullptr;  // (H, T, T)
  float* grad_scores = nullptr;        // (H, T, T) +=, on to q and k
  float* grad_qkv = nullptr;           // (T, 3D) += (a term that reads q or k directly)
  float* grad_input = nullptr;         // (T, D) += (a term that reads the attention's input)
  float* grad_bias = nullptr;          // (H, T, T) += the score bias's, or null
};

class CpuHook {
 public:
  virtual ~CpuHook() = default;
  // Floats of workspace it needs per example (its gathered rows, what its backward reads).
  virtual int64_t workspace_floats() const { return 0; }
  // Floats of its table's gradient per member (0 when it wants none).
  virtual int64_t grad_floats() const { return 0; }
  // Whether it acts at the scores or softmax site beyond a plain score bias: the step then
  // runs the attention in stages (cpu_layers.h's "Attention in stages") so that it can.
  virtual bool stages_attention() const { return false; }
  // Whether its scores_forward makes the whole score in place of q.k / sqrt(Dh) (polar; it
  // then stages the attention too): the step starts the member's logits from the score bias
  // alone (or zero), and its scores_backward sends the whole gradient at the logits to q and
  // k (grad_qkv), as the plain scores' backward is skipped.
  virtual bool replaces_scores() const { return false; }

  virtual void example_begin(const HookExample& example) const {}
  virtual void example_end(const HookExample& example) const {}

  // embedding: x (T, D) += the hook's rows; backward: its rows' gradient from grad_x.
  virtual void embedding_forward(const HookExample& example, float* x) const {}
  virtual void embedding_backward(const HookExample& example, const float* grad_x) const {}

  // query_key: q and k of qkv (T, 3D) changed in place; backward: grad_qkv (the gradient at
  // the changed values) turned into the gradient at the values before, given the changed
  // values qkv, and the table's gradient accumulated.
  virtual void query_key_forward(const HookExample& example, int64_t block, float* qkv) const {}
  virtual void query_key_backward(const HookExample& example, int64_t block, float* grad_qkv,
                                  const float* qkv) const {}
  // The same two for a group across the lanes (HookLanes: q | k | v (T, 3D) in lanes), each
  // lane the same bits as the example's own call, where the hook has them
  // (query_key_in_lanes); otherwise the step takes the examples' rows out of the lanes for
  // the calls above and back.
  virtual bool query_key_in_lanes() const { return false; }
  virtual void query_key_forward_lanes(const HookLanes& group, int64_t block, float* qkv_lanes) const {}
  virtual void query_key_backward_lanes(const HookLanes& group, int64_t block, float* grad_qkv_lanes,
                                        const float* qkv_lanes) const {}

  // scores: a plain score bias is handed to the attention (which adds it where it makes
  // the scores) with where its gradient goes; other terms change the logits.
  virtual const float* score_bias(const HookExample& example) const { return nullptr; }
  virtual float* score_bias_grad(const HookExample& example) const { return nullptr; }
  virtual void scores_forward(const HookExample& example, int64_t block, const ScoresSite& site) const {}
  virtual void scores_backward(const HookExample& example, int64_t block, const ScoresSite& site,
                               const ScoresGrad& grad) const {}

  // softmax: the logits (H, T, T) changed in place; backward: grad_logits turned into the
  // gradient at the logits before, the table's gradient accumulated.
  virtual void softmax_forward(const HookExample& example, int64_t block, float* logits) const {}
  virtual void softmax_backward(const HookExample& example, int64_t block, float* grad_logits) const {}
};

}  // namespace copytask::cpu
