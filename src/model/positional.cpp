#include "model/positional.h"

#include <cmath>
#include <functional>
#include <map>

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

namespace {

class NoPositions : public PositionalScheme {
 public:
  std::string name() const override { return "none"; }
};

class Sinusoidal : public PositionalScheme {
 public:
  std::string name() const override { return "sinusoidal"; }
  std::string incompatibility(int64_t embed, int64_t) const override {
    return embed % 2 == 0 ? "" : "needs an even model.embed (sin/cos pairs), got " + std::to_string(embed);
  }
  torch::Tensor additive(int64_t positions, int64_t embed) const override { return sinusoidal_table(positions, embed); }
};

class Learned : public PositionalScheme {
 public:
  std::string name() const override { return "learned"; }
  bool adds_learned_table() const override { return true; }
};

class Rope : public PositionalScheme {
 public:
  Rope(int64_t positions, int64_t head_dim, const torch::Device& device) {
    if (positions > 0 && head_dim % 2 == 0) {
      auto angles = rope_angles(positions, head_dim);  // (T, Dh/2)
      cos_ = angles.cos().to(device);
      sin_ = angles.sin().to(device);
    }
  }
  std::string name() const override { return "rope"; }
  std::string incompatibility(int64_t embed, int64_t heads) const override {
    return (embed / heads) % 2 == 0 ? ""
                                    : "needs an even head dimension, but model.embed / model.heads = " +
                                          std::to_string(embed / heads) + "; change model.embed or model.heads";
  }
  bool rotates_qk() const override { return true; }
  void rotate_qk(torch::Tensor& q, torch::Tensor& k) const override {
    q = rope_rotate(q, cos_, sin_);
    k = rope_rotate(k, cos_, sin_);
  }
  torch::Tensor pair_rotation_angles(int64_t positions, int64_t head_dim) const override {
    return rope_angles(positions, head_dim);
  }

 private:
  torch::Tensor cos_, sin_;  // (T, Dh/2)
};

class Alibi : public PositionalScheme {
 public:
  std::string name() const override { return "alibi"; }
  torch::Tensor score_bias(int64_t heads, int64_t positions) const override { return alibi_bias(heads, positions); }
};

using SchemeFactory = std::function<std::unique_ptr<PositionalScheme>(int64_t positions, int64_t head_dim,
                                                                      const torch::Device& device)>;

// Every scheme, by name, in the order of the reference study.
const std::vector<std::pair<std::string, SchemeFactory>>& positional_registry() {
  static const std::vector<std::pair<std::string, SchemeFactory>> registry = {
      {"none", [](int64_t, int64_t, const torch::Device&) { return std::make_unique<NoPositions>(); }},
      {"sinusoidal", [](int64_t, int64_t, const torch::Device&) { return std::make_unique<Sinusoidal>(); }},
      {"learned", [](int64_t, int64_t, const torch::Device&) { return std::make_unique<Learned>(); }},
      {"rope", [](int64_t t, int64_t dh, const torch::Device& d) { return std::make_unique<Rope>(t, dh, d); }},
      {"alibi", [](int64_t, int64_t, const torch::Device&) { return std::make_unique<Alibi>(); }},
  };
  return registry;
}

}  // namespace

std::unique_ptr<PositionalScheme> positional_scheme(const std::string& name, int64_t positions, int64_t head_dim,
                                                    const torch::Device& device) {
  for (const auto& [scheme_name, make] : positional_registry())
    if (scheme_name == name) return make(positions, head_dim, device);
  return nullptr;
}

const std::vector<std::string>& positional_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : positional_registry()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

}  // namespace copytask
