#include "model/positional.h"

#include <cmath>

namespace copytask {

torch::Tensor sinusoidal_table(int64_t positions, int64_t embed) {
  auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto position = torch::arange(positions, options).unsqueeze(1);           // (T, 1)
  auto pair = torch::arange(0, embed, 2, options);                          // (D/2) = 2i
  auto angle = position / torch::pow(10000.0, pair / static_cast<double>(embed));  // (T, D/2)
  auto table = torch::zeros({positions, embed}, options);
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)}, torch::sin(angle));
  const int64_t odd = embed / 2;  // an odd embed has one sin column more than cos columns
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                   torch::cos(angle).narrow(1, 0, odd));
  return table.to(torch::kFloat32);
}

torch::Tensor rope_angles(int64_t positions, int64_t head_dim) {
  auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto position = torch::arange(positions, options).unsqueeze(1);                   // (T, 1)
  auto pair = torch::arange(0, head_dim, 2, options);                               // (Dh/2) = 2i
  auto frequency = torch::pow(10000.0, -pair / static_cast<double>(head_dim));      // (Dh/2)
  return (position * frequency).to(torch::kFloat32);                                // (T, Dh/2)
}

torch::Tensor rope_rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto sizes = x.sizes().vec();
  const int64_t head_dim = sizes.back();
  auto pairs_shape = sizes;
  pairs_shape.back() = head_dim / 2;
  pairs_shape.push_back(2);
  auto pairs = x.reshape(pairs_shape);     // (..., T, Dh/2, 2)
  auto a = pairs.select(-1, 0);            // (..., T, Dh/2) components 2i
  auto b = pairs.select(-1, 1);            // (..., T, Dh/2) components 2i+1
  auto rotated = torch::stack({a * cos - b * sin, a * sin + b * cos}, -1);  // (..., T, Dh/2, 2)
  return rotated.reshape(sizes);           // (..., T, Dh)
}

std::vector<double> alibi_slopes(int64_t heads) {
  auto power_of_two_slopes = [](int64_t n) {
    std::vector<double> slopes;
    const double start = std::pow(2.0, -8.0 / static_cast<double>(n));
    for (int64_t h = 0; h < n; ++h) slopes.push_back(std::pow(start, static_cast<double>(h + 1)));
    return slopes;
  };
  const int64_t lower = int64_t{1} << static_cast<int64_t>(std::floor(std::log2(static_cast<double>(heads))));
  std::vector<double> slopes = power_of_two_slopes(lower);
  if (lower != heads) {
    std::vector<double> higher = power_of_two_slopes(2 * lower);
    for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < heads; i += 2) slopes.push_back(higher[i]);
  }
  return slopes;
}

torch::Tensor alibi_bias(int64_t heads, int64_t positions) {
  auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto index = torch::arange(positions, options);
  auto distance = (index.unsqueeze(1) - index.unsqueeze(0)).abs();   // (T, T) |i - j|
  auto slopes = torch::tensor(alibi_slopes(heads), options);         // (H)
  return (-slopes.view({heads, 1, 1}) * distance.unsqueeze(0)).to(torch::kFloat32);  // (H, T, T)
}

PositionalHooks::PositionalHooks(const std::vector<std::string>& positional, int64_t positions, int64_t embed,
                                 int64_t heads, const torch::Device& device) {
  const int64_t members = static_cast<int64_t>(positional.size());
  auto float_options = torch::TensorOptions().dtype(torch::kFloat32);
  auto is = [&](const std::string& name) {
    std::vector<float> flags;
    for (const auto& p : positional) flags.push_back(p == name ? 1.0f : 0.0f);
    return torch::tensor(flags, float_options);  // (M)
  };
  auto sinusoidal = is("sinusoidal"), learned = is("learned"), rope = is("rope"), alibi = is("alibi");

  if (sinusoidal.sum().item<float>() > 0)
    fixed_additive_ = (sinusoidal.view({members, 1, 1, 1}) * sinusoidal_table(positions, embed).view({1, 1, positions, embed}))
                          .to(device);  // (M, 1, T, D)
  any_learned_ = learned.sum().item<float>() > 0;
  learned_mask_ = learned.view({members, 1, 1, 1}).to(device);  // (M, 1, 1, 1)

  const float rope_count = rope.sum().item<float>();
  any_rope_ = rope_count > 0;
  all_rope_ = rope_count == static_cast<float>(members);
  if (any_rope_) {
    auto angles = rope_angles(positions, embed / heads);  // (T, Dh/2)
    rope_cos_ = angles.cos().to(device);
    rope_sin_ = angles.sin().to(device);
    rope_mask_ = rope.to(torch::kBool).view({members, 1, 1, 1, 1}).to(device);
  }
  if (alibi.sum().item<float>() > 0)
    score_bias_ = (alibi.view({members, 1, 1, 1, 1}) * alibi_bias(heads, positions).unsqueeze(0).unsqueeze(0))
                      .to(device);  // (M, 1, H, T, T)
}

torch::Tensor PositionalHooks::additive(const torch::Tensor& learned_table) const {
  torch::Tensor total;
  if (fixed_additive_.defined()) total = fixed_additive_;
  if (any_learned_) {
    auto learned = (learned_table * learned_mask_.squeeze(1)).unsqueeze(1);  // (M, 1, T, D)
    total = total.defined() ? total + learned : learned;
  }
  return total;
}

void PositionalHooks::rotate_qk(torch::Tensor& q, torch::Tensor& k) const {
  if (!any_rope_) return;
  auto q_rotated = rope_rotate(q, rope_cos_, rope_sin_);
  auto k_rotated = rope_rotate(k, rope_cos_, rope_sin_);
  if (all_rope_) {
    q = q_rotated;
    k = k_rotated;
  } else {
    q = torch::where(rope_mask_, q_rotated, q);
    k = torch::where(rope_mask_, k_rotated, k);
  }
}

}  // namespace copytask
