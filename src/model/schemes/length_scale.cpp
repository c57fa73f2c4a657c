// length_scale (option model.length_scale; Nakanishi 2025, "Scalable-Softmax Is Superior for
// Attention"): each block's attention logits, row by row, times
//   s[l, h] ln(n_i),   n_i = the keys query i sees (i + 1 causal, T otherwise)
// through the softmax_scale hook, so the attention stays as sharp over longer contexts as
// the training context made it. s is learned per block and head, starting at
// 1 / ln(task.context): a bidirectional model starts as the plain softmax at its trained
// context. Valid with every scheme. Parameter: scale (L, H), positional.length_scale.scale.
#include <cmath>

#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {
namespace {

class LengthScale : public PositionalScheme {
 public:
  explicit LengthScale(const PositionalShape& shape) : PositionalScheme(shape) {
    const double start = 1.0 / std::log(static_cast<double>(std::max<int64_t>(2, shape.positions)));
    scale_ = register_parameter("scale", torch::full({shape.blocks, shape.heads}, start));  // (L, H)
  }
  const Hook* hook() const override { return &softmax_scale_hook(); }
  torch::Tensor table(int64_t) override { return scale_; }  // (L, H)
  std::vector<std::pair<std::string, std::vector<double>>> reported_values() override {
    return {{"length_scale", host_values(scale_)}};
  }

 private:
  torch::Tensor scale_;
};

}  // namespace

OptionEntry length_scale_option() {
  return {"length_scale", "scalable softmax: each block's logits times s log(keys seen), s learned per block and head",
          [](const PositionalOptions& options) { return options.length_scale; },
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions&, const PositionalShape& shape) { return std::make_shared<LengthScale>(shape); },
          kEveryStep,
          // the scaled logits (B, H, T, T)
          [](const ModelConfig& model, double T) { return static_cast<double>(model.blocks * model.heads) * T * T; }};
}

}  // namespace copytask
