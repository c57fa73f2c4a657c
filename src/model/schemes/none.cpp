// none: no positional information. Without a causal mask the model sees its input as an
// unordered set (every output is a function of the token and the bag of all tokens).
#include "model/positional.h"

namespace copytask {
namespace {

class NoPositions : public PositionalScheme {
 public:
  using PositionalScheme::PositionalScheme;
  PositionalHook hook() const override { return PositionalHook::none; }
  torch::Tensor table(int64_t) override { return {}; }
};

}  // namespace

SchemeEntry none_scheme() {
  return {"none", "no positional information",
          [](const PositionalOptions&, int64_t, int64_t) { return std::string(); },
          [](const PositionalOptions&, const PositionalShape& shape) { return std::make_shared<NoPositions>(shape); }};
}

}  // namespace copytask
