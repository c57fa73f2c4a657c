#pragma once
// A hook: a place where a positional scheme acts on the model, and everything about it
// (docs/design.md section 2). Each hook is one file in src/model/hooks/ that owns
//   - its table: the shape of one member's table at P positions (a scheme makes it),
//   - its LibTorch application at its site (apply, below), with the position IDs'
//     gather of each example's rows,
//   - its forward and backward on the fused CPU step (cpu(), model/hooks/cpu_hook.h), the
//     gather and the scatter of its table's gradient there,
//   - the form of its table that the fused GPU step's kernel reads (kernel_form(),
//     kernels/fused_step.h), where the kernel has one,
//   - and what positional.json shows of it (describe).
// The model, the fused CPU step and the analysis call the hooks at their sites through this
// interface and never by name, so a new hook is its file plus one line in
// model/hooks/registry.h, and a new scheme on a hook is one scheme file.
//
// The sites, in the order the model meets them (docs/design.md section 2):
//   embedding   x = tok_emb[tokens] + ...                          additive
//   query_key   q and k of each block, after the projection        rotation, qk_scale
//   scores      logits = q.k / sqrt(Dh) + ... of each block        polar, score_bias, content
//   softmax     the logits times ..., before the causal mask        softmax_scale
// Within a site, hooks apply in the registry's order.
//
// Shapes: M members, B batch, T positions, P table positions, D embed, H heads, Dh = D / H,
// L blocks.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "model/encoder_shape.h"

namespace copytask {

class PositionalScheme;
namespace cpu {
class CpuHook;
struct Shape;
}  // namespace cpu

enum class HookSite { embedding, query_key, scores, softmax };

// What the fused GPU step's kernel (kernels/fused_step.h, model/fused_gpu.h) reads of a hook:
// its table in one layout, gathered there at each example's position IDs, and the table's
// gradient it returns. The kernel implements these forms, not hooks by name; a hook without
// one (none) keeps its members on the device step, which runs the hook's LibTorch `apply`.
enum class KernelTableForm {
  none,
  embedding_rows,  // (P, D) rows added to the token embeddings
  pair_angles,     // (P, Dh/2) angles turning q's and k's pairs (2i, 2i+1) of every head
  score_bias,      // (H, P, P) added to each head's logits
};

// One hook's tables for the members of a batch.
struct HookTable {
  // (M, ...) the members' tables stacked (zeros for members without this hook, which a hook
  // whose table stacks must treat as "no effect"); per example under position IDs (model.position_ids),
  // (M, B, ...) for a hook that reads positions. Undefined when no member has the hook, or
  // for a hook whose tables do not stack (members below).
  torch::Tensor stacked;
  // Per member, for a hook whose tables do not stack (content: each scheme's own parameter
  // vector); undefined for members without the hook.
  std::vector<torch::Tensor> members;
  std::vector<uint8_t> used;                // per member: the member acts through this hook
  torch::Tensor used_flags;                 // (M) bool on the tables' device: the same
  std::vector<uint8_t> learned;             // per member: its table depends on parameters
  std::vector<PositionalScheme*> owners;    // per member: the component that makes its table, or null
  bool any_used() const;
  bool any_learned() const;
  // Member m's table: members[m], or stacked[m] (its own rows, or its examples' rows).
  torch::Tensor of(int64_t m) const;
};

// What the LibTorch model hands the hooks at a site. Each hook reads what it needs and
// changes what its site changes (x; q and k; logits).
struct SiteState {
  int64_t block = -1;             // the block (attention sites); -1 at the embedding
  bool per_example = false;       // the tables carry a batch axis (position IDs other than 0..T-1)
  torch::Tensor x;                // embedding: (M, B, T, D), in and out
  torch::Tensor input;            // attention sites: the attention's input ln1(x), (M, B, T, D)
  torch::Tensor q, k;             // (M, B, H, T, Dh): in and out at query_key, read after
  torch::Tensor scores;           // (M, B, H, T, T) q.k / sqrt(Dh), before any hook
  torch::Tensor bias;             // (M, 1|B, H, T, T) the score bias as added (set by the score_bias hook), or undefined
  torch::Tensor logits;           // (M, B, H, T, T): in and out at scores and softmax
  const std::vector<uint8_t>* causal = nullptr;  // per member, on the host
  torch::Tensor causal_flags;                    // (M) bool on the model's device: the same
  // When set, the content hook records its terms here: (M, B, H, T, T), zeros for members
  // without one (positional.json's content term on a probe).
  torch::Tensor* content_out = nullptr;
};

// What a hook's describe() gets for one member: the component that made its table and the
// table at the training context (T positions).
struct HookDescription {
  PositionalScheme& owner;
  torch::Tensor table;            // the member's table (T positions), detached, on the CPU; undefined for content
  int64_t positions = 0;          // T
  bool causal = false;
  // A learned additive table at the start and at each evaluation: (step, (T, D)).
  std::vector<std::pair<int64_t, torch::Tensor>> learned_path;
  // The member's content term on the first probe, per block (H, T, T), when the study
  // recorded one (content hook); empty otherwise.
  std::vector<torch::Tensor> probe_terms;
};

// What a hook's fused-CPU kernel is made from, for one member and one step.
struct CpuHookMaking {
  const float* table = nullptr;   // the member's table, contiguous float32 (P positions for a hook that reads positions)
  int64_t positions = 0;          // P
  const cpu::Shape* shape = nullptr;
  bool causal = false;
  bool wants_grad = false;        // the step returns this table's gradient (the table is learned)
  bool gathers = false;           // position IDs: each example reads its own rows
  PositionalScheme* owner = nullptr;
};

class Hook {
 public:
  virtual ~Hook() = default;
  virtual std::string name() const = 0;  // as positional.json and docs name it
  virtual HookSite site() const = 0;

