#include "model/positional_hooks.h"

#include <algorithm>
#include <stdexcept>

namespace copytask {

PositionalHooks::PositionalHooks(const std::vector<std::string>& positional, int64_t positions, int64_t embed,
                                 int64_t heads, const torch::Device& device) {
  const int64_t M = static_cast<int64_t>(positional.size()), T = positions, D = embed, H = heads;
  std::vector<std::unique_ptr<PositionalScheme>> schemes;
  for (const auto& name : positional) {
    auto scheme = positional_scheme(name, T, D / H, device);
    if (!scheme) throw std::invalid_argument("unknown positional scheme '" + name + "'");
    schemes.push_back(std::move(scheme));
  }

  // Hook 1: fixed tables stacked per member (zeros for the others); learned rows masked.
  std::vector<torch::Tensor> fixed(M);
  std::vector<float> learned(M, 0.0f);
  bool any_fixed = false, any_learned = false;
  for (int64_t m = 0; m < M; ++m) {
    fixed[m] = schemes[m]->additive(T, D);
    any_fixed = any_fixed || fixed[m].defined();
    if (!fixed[m].defined()) fixed[m] = torch::zeros({T, D});
    learned[m] = schemes[m]->adds_learned_table() ? 1.0f : 0.0f;
    any_learned = any_learned || schemes[m]->adds_learned_table();
  }
  if (any_fixed) fixed_additive_ = torch::stack(fixed).unsqueeze(1).to(device);        // (M, 1, T, D)
  if (any_learned) learned_mask_ = torch::tensor(learned).view({M, 1, 1}).to(device);  // (M, 1, 1)

  // Hook 2: one rotation per rotating scheme, applied to the members that use it.
  for (int64_t m = 0; m < M; ++m) {
    if (!schemes[m]->rotates_qk()) continue;
    bool seen = false;
    for (const auto& rotation : rotations_) seen = seen || rotation.scheme->name() == positional[m];
    if (seen) continue;
    std::vector<int64_t> uses(M);
    for (int64_t n = 0; n < M; ++n) uses[n] = positional[n] == positional[m] ? 1 : 0;
    Rotation rotation;
    rotation.scheme = positional_scheme(positional[m], T, D / H, device);
    rotation.members = torch::tensor(uses).to(torch::kBool).view({M, 1, 1, 1, 1}).to(device);  // (M, 1, 1, 1, 1)
    rotation.all_members = std::all_of(uses.begin(), uses.end(), [](int64_t u) { return u == 1; });
    rotations_.push_back(std::move(rotation));
  }

  // Hook 2 as numbers: each member's pair rotation angles (zeros: no rotation).
  pair_rotation_angles_ = torch::zeros({M, T, (D / H) / 2});  // (M, T, Dh/2)
  rotating_members_.assign(M, false);
  for (int64_t m = 0; m < M; ++m) {
    if (!schemes[m]->rotates_qk()) continue;
    rotating_members_[m] = true;
    auto angles = schemes[m]->pair_rotation_angles(T, D / H);  // (T, Dh/2)
    if (angles.defined()) pair_rotation_angles_[m].copy_(angles);
    else pair_rotations_only_ = false;
  }

  // Hook 3: score biases stacked per member (zeros for the others).
  std::vector<torch::Tensor> bias(M);
  bool any_bias = false;
  for (int64_t m = 0; m < M; ++m) {
    bias[m] = schemes[m]->score_bias(H, T);
    any_bias = any_bias || bias[m].defined();
    if (!bias[m].defined()) bias[m] = torch::zeros({H, T, T});
  }
  if (any_bias) score_bias_ = torch::stack(bias).unsqueeze(1).to(device);  // (M, 1, H, T, T)
}

torch::Tensor PositionalHooks::additive(const torch::Tensor& learned_table) const {
  torch::Tensor total = fixed_additive_;
  if (learned_mask_.defined()) {
    auto learned = (learned_table * learned_mask_).unsqueeze(1);  // (M, 1, T, D)
    total = total.defined() ? total + learned : learned;
  }
  return total;
}

void PositionalHooks::rotate_qk(torch::Tensor& q, torch::Tensor& k) const {
  for (const auto& rotation : rotations_) {
    auto q_rotated = q, k_rotated = k;
    rotation.scheme->rotate_qk(q_rotated, k_rotated);
    if (rotation.all_members) {
      q = q_rotated;
      k = k_rotated;
    } else {
      q = torch::where(rotation.members, q_rotated, q);
      k = torch::where(rotation.members, k_rotated, k);
    }
  }
}

}  // namespace copytask
