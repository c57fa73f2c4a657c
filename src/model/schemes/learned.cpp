// learned: a table of R rows added to the embeddings, one learned row per position. R is
// model.learned_positions (the training context T unless more are asked for, so that
// length generalization can evaluate longer contexts). The first T rows start from the
// member's N(0, 1) position draw (as nn.Embedding would); rows beyond T, N(0, 1) from the
// scheme's own stream, are never trained, and results say so.
#include <algorithm>

#include <ATen/core/Generator.h>

#include "model/hooks/registry.h"
#include "model/positional.h"

namespace copytask {
namespace {

class LearnedTable : public PositionalScheme {
 public:
  LearnedTable(const PositionalShape& shape, int64_t rows) : PositionalScheme(shape) {
    table_ = register_parameter("table", torch::zeros({std::max(rows, shape.positions), shape.embed}));  // (R, D)
  }
  const Hook* hook() const override { return &additive_hook(); }
  torch::Tensor table(int64_t positions) override {
    TORCH_CHECK(positions <= table_.size(0), "the learned table has ", table_.size(0), " rows, not ", positions,
                "; set model.learned_positions to at least ", positions);
    return table_.narrow(0, 0, positions);  // (P, D)
  }
  int64_t position_limit() const override { return table_.size(0); }
  void init(const torch::Tensor& position_draw, at::Generator& generator) override {
    torch::NoGradGuard no_grad;
    const int64_t trained_rows = position_draw.size(0);
    table_.narrow(0, 0, trained_rows).copy_(position_draw);
    // Only drawn when there are extra rows, so the default table starts exactly as before.
    if (table_.size(0) > trained_rows) table_.narrow(0, trained_rows, table_.size(0) - trained_rows).normal_(0.0, 1.0, generator);
  }

 private:
  torch::Tensor table_;
};

}  // namespace

SchemeEntry learned_scheme() {
  return {"learned", "a learned row per position added to the embeddings",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<LearnedTable>(shape, learned_rows(options, shape.positions));
          }};
}

}  // namespace copytask