  // One member's table at P positions; empty for a hook whose tables are not stacked
  // (each member's has its own size: content).
  virtual std::vector<int64_t> table_shape(const EncoderShape& shape, int64_t positions) const = 0;
  bool stacks() const { return !table_shape(EncoderShape{}, 1).empty(); }
  // Whether the table has rows per position, which position IDs gather per example.
  virtual bool reads_positions() const = 0;
  // Position IDs: each example's rows of the stacked tables (M, P, ...) at its
  // positions (M, B, T) int64 -> (M, B, ...). Called only when reads_positions().
  virtual torch::Tensor gather(const torch::Tensor& stacked, const torch::Tensor& positions) const {
    return stacked;
  }

  // Whether it replaces the plain scores q.k / sqrt(Dh) with its own rather than adding to
  // them (polar): such a hook is the first of the scores site, so the logits it replaces are
  // still the plain scores (hook_registry checks), and on the fused CPU step the member's
  // attention skips the plain scores (its CpuHook says so too: CpuHook::replaces_scores).
  virtual bool replaces_scores() const { return false; }

  // The LibTorch model: applies the members' tables at the hook's site.
  virtual void apply(const HookTable& table, SiteState& state) const = 0;

  // The fused CPU step: this member's kernel for one step (model/hooks/cpu_hook.h).
  virtual std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const = 0;

  // The fused GPU step: the form in which its kernel reads this hook's table (above).
  virtual KernelTableForm kernel_form() const { return KernelTableForm::none; }

  // positional.json: what a reader wants of a member's table, added to its entry.
  virtual void describe(const HookDescription& member, nlohmann::json& out) const {}
};

// Every hook, in the order they apply within a site (model/hooks/registry.cpp).
const std::vector<const Hook*>& hook_registry();
// A hook's index in the registry (the index of its table in PositionalTables::hooks).
size_t hook_index(const Hook& hook);

}  // namespace copytask
