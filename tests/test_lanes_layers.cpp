// The row-wise layers across the examples' lanes (model/cpu_lanes_layers.h) give each
// example the numbers of the example-at-a-time layers (model/cpu_layers.h), bit for bit, on
// each compiled variant: the linear layers' forward (with and without a bias) and input
// gradient, and the layer norm's forward and input gradient; and each lane's parameter
// gradients (a weight's, a bias's, a layer norm's) are its example's alone, summed as the
// example-at-a-time layers sum one example's rows, while the lanes past a partial group's
// examples add nothing; and a linear layer whose tiles finish with the pass that followed it
// (the residual addition, ReLU, ReLU's backward) gives the layer's and then the pass's
// numbers. Full and partial groups, widths below, at and past a vector's and the layer
// norm's eight-lane sums.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu_variants.h"
#include "model/cpu_lanes_layers.h"

namespace copytask {
namespace {

class LanesLayersTest : public test::CpuVariantTest {};

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float spread = 1.5f) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> v(static_cast<size_t>(n + cpu::kSlack));
  for (float& x : v) x = normal(rng);
  return v;
}

// Example e's element i of a lanes array against want[e * n + i], bit for bit, for e < count.
::testing::AssertionResult lanes_equal(const std::vector<float>& lanes, const std::vector<float>& want, int64_t n,
                                       int64_t count, const std::string& what) {
  for (int64_t e = 0; e < count; ++e)
    for (int64_t i = 0; i < n; ++i) {
      const float got = lanes[i * cpu::kExampleLanes + e], expected = want[e * n + i];
      if (std::memcmp(&got, &expected, sizeof got) != 0)
        return ::testing::AssertionFailure() << what << ", example " << e << ", element " << i << ": " << got
                                             << " != " << expected;
    }
  return ::testing::AssertionSuccess();
}

TEST_P(LanesLayersTest, LinearLayersGiveTheExampleAtATimeNumbersBitForBit) {
  std::mt19937 rng(11);
  const int64_t L = cpu::kExampleLanes;
  struct Case {
    int64_t T, I, O;
  };
  for (const Case shape : {Case{10, 20, 60}, Case{10, 60, 20}, Case{10, 32, 20}, Case{10, 20, 11}, Case{7, 5, 3},
                           Case{13, 64, 17}})
    for (const int64_t count : {16, 5})
      for (const bool with_bias : {false, true}) {
        const int64_t T = shape.T, I = shape.I, O = shape.O;
        const std::string at = "T " + std::to_string(T) + ", I " + std::to_string(I) + ", O " + std::to_string(O) +
                               ", " + std::to_string(count) + " examples" + (with_bias ? ", bias" : "");
        // The examples' rows one after another; their transposed weights for the input gradient.
        const auto in = random_floats(rng, L * T * I), grad_out = random_floats(rng, L * T * O);
        const auto w = random_floats(rng, I * O), bias = random_floats(rng, O);
        std::vector<float> w_t(static_cast<size_t>(O * I + cpu::kSlack));
        for (int64_t i = 0; i < I; ++i)
          for (int64_t o = 0; o < O; ++o) w_t[o * I + i] = w[i * O + o];
        auto floats = [](int64_t n, float value = 0.0f) { return std::vector<float>(static_cast<size_t>(n), value); };
        // Rows: the group's rows at once, as the step in rows runs them; and each example's
        // parameter gradients alone, from the lanes' starting values.
        auto out = floats(L * T * O), grad_in = floats(L * T * I), grad_w = floats(L * I * O, 0.25f),
             grad_bias = floats(L * O, -0.5f);
        // Lanes.
        auto in_l = floats(L * T * I), grad_out_l = floats(L * T * O), out_l = floats(L * T * O),
             grad_in_l = floats(L * T * I), grad_w_l = floats(L * I * O, 0.25f), grad_bias_l = floats(L * O, -0.5f);
        cpu::on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY {
          using Lanes = decltype(lanes);
          const int64_t rows = count * T;
          cpu::linear_forward<Lanes>(in.data(), w.data(), with_bias ? bias.data() : nullptr, out.data(), rows, I, O);
          std::vector<float> group_grad_w(static_cast<size_t>(I * O));  // (the group's weight gradient: not compared)
          cpu::linear_backward<Lanes>(in.data(), grad_out.data(), w_t.data(), group_grad_w.data(), nullptr,
                                      grad_in.data(), rows, I, O);
          for (int64_t e = 0; e < count; ++e)
            cpu::linear_backward<Lanes>(in.data() + e * T * I, grad_out.data() + e * T * O, w_t.data(),
                                        grad_w.data() + e * I * O, with_bias ? grad_bias.data() + e * O : nullptr,
                                        nullptr, T, I, O);
          cpu::to_lanes<Lanes>(in.data(), T * I, count, T * I, in_l.data());
          cpu::to_lanes<Lanes>(grad_out.data(), T * O, count, T * O, grad_out_l.data());
          cpu::linear_forward_lanes<Lanes>(in_l.data(), w.data(), with_bias ? bias.data() : nullptr, out_l.data(), T,
                                           I, O);
          cpu::linear_input_gradient_lanes<Lanes>(grad_out_l.data(), w_t.data(), grad_in_l.data(), T, I, O);
          cpu::linear_weight_gradient_lanes<Lanes>(in_l.data(), grad_out_l.data(), grad_w_l.data(),
                                                   with_bias ? grad_bias_l.data() : nullptr, T, I, O);
        });
        EXPECT_TRUE(lanes_equal(out_l, out, T * O, count, at + ": forward"));
        EXPECT_TRUE(lanes_equal(grad_in_l, grad_in, T * I, count, at + ": input gradient"));
        // grad_w holds the lanes' start (0.25, -0.5) past the group's examples: they add nothing.
        EXPECT_TRUE(lanes_equal(grad_w_l, grad_w, I * O, L, at + ": weight gradient"));
        EXPECT_TRUE(lanes_equal(grad_bias_l, grad_bias, O, L, at + ": bias gradient"));
      }
}

