#pragma once
// Positional schemes as modules (DESIGN.md section 2). A scheme owns its parameters (none,
// a table, per-head slopes, a small MLP) and produces from them the table of exactly one
// hook, for one member:
//   additive    (P, D)       rows added to the token embeddings       sinusoidal, learned
//   rotation    (P, Dh/2)    angles turning the pairs (2i, 2i+1)      rope
//                            of q and k
//   score_bias  (H, P, P)    added to the attention scores            alibi, t5, dynamic,
//                            (row = query position, column = key)     kerple, fire
// The training step takes the tables as inputs and returns their gradients; a scheme's
// parameters get theirs by autograd through table(). So the model and the hand-written
// CPU step never know a scheme by name. The causal mask is not a scheme: the attention
// applies it after the score bias.
//
// A new scheme: one file in src/model/schemes/ (a PositionalScheme subclass and the
// function returning its SchemeEntry) and one line in src/model/schemes/registry.cpp.
//
// Shapes: P positions, D embed, H heads, Dh = D / H.
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "config/config.h"

namespace at {
struct Generator;
}

namespace copytask {

enum class PositionalHook { none, additive, rotation, score_bias };

// What a scheme is built for: its table covers positions 0 .. positions-1 (a learned table
// has that many rows; the others compute any length).
struct PositionalShape {
  int64_t positions = 10, embed = 20, heads = 1;
  int64_t head_dim() const { return embed / heads; }
};

class PositionalScheme : public torch::nn::Module {
 public:
  explicit PositionalScheme(PositionalShape shape) : shape_(shape) {}
  virtual PositionalHook hook() const = 0;

  // The hook's table for positions 0 .. positions-1, differentiable in the parameters:
  // additive (P, D), rotation angles (P, Dh/2), score bias (H, P, P); float32.
  virtual torch::Tensor table(int64_t positions) = 0;

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

  // True when the table depends on parameters (so the step must return its gradient).
  bool learned() { return !parameters().empty(); }
  const PositionalShape& shape() const { return shape_; }

 protected:
  PositionalShape shape_;
};

// One scheme of the registry: its name (as in model.positional), a line saying what it is,
// why a config cannot run it ("" when it can) and how to build it.
struct SchemeEntry {
  std::string name;
  std::string summary;
  std::function<std::string(const PositionalOptions&, int64_t embed, int64_t heads)> incompatibility;
  std::function<std::shared_ptr<PositionalScheme>(const PositionalOptions&, const PositionalShape&)> make;
};

// Every scheme, in the order the command line lists them (src/model/schemes/registry.cpp).
const std::vector<SchemeEntry>& positional_registry();
const std::vector<std::string>& positional_names();
// Gives config (config/scheme_rules.h) the names and incompatibility rules of the registry,
// which it checks configs against; call once at the start of a program, before any config
// is read.
void positional_rules_install();
// The entry of a name; nullptr for an unknown one.
const SchemeEntry* positional_entry(const std::string& name);
// The scheme of a name with its options; throws std::invalid_argument for an unknown name.
std::shared_ptr<PositionalScheme> positional_scheme_make(const std::string& name, const PositionalOptions& options,
                                                         const PositionalShape& shape);

// ALiBi's slopes by the paper's rule: the geometric sequence 2^(-8/H), 2^(-16/H), ..., and
// for H not a power of two the slopes of the next lower power of two, then every other
// slope of the next higher one.
std::vector<double> alibi_paper_slopes(int64_t heads);

// Rotates the pairs (2i, 2i+1) of the last axis of x (..., P, Dh) by the angles'
// cos and sin (..., P, Dh/2), which broadcast against it.
torch::Tensor rotate_pairs(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace copytask
