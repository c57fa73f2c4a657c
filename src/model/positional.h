#pragma once
// Positional schemes (DESIGN.md section 2). Each scheme uses one of three hooks:
//   additive(T)      (T, D)     added to the token embeddings   sinusoidal, learned
//   rotate_qk(q, k)  (.., T, Dh) q and k rotated before q.k      rope
//   score_bias(T)    (H, T, T)  added to the attention scores   alibi
// The causal mask is not a scheme: the encoder applies it after the score bias.
//
// Shapes: M members, B batch, T positions, D embed, H heads, Dh = D / H.
#include <string>
#include <vector>

#include <torch/types.h>

namespace copytask {

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

// The hooks of a batch of members, each with its own scheme, precomputed on `device`.
class PositionalHooks {
 public:
  PositionalHooks(const std::vector<std::string>& positional_per_member, int64_t positions, int64_t embed,
                  int64_t heads, const torch::Device& device);

  // What to add to the token embeddings: (M, 1, T, D), or an undefined tensor when no
  // member uses an additive scheme. learned_table: (M, T, D), each member's learned rows.
  torch::Tensor additive(const torch::Tensor& learned_table) const;

  // q, k: (M, B, H, T, Dh); rotated for the RoPE members, unchanged for the others.
  void rotate_qk(torch::Tensor& q, torch::Tensor& k) const;

  // (M, 1, H, T, T) added to the scores, or undefined when no member has a score bias.
  const torch::Tensor& score_bias() const { return score_bias_; }

  bool any_learned() const { return any_learned_; }

 private:
  torch::Tensor fixed_additive_;  // (M, 1, T, D) sinusoidal rows (zeros for other members)
  torch::Tensor learned_mask_;    // (M, 1, T, 1) 1 for learned members, 0 otherwise
  torch::Tensor rope_cos_, rope_sin_;  // (T, Dh/2)
  torch::Tensor rope_mask_;       // (M, 1, 1, 1, 1) bool, true for RoPE members
  torch::Tensor score_bias_;      // (M, 1, H, T, T)
  bool any_learned_ = false, any_rope_ = false, all_rope_ = false;
};

}  // namespace copytask