// A linear layer's tiles finishing with the pass that followed them (the residual addition,
// ReLU forward, ReLU backward; with a dropout mask and without) give the numbers of the
// layer and then the pass, bit for bit: cpu_lanes_layers.h's LanesEpilogue.
TEST_P(LanesLayersTest, LinearLayersFinishedWithTheirPassGiveThePassAfterTheLayerBitForBit) {
  std::mt19937 rng(12);
  const int64_t L = cpu::kExampleLanes;
  struct Case {
    int64_t T, I, O;
  };
  for (const Case shape : {Case{10, 20, 80}, Case{10, 80, 20}, Case{10, 20, 20}, Case{7, 5, 3}, Case{13, 64, 17}})
    for (const bool masked : {false, true}) {
      const int64_t T = shape.T, I = shape.I, O = shape.O;
      const std::string at = "T " + std::to_string(T) + ", I " + std::to_string(I) + ", O " + std::to_string(O) +
                             (masked ? ", masked" : "");
      const auto in_l = random_floats(rng, L * T * I), grad_out_l = random_floats(rng, L * T * O);
      const auto w = random_floats(rng, I * O), bias = random_floats(rng, O);
      const auto x_start = random_floats(rng, L * T * O), pre_l = random_floats(rng, L * T * I);
      std::vector<float> w_t(static_cast<size_t>(O * I + cpu::kSlack));
      for (int64_t i = 0; i < I; ++i)
        for (int64_t o = 0; o < O; ++o) w_t[o * I + i] = w[i * O + o];
      // Dropout's masks: 0 or 1 / (1 - p), a tenth dropped; one for the layer's outputs, one
      // for its inputs.
      auto mask_of = [&](int64_t n) {
        std::bernoulli_distribution dropped(0.1);
        std::vector<float> m(static_cast<size_t>(n + cpu::kSlack));
        for (float& v : m) v = dropped(rng) ? 0.0f : 1.0f / 0.9f;
        return m;
      };
      const auto mask_out = mask_of(L * T * O), mask_in = mask_of(L * T * I);
      const float* m_out = masked ? mask_out.data() : nullptr;
      const float* m_in = masked ? mask_in.data() : nullptr;
      auto floats = [](int64_t n) { return std::vector<float>(static_cast<size_t>(n + cpu::kSlack)); };
      auto y = floats(L * T * O), x_separate = x_start, x_fused = x_start;
      auto relu_separate = floats(L * T * O), pre_fused = floats(L * T * O), relu_fused = floats(L * T * O);
      auto grad_in = floats(L * T * I), grad_pre_separate = floats(L * T * I), grad_pre_fused = floats(L * T * I);
      cpu::on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY {
        using Lanes = decltype(lanes);
        cpu::linear_forward_lanes<Lanes>(in_l.data(), w.data(), bias.data(), y.data(), T, I, O);
        cpu::residual_forward(x_separate.data(), y.data(), m_out, L * T * O);
        cpu::relu_forward(y.data(), m_out, relu_separate.data(), L * T * O);
        cpu::linear_input_gradient_lanes<Lanes>(grad_out_l.data(), w_t.data(), grad_in.data(), T, I, O);
        cpu::relu_backward(pre_l.data(), m_in, grad_in.data(), grad_pre_separate.data(), L * T * I);

        cpu::linear_residual_lanes<Lanes>(in_l.data(), w.data(), bias.data(), m_out, x_fused.data(), T, I, O);
        cpu::linear_relu_lanes<Lanes>(in_l.data(), w.data(), bias.data(), m_out, pre_fused.data(), relu_fused.data(), T,
                                      I, O);
        cpu::linear_input_gradient_relu_lanes<Lanes>(grad_out_l.data(), w_t.data(), pre_l.data(), m_in,
                                                     grad_pre_fused.data(), T, I, O);
      });
      // Every lane: the layouts are the same on both sides.
      auto same = [&](const std::vector<float>& got, const std::vector<float>& want, int64_t n,
                      const std::string& what) -> ::testing::AssertionResult {
        if (std::memcmp(got.data(), want.data(), static_cast<size_t>(n) * sizeof(float)) == 0)
          return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << at << ": " << what << " differs from the pass after the layer";
      };
      EXPECT_TRUE(same(x_fused, x_separate, L * T * O, "the residual addition"));
      EXPECT_TRUE(same(pre_fused, y, L * T * O, "ReLU's pre-activation"));
      EXPECT_TRUE(same(relu_fused, relu_separate, L * T * O, "ReLU's output"));
      EXPECT_TRUE(same(grad_pre_fused, grad_pre_separate, L * T * I, "ReLU's backward"));
      // Not vacuous: the residual addition moved x, ReLU zeroed some outputs.
      EXPECT_NE(std::memcmp(x_fused.data(), x_start.data(), static_cast<size_t>(L * T * O) * sizeof(float)), 0) << at;
      EXPECT_TRUE(std::count(relu_fused.begin(), relu_fused.begin() + L * T * O, 0.0f) > 0) << at;
    }
}

