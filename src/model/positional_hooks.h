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

  // The hooks as numbers, for kernels that apply them by hand (model/fused_cpu.h):
  // fixed tables (M, 1, T, D) or undefined; learned flags (M, 1, 1) or undefined; each
  // member's pair rotation angles (M, T, Dh/2), zero for members that do not rotate, and
  // which members rotate. pair_rotations_only() is false when some member's rotation is
  // not a pair rotation (the kernel cannot apply it).
  const torch::Tensor& fixed_additive() const { return fixed_additive_; }
  const torch::Tensor& learned_mask() const { return learned_mask_; }
  const torch::Tensor& pair_rotation_angles() const { return pair_rotation_angles_; }
  const std::vector<bool>& rotating_members() const { return rotating_members_; }
  bool pair_rotations_only() const { return pair_rotations_only_; }

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
  torch::Tensor pair_rotation_angles_;  // (M, T, Dh/2) on the CPU
  std::vector<bool> rotating_members_;
  bool pair_rotations_only_ = true;
};

}  // namespace copytask
