#pragma once
// The positional hooks of a batch of members, each member with its own scheme: every
// hook's per-member tensors stacked once, so one forward pass serves all members.
//
// Shapes: M members, B batch, H heads, T positions, D embed, Dh = D / H.
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "model/positional.h"

namespace copytask {

class PositionalHooks {
 public:
  PositionalHooks(const std::vector<std::string>& positional_per_member, int64_t positions, int64_t embed,
                  int64_t heads, const torch::Device& device);

  // What to add to the token embeddings: (M, 1, T, D), or undefined when no member has an
  // additive hook. learned_table: (M, T, D), each member's learned rows.
  torch::Tensor additive(const torch::Tensor& learned_table) const;

  // q, k: (M, B, H, T, Dh); rotated for the members whose scheme rotates, as they are for the others.
  void rotate_qk(torch::Tensor& q, torch::Tensor& k) const;

  // (M, 1, H, T, T) added to the scores, or undefined when no member has a score bias.
  const torch::Tensor& score_bias() const { return score_bias_; }

 private:
  struct Rotation {
    std::unique_ptr<PositionalScheme> scheme;
    torch::Tensor members;  // (M, 1, 1, 1, 1) bool: the members that use it
    bool all_members = false;
  };
  torch::Tensor fixed_additive_;  // (M, 1, T, D), zeros for members without a fixed table
  torch::Tensor learned_mask_;    // (M, 1, 1): 1 for members that add their learned table
  std::vector<Rotation> rotations_;
  torch::Tensor score_bias_;      // (M, 1, H, T, T)
};

}  // namespace copytask
