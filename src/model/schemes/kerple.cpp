// kerple (Chi et al. 2022), its logarithmic variant: a bias that falls with the log of the
// distance, two positive parameters per head,
//   bias[h, i, j] = -r1_h log(1 + r2_h |i - j|),   r1 = exp(log_r1), r2 = exp(log_r2) > 0
// both starting at 1. Symmetric in i - j, like ALiBi: it cannot tell left from right.
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {
namespace {

class KerpleLog : public PositionalScheme {
 public:
  explicit KerpleLog(const PositionalShape& shape) : PositionalScheme(shape) {
    log_r1_ = register_parameter("log_r1", torch::zeros({shape.heads}));  // (H)
    log_r2_ = register_parameter("log_r2", torch::zeros({shape.heads}));  // (H)
  }
  const Hook* hook() const override { return &score_bias_hook(); }
  torch::Tensor table(int64_t positions) override {
    auto distance = signed_distances(positions, log_r1_.device()).abs().to(torch::kFloat32);  // (P, P)
    auto r1 = log_r1_.exp().view({-1, 1, 1}), r2 = log_r2_.exp().view({-1, 1, 1});             // (H, 1, 1)
    return -r1 * torch::log1p(r2 * distance);                                                     // (H, P, P)
  }
  std::vector<std::pair<std::string, std::vector<double>>> reported_values() override {
    return {{"r1", host_values(log_r1_.detach().exp())}, {"r2", host_values(log_r2_.detach().exp())}};
  }

 private:
  torch::Tensor log_r1_, log_r2_;
};

}  // namespace

SchemeEntry kerple_scheme() {
  return {"kerple", "KERPLE's logarithmic bias -r1 log(1 + r2 |i - j|), r1 and r2 learned per head",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions&, const PositionalShape& shape) { return std::make_shared<KerpleLog>(shape); }};
}

}  // namespace copytask