TEST_P(LanesLayersTest, LayerNormGivesTheExampleAtATimeNumbersBitForBit) {
  std::mt19937 rng(12);
  const int64_t L = cpu::kExampleLanes;
  struct Case {
    int64_t T, D;
  };
  for (const Case shape : {Case{10, 20}, Case{10, 64}, Case{3, 5}, Case{9, 8}, Case{17, 27}})
    for (const int64_t count : {16, 5}) {
      const int64_t T = shape.T, D = shape.D;
      const std::string at = "T " + std::to_string(T) + ", D " + std::to_string(D) + ", " + std::to_string(count) +
                             " examples";
      // Rows offset from zero and scaled, so that the mean and variance matter.
      auto x = random_floats(rng, L * T * D, 2.0f);
      for (float& v : x) v += 0.75f;
      const auto weight = random_floats(rng, D), bias = random_floats(rng, D), grad_out = random_floats(rng, L * T * D);
      auto floats = [](int64_t n, float value = 0.0f) { return std::vector<float>(static_cast<size_t>(n), value); };
      // The parameters' gradients: each example's alone (rows), each lane's (lanes).
      auto normalized = floats(L * T * D), rstd = floats(L * T), out = floats(L * T * D), grad_x = floats(L * T * D, 0.5f),
           grad_weight = floats(L * D, 0.125f), grad_bias = floats(L * D, -0.25f),
           scratch = floats(cpu::layernorm_backward_scratch_floats(D));
      auto x_l = floats(L * T * D), normalized_l = floats(L * T * D), rstd_l = floats(L * T), out_l = floats(L * T * D),
           grad_out_l = floats(L * T * D), grad_x_l = floats(L * T * D, 0.5f), grad_weight_l = floats(L * D, 0.125f),
           grad_bias_l = floats(L * D, -0.25f), scratch_l = floats(L * D);
      cpu::on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY {
        using Lanes = decltype(lanes);
        const int64_t rows = count * T;
        cpu::layernorm_forward(x.data(), weight.data(), bias.data(), normalized.data(), rstd.data(), out.data(), rows, D);
        for (int64_t e = 0; e < count; ++e)
          cpu::layernorm_backward(normalized.data() + e * T * D, rstd.data() + e * T, weight.data(),
                                  grad_out.data() + e * T * D, grad_weight.data() + e * D, grad_bias.data() + e * D,
                                  grad_x.data() + e * T * D, T, D, scratch.data());
        cpu::to_lanes<Lanes>(x.data(), T * D, count, T * D, x_l.data());
        cpu::to_lanes<Lanes>(grad_out.data(), T * D, count, T * D, grad_out_l.data());
        cpu::layernorm_forward_lanes<Lanes>(x_l.data(), weight.data(), bias.data(), normalized_l.data(), rstd_l.data(),
                                            out_l.data(), T, D);
        cpu::layernorm_input_gradient_lanes<Lanes>(normalized_l.data(), rstd_l.data(), weight.data(), grad_out_l.data(),
                                                   grad_x_l.data(), T, D, scratch_l.data());
        cpu::layernorm_parameter_gradients_lanes<Lanes>(normalized_l.data(), grad_out_l.data(), grad_weight_l.data(),
                                                        grad_bias_l.data(), T, D);
      });
      EXPECT_TRUE(lanes_equal(normalized_l, normalized, T * D, count, at + ": normalized"));
      EXPECT_TRUE(lanes_equal(rstd_l, rstd, T, count, at + ": 1/std"));
      EXPECT_TRUE(lanes_equal(out_l, out, T * D, count, at + ": output"));
      EXPECT_TRUE(lanes_equal(grad_x_l, grad_x, T * D, count, at + ": input gradient"));
      EXPECT_TRUE(lanes_equal(grad_weight_l, grad_weight, D, L, at + ": weight gradient"));
      EXPECT_TRUE(lanes_equal(grad_bias_l, grad_bias, D, L, at + ": bias gradient"));
    }
}

INSTANTIATE_CPU_VARIANTS(LanesLayersTest);

}  // namespace
}  // namespace copytask
