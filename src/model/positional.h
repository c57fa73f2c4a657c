#pragma once
// Positional schemes as modules (docs/design.md section 2). A scheme owns its parameters
// (none, a table, per-head slopes, a small MLP, per-block embeddings) and makes from them
// the tables of the hooks it acts through (model/hooks/hook.h), for one member:
//   additive       (P, D)          rows added to the token embeddings       sinusoidal, learned
//   rotation       (P, Dh/2)       angles turning the pairs (2i, 2i+1)      rope, xpos
//                                  of q and k
//   qk_scale       (2, P, Dh/2)    log-scales of q's and k's pairs          xpos
//   polar          (2, H, P, Dh)   phases of q and k; the polar score       pope
//                                  replaces q.k / sqrt(Dh)
//   score_bias     (H, P, P)       added to the attention scores            alibi, t5, dynamic,
//                                  (row = query position, column = key)     kerple, fire
//   content        (its own)       a term of each block's scores from its   cope, fox, the dape
//                                  q, k, scores or input (the parameters)   option
//   softmax_scale  (L, H)          the logits times s log(keys seen)        the length_scale option
// The training step takes the tables as inputs and returns their gradients; a scheme's
// parameters get theirs by autograd through its tables. So the model and the hand-written
// CPU step never know a scheme by name. The causal mask is not a scheme: the attention
// applies it last.
//
// A member's positional is its scheme (model.positional) with the options attached to it
// (model.dape, model.length_scale): each option is a module of its own, registered as a
// sub-module of the scheme, so the member's parameters are the scheme's own ("table",
// "log_slopes", ...) and the options' ("dape.weight1", "length_scale.scale").
//
// A new scheme: one file in src/model/schemes/ (a PositionalScheme subclass and the function
// returning its SchemeEntry) and one line in src/model/schemes/registry.cpp
// (docs/adding-a-scheme.md).
//
// Shapes: P positions, D embed, H heads, Dh = D / H, L blocks.
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "config/config.h"
#include "config/scheme_rules.h"
#include "config/step_support.h"
#include "model/hooks/hook.h"

namespace at {
struct Generator;
}

namespace copytask {

class ContentScore;

// What a scheme is built for: its table covers positions 0 .. positions-1 (a learned table
// has that many rows; the others compute any length), the model's sizes and causal flag.
struct PositionalShape {
  int64_t positions = 10, embed = 20, heads = 1, blocks = 2;
  bool causal = false;
  int64_t head_dim() const { return embed / heads; }
};

// RoPE's rescalings for evaluation beyond the trained lengths (eval.rope_rescaling):
// method "" (none), "pi", "ntk" or "yarn", with factor s >= 1; trained_context is the
// context the member trained at (YaRN's ramp reads it).
struct RopeRescaling {
  std::string method;
  double factor = 1;
  int64_t trained_context = 0;
  bool active() const { return !method.empty(); }
};

class PositionalScheme : public torch::nn::Module {
 public:
  explicit PositionalScheme(PositionalShape shape) : shape_(shape) {}

  // The hooks it acts through: most schemes one (hook()), xpos two, none none.
  virtual std::vector<const Hook*> hooks() const {
    const Hook* one = hook();
    return one ? std::vector<const Hook*>{one} : std::vector<const Hook*>{};
  }
  virtual const Hook* hook() const { return nullptr; }

  // The table of one of its hooks for positions 0 .. positions-1, differentiable in the
  // parameters, float32, of the hook's shape (model/hooks/hook.h). A one-hook scheme
  // overrides table(positions); a scheme of several hooks overrides both, table(positions)
  // giving its first hook's.
  virtual torch::Tensor table(const Hook& hook, int64_t positions) { return table(positions); }
  virtual torch::Tensor table(int64_t positions) { return {}; }

  // A scheme on the content hook: its term (model/hooks/content_score.h); null otherwise.
  virtual const ContentScore* content_score() const { return nullptr; }

  // The most positions table() can cover: a learned table's rows; the others compute any
  // length (length generalization asks them for contexts they never trained at).
  virtual int64_t position_limit() const { return std::numeric_limits<int64_t>::max(); }

  // Draws the parameters' starting values from the member's own randomness: position_draw
  // is the (T, D) N(0, 1) draw every member makes in the model's fixed order (the learned
  // table starts from it, so seed s starts from the same weights under every scheme);
  // generator is the member's stream for everything else a scheme draws.
  virtual void init(const torch::Tensor& position_draw, at::Generator& generator) {}

  // Values a reader wants in positional.json, read off the current parameters
  // (e.g. {"slopes", [...]}); none by default.
  virtual std::vector<std::pair<std::string, std::vector<double>>> reported_values() { return {}; }

  // Device tensors the scheme keeps between calls and its tables read (T5's bucket index per
  // P). A captured CUDA graph reads them at their addresses, so a scheme never frees or
  // replaces one while the scheme lives: a table of another size gets another tensor.
  virtual std::vector<torch::Tensor> kept_tensors() const { return {}; }

