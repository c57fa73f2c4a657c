// sinusoidal (Vaswani et al. 2017): a fixed additive table,
//   PE[p, 2i] = sin(p / 10000^(2i/D)),  PE[p, 2i+1] = cos(p / 10000^(2i/D)).
#include "model/hooks/registry.h"
#include "model/positional.h"

namespace copytask {
namespace {

torch::Tensor sinusoidal_table(int64_t positions, int64_t embed) {
  auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto position = torch::arange(positions, options).unsqueeze(1);                  // (P, 1)
  auto pair = torch::arange(0, embed, 2, options);                                 // (D/2) = 2i
  auto angle = position / torch::pow(10000.0, pair / static_cast<double>(embed));  // (P, D/2)
  return torch::stack({angle.sin(), angle.cos()}, 2).reshape({positions, embed}).to(torch::kFloat32);  // (P, D)
}

class Sinusoidal : public PositionalScheme {
 public:
  using PositionalScheme::PositionalScheme;
  const Hook* hook() const override { return &additive_hook(); }
  torch::Tensor table(int64_t positions) override { return sinusoidal_table(positions, shape_.embed); }
};

}  // namespace

SchemeEntry sinusoidal_scheme() {
  return {"sinusoidal", "fixed sin/cos rows added to the embeddings",
          [](const ModelConfig& model) {
            return model.embed % 2 == 0 ? std::string()
                                        : "needs an even model.embed (sin/cos pairs), got " + std::to_string(model.embed);
          },
          [](const PositionalOptions&, const PositionalShape& shape) { return std::make_shared<Sinusoidal>(shape); }};
}

}  // namespace copytask
