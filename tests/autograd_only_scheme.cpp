#include "autograd_only_scheme.h"

#include <memory>

#include <torch/torch.h>

#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask::test {
namespace {

class SqrtBias : public PositionalScheme {
 public:
  explicit SqrtBias(const PositionalShape& shape) : PositionalScheme(shape) {
    log_w_ = register_parameter("log_w", torch::zeros({shape.heads}));  // (H)
  }
  const Hook* hook() const override { return &score_bias_hook(); }
  torch::Tensor table(int64_t positions) override {
    auto distance = signed_distances(positions, log_w_.device()).abs().sqrt().to(torch::kFloat32);  // (P, P)
    return -log_w_.exp().view({-1, 1, 1}) * distance;                                                // (H, P, P)
  }

 private:
  torch::Tensor log_w_;
};

}  // namespace

void autograd_only_scheme_register() {
  SchemeEntry entry{kAutogradOnlyScheme, "test only: -w sqrt|i - j|, w learned per head; no fused CPU kernel",
                    [](const ModelConfig&) { return std::string(); },
                    [](const PositionalOptions&, const PositionalShape& shape) { return std::make_shared<SqrtBias>(shape); }};
  entry.steps = kAutogradStep | kDeviceStep;
  positional_scheme_register(std::move(entry));
}

bool is_test_only_scheme(const std::string& name) { return name == kAutogradOnlyScheme; }

}  // namespace copytask::test
