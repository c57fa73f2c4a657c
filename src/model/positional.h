#pragma once
// Positional schemes (DESIGN.md section 2). Each scheme implements one of three hooks and
// leaves the others empty; that is the whole interface:
//   additive(T)      (T, D)        added to the token embeddings    sinusoidal, learned
//   rotate_qk(q, k)  (..., T, Dh)  q and k rotated before q.k       rope
//   score_bias(T)    (H, T, T)     added to the attention scores    alibi
// The causal mask is not a scheme: the encoder applies it after the score bias.
// A new scheme: a class below plus one line in positional_registry() (positional.cpp).
//
// Shapes: T positions, D embed, H heads, Dh = D / H.
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace copytask {

class PositionalScheme {
 public:
  virtual ~PositionalScheme() = default;
  virtual std::string name() const = 0;

  // Why the scheme cannot run with this embed / heads ("" when it can), for the config check.
  virtual std::string incompatibility(int64_t embed, int64_t heads) const { return ""; }

  // Hook 1, fixed: (T, D) added to the embeddings, or undefined.
  virtual torch::Tensor additive(int64_t positions, int64_t embed) const { return {}; }
  // Hook 1, learned: true when the member's learned table (T, D) is added to the embeddings.
  virtual bool adds_learned_table() const { return false; }
  // Hook 2: rotates q and k (..., T, Dh) in place; false when the scheme does not rotate.
  virtual bool rotates_qk() const { return false; }
  virtual void rotate_qk(torch::Tensor& q, torch::Tensor& k) const {}
  // Hook 2 as numbers, for kernels that rotate by hand (model/fused_cpu.h): when the
  // rotation turns each pair (2i, 2i+1) of q and k at position p by an angle, those
  // angles (T, Dh/2); undefined otherwise.
  virtual torch::Tensor pair_rotation_angles(int64_t positions, int64_t head_dim) const { return {}; }
  // Hook 3: (H, T, T) added to the attention scores, or undefined.
  virtual torch::Tensor score_bias(int64_t heads, int64_t positions) const { return {}; }
};

// The scheme of a name (as in model.positional), with its tables for T positions and
// head dimension Dh precomputed on `device`; nullptr for an unknown name.
std::unique_ptr<PositionalScheme> positional_scheme(const std::string& name, int64_t positions, int64_t head_dim,
                                                    const torch::Device& device);

// The names model.positional accepts, in the order of the reference study.
const std::vector<std::string>& positional_names();

// The closed forms the schemes use (tests check them against the formulas).
// PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D)).  -> (T, D)
torch::Tensor sinusoidal_table(int64_t positions, int64_t embed);
// RoPE angles: theta[p, i] = p * 10000^(-2i/Dh), i < Dh/2.  -> (T, Dh/2)
torch::Tensor rope_angles(int64_t positions, int64_t head_dim);
// Rotates pairs (2i, 2i+1) of the last axis by theta[p, i]; x: (..., T, Dh), cos/sin: (T, Dh/2).
torch::Tensor rope_rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
// ALiBi slopes: the paper's geometric sequence 2^(-8/H), 2^(-16/H), ..., and its rule for
// H not a power of two (the slopes of the next lower power of two, then every other
// slope of the next higher one).
std::vector<double> alibi_slopes(int64_t heads);
// bias[h, i, j] = -slope_h * |i - j|.  -> (H, T, T)
torch::Tensor alibi_bias(int64_t heads, int64_t positions);

}  // namespace copytask