  // Evaluation beyond the trained lengths with RoPE's rescalings: a scheme that rotates q
  // and k makes its tables rescaled until called again with an inactive one. Others ignore it.
  virtual void rescale_for_evaluation(const RopeRescaling& rescaling) {}
  // Why this scheme cannot take a rescaling ("" when it can; asked of schemes that rotate).
  virtual std::string rescaling_problem(const RopeRescaling& rescaling) const { return ""; }

  // True when its own tables depend on parameters (so the step must return their
  // gradients); an attached option's parameters are the option's.
  bool learned() { return !parameters(/*recurse=*/false).empty(); }
  const PositionalShape& shape() const { return shape_; }

  // ---- The member's positional: this scheme with its options attached -------------------
  // Attaches an option (DAPE, the length scale) as the sub-module `name`.
  void attach(const std::string& name, std::shared_ptr<PositionalScheme> option);
  // This scheme, then its options.
  std::vector<PositionalScheme*> components();
  // The component that makes `hook`'s table, or null when the member lacks the hook.
  PositionalScheme* owner_of(const Hook& hook);
  // Every hook of the member, in the registry's order.
  std::vector<const Hook*> member_hooks();
  // Whether `hook`'s table depends on parameters (its owner has some).
  bool learned_for(const Hook& hook);

 protected:
  PositionalShape shape_;

 private:
  std::vector<std::shared_ptr<PositionalScheme>> options_;
};


// One scheme of the registry: its name (as in model.positional), a line saying what it is,
// why a model config cannot run it ("" when it can), the steps that can run it, and how to
// build it.
struct SchemeEntry {
  std::string name;
  std::string summary;
  std::function<std::string(const ModelConfig&)> incompatibility;
  std::function<std::shared_ptr<PositionalScheme>(const PositionalOptions&, const PositionalShape&)> make;
  unsigned steps = kEveryStep;
  // Floats per example its term keeps for autograd's backward beyond the plain model's (a
  // content term's (B, H, T, T) intermediates), for the memory estimate; null: none.
  std::function<double(const ModelConfig&, double T)> activation_floats;
};

// One option that attaches to a scheme (model.dape, model.length_scale): its config key
// (model.<key>), whether a config turns it on, why it cannot run with the config's scheme
// ("" when it can), the steps that can run it, and how to build it.
struct OptionEntry {
  std::string key;
  std::string summary;
  std::function<bool(const PositionalOptions&)> enabled;
  std::function<std::string(const ModelConfig&)> incompatibility;
  std::function<std::shared_ptr<PositionalScheme>(const PositionalOptions&, const PositionalShape&)> make;
  unsigned steps = kEveryStep;
  std::function<double(const ModelConfig&, double T)> activation_floats;  // as SchemeEntry's
};

// Every scheme, in the order the command line lists them, and every option
// (src/model/schemes/registry.cpp).
const std::deque<SchemeEntry>& positional_registry();
const std::vector<OptionEntry>& positional_option_registry();
const std::vector<std::string>& positional_names();
// Adds a scheme beyond the built-in ones: one a program defines for itself (the test
// binary's autograd-only scheme), registered at its start, before positional_rules_install
// and before any other thread runs. Throws std::logic_error for a name already registered.
void positional_scheme_register(SchemeEntry entry);
// Gives config (config/scheme_rules.h) the names and incompatibility rules of the registry,
// which it checks configs against; call once at the start of a program, before any config
// is read.
void positional_rules_install();
// The entry of a name; nullptr for an unknown one.
const SchemeEntry* positional_entry(const std::string& name);
// Whether a model config can run: the scheme's and its options' rules, and the rules every
// scheme shares (position IDs need a scheme that reads positions).
SchemeProblem positional_problem(const ModelConfig& model);
// A member's positional: the scheme of a name with its options, and the options it turns on
// attached; throws std::invalid_argument for an unknown name.
std::shared_ptr<PositionalScheme> positional_scheme_make(const std::string& name, const PositionalOptions& options,
                                                         const PositionalShape& shape);
// The steps that can run a member of this scheme and these options (StepSupport bits).
unsigned positional_steps(const std::string& name, const PositionalOptions& options);
// Floats per example of T positions the scheme and its options keep for autograd beyond the
// plain model's (SchemeEntry::activation_floats), for the memory estimate.
double positional_activation_floats(const ModelConfig& model, double T);

// ALiBi's slopes by the paper's rule: the geometric sequence 2^(-8/H), 2^(-16/H), ..., and
// for H not a power of two the slopes of the next lower power of two, then every other
// slope of the next higher one.
std::vector<double> alibi_paper_slopes(int64_t heads);

// Rotates the pairs (2i, 2i+1) of the last axis of x (..., P, Dh) by the angles'
// cos and sin (..., P, Dh/2), which broadcast against it.
torch::Tensor rotate_pairs(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace copytask
