// learned: a table of P rows added to the embeddings, one learned row per position. It
// starts from the member's N(0, 1) position draw (as nn.Embedding would).
#include <ATen/core/Generator.h>

#include "model/positional.h"

namespace copytask {
namespace {

class LearnedTable : public PositionalScheme {
 public:
  explicit LearnedTable(const PositionalShape& shape) : PositionalScheme(shape) {
    table_ = register_parameter("table", torch::zeros({shape.positions, shape.embed}));  // (P, D)
  }
  PositionalHook hook() const override { return PositionalHook::additive; }
  torch::Tensor table(int64_t positions) override {
    TORCH_CHECK(positions <= table_.size(0), "the learned table has ", table_.size(0), " rows, not ", positions);
    return table_.narrow(0, 0, positions);  // (P, D)
  }
  void init(const torch::Tensor& position_draw, at::Generator&) override {
    torch::NoGradGuard no_grad;
    table_.copy_(position_draw);
  }

 private:
  torch::Tensor table_;
};

}  // namespace

SchemeEntry learned_scheme() {
  return {"learned", "a learned row per position added to the embeddings",
          [](const PositionalOptions&, int64_t, int64_t) { return std::string(); },
          [](const PositionalOptions&, const PositionalShape& shape) { return std::make_shared<LearnedTable>(shape); }};
}

}  // namespace copytask
