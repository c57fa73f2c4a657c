// The hand-written CPU attention kernel against the straightforward batched-matmul
// formulation: outputs, weights and the gradients of q, k and v, with and without a score
// offset (ALiBi bias plus causal -inf) and dropout.
#include <gtest/gtest.h>

#include "model/attention_core.h"
#include "model/positional.h"
#include "test_util.h"

namespace copytask {
namespace {

struct Grads {
  torch::Tensor mixed, weights, q, k, v;
};

Grads run_core(bool cpu_kernel, const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0,
               const torch::Tensor& offset, const torch::Tensor& dropout, const torch::Tensor& upstream) {
  auto q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true), v = v0.clone().requires_grad_(true);
  AttentionOutput out = cpu_kernel ? attention_core_cpu(q, k, v, offset, dropout)
                                   : attention_core_matmul(q, k, v, offset, dropout);
  (out.mixed * upstream).sum().backward();
  return {out.mixed.detach(), out.weights, q.grad(), k.grad(), v.grad()};
}

void expect_same(const Grads& a, const Grads& b, const std::string& label) {
  const double tolerance = 2e-5;
  EXPECT_LT(test::max_abs_diff(a.mixed, b.mixed), tolerance) << label;
  EXPECT_LT(test::max_abs_diff(a.weights, b.weights), tolerance) << label;
  EXPECT_LT(test::max_abs_diff(a.q, b.q), tolerance) << label;
  EXPECT_LT(test::max_abs_diff(a.k, b.k), tolerance) << label;
  EXPECT_LT(test::max_abs_diff(a.v, b.v), tolerance) << label;
  EXPECT_GT(a.q.abs().max().item<double>(), 1e-3) << label << ": gradients must not be trivially zero";
}

TEST(AttentionKernel, MatchesTheMatmulFormulation) {
  const int64_t M = 3, B = 5, H = 2, T = 7, Dh = 4;
  torch::manual_seed(11);
  auto q = torch::randn({M, B, H, T, Dh}), k = torch::randn({M, B, H, T, Dh}), v = torch::randn({M, B, H, T, Dh});
  auto upstream = torch::randn({M, B, H, T, Dh});

  expect_same(run_core(true, q, k, v, {}, {}, upstream), run_core(false, q, k, v, {}, {}, upstream), "plain");

  // Member 0 plain, member 1 ALiBi, member 2 ALiBi + causal.
  auto offset = torch::zeros({M, 1, H, T, T});
  offset[1][0].copy_(alibi_bias(H, T));
  offset[2][0].copy_(alibi_bias(H, T).masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -INFINITY));
  auto dropout = (torch::rand({M, B, H, T, T}) > 0.3).to(torch::kFloat32) / 0.7;
  const Grads fused = run_core(true, q, k, v, offset, dropout, upstream);
  expect_same(fused, run_core(false, q, k, v, offset, dropout, upstream), "offset and dropout");
  // The causal member puts no weight on later positions.
  EXPECT_EQ(fused.weights[2].triu(1).abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace copytask
