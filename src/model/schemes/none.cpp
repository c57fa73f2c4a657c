// none: no positional information. Without a causal mask the model sees its input as an
// unordered set (every output is a function of the token and the bag of all tokens).
#include "model/positional.h"

namespace copytask {
namespace {

class NoPositions : public PositionalScheme {
 public:
  using PositionalScheme::PositionalScheme;
};

}  // namespace

SchemeEntry none_scheme() {
  return {"none", "no positional information",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions&, const PositionalShape& shape) { return std::make_shared<NoPositions>(shape); }};
}

}  // namespace copytask
