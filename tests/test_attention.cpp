// The hand-written CPU attention layer (model/cpu_layers.h) against the batched-matmul
// formulation the LibTorch model uses (model/attention_core.h): the weights, the mixed
// values and the gradients of q, k, v and the score bias, with a bias, the causal mask and
// dropout, one example of several heads.
#include <gtest/gtest.h>

#include "model/attention_core.h"
#include "model/cpu_layers.h"
#include "test_util.h"

namespace copytask {
namespace {

TEST(AttentionLayer, MatchesTheMatmulFormulationWithBiasCausalMaskAndDropout) {
  const int64_t H = 2, T = 7, Dh = 4, D = H * Dh;
  torch::manual_seed(11);
  for (bool causal : {false, true}) {
    auto qkv = torch::randn({T, 3 * D});                                           // (T, 3D): q | k | v
    auto bias = torch::randn({H, T, T});                                          // (H, T, T)
    auto dropout = (torch::rand({H, T, T}) > 0.3).to(torch::kFloat32) / 0.7;     // (H, T, T)
    auto upstream = torch::randn({T, D});                                         // d(loss)/d(mixed)

    // The matmul formulation: q, k, v as (1, 1, H, T, Dh), the bias (and -inf) as the offset.
    auto leaf_qkv = qkv.clone().requires_grad_(true), leaf_bias = bias.clone().requires_grad_(true);
    auto split = leaf_qkv.view({T, 3, H, Dh}).permute({1, 2, 0, 3});              // (3, H, T, Dh)
    auto offset = leaf_bias;
    if (causal) offset = offset.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), -INFINITY);
    auto out = attention_core_matmul(split[0].view({1, 1, H, T, Dh}), split[1].view({1, 1, H, T, Dh}),
                                     split[2].view({1, 1, H, T, Dh}), offset.view({1, 1, H, T, T}),
                                     dropout.view({1, 1, H, T, T}));
    auto mixed = out.mixed.view({H, T, Dh}).permute({1, 0, 2}).reshape({T, D});  // (T, D)
    (mixed * upstream).sum().backward();

    // The CPU layer on the same numbers.
    auto weights = torch::empty({H, T, T}), ours = torch::empty({T, D});
    auto grad_qkv = torch::empty({T, 3 * D}), grad_bias = torch::zeros({H, T, T});
    std::vector<float> scratch(T + cpu::attention_scratch_floats(T, Dh));
    cpu::attention_forward(qkv.data_ptr<float>(), bias.data_ptr<float>(), causal, dropout.data_ptr<float>(),
                           weights.data_ptr<float>(), ours.data_ptr<float>(), scratch.data(), T, H, Dh);
    cpu::attention_backward(qkv.data_ptr<float>(), weights.data_ptr<float>(), causal, dropout.data_ptr<float>(),
                            upstream.data_ptr<float>(), grad_qkv.data_ptr<float>(), grad_bias.data_ptr<float>(),
                            scratch.data(), T, H, Dh);

    const std::string label = causal ? "causal" : "bidirectional";
    EXPECT_LT(test::max_abs_diff(weights, out.weights.view({H, T, T})), 2e-6) << label;
    EXPECT_LT(test::max_abs_diff(ours, mixed), 2e-5) << label;
    EXPECT_LT(test::max_abs_diff(grad_qkv, leaf_qkv.grad()), 2e-5) << label;
    auto reference_bias_grad = leaf_bias.grad();
    if (causal) reference_bias_grad = reference_bias_grad.masked_fill(torch::ones({T, T}, torch::kBool).triu(1), 0.0);
    EXPECT_LT(test::max_abs_diff(grad_bias, reference_bias_grad), 2e-5) << label;
    EXPECT_GT(grad_bias.abs().max().item<double>(), 1e-3) << label << ": gradients must not be trivially zero";
    if (causal) {
      EXPECT_EQ(weights.triu(1).abs().max().item<double>(), 0.0) << "no weight on later keys";
    }
  }
}

}  // namespace
}  // namespace copytask
