// The hand-written CPU attention layer (model/cpu_layers.h) against the plain batched-matmul
// formulation written below, whose backward autograd gives: the weights, the mixed values
// and the gradients of q, k, v and the score bias, with a bias, the causal mask and dropout,
// one example of several heads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cpu_variants.h"
#include "model/cpu_attention_lanes.h"
#include "model/cpu_layers.h"
#include "test_util.h"

namespace copytask {
namespace {

// softmax(q k^T / sqrt(Dh) + offset) (dropout on the weights) @ v, as batched matmuls:
// q, k, v (M, B, H, T, Dh); offset (M, 1, H, T, T) with -inf where masked, or undefined;
// dropout (M, B, H, T, T) of 0 or 1/(1-p), or undefined. The mixed values (M, B, H, T, Dh)
// and the weights before dropout (M, B, H, T, T, detached).
struct AttentionOutput {
  torch::Tensor mixed, weights;
};
AttentionOutput attention_matmul_reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                           const torch::Tensor& offset, const torch::Tensor& dropout) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-1, -2)) * scale;  // (M, B, H, T, T)
  if (offset.defined()) scores = scores + offset;
  auto weights = torch::softmax(scores, -1);                     // (M, B, H, T, T)
  auto kept = dropout.defined() ? weights * dropout : weights;
  return {torch::matmul(kept, v), weights.detach()};             // (M, B, H, T, Dh)
}

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
    auto out = attention_matmul_reference(split[0].view({1, 1, H, T, Dh}), split[1].view({1, 1, H, T, Dh}),
                                     split[2].view({1, 1, H, T, Dh}), offset.view({1, 1, H, T, T}),
                                     dropout.view({1, 1, H, T, T}));
    auto mixed = out.mixed.view({H, T, Dh}).permute({1, 0, 2}).reshape({T, D});  // (T, D)
    (mixed * upstream).sum().backward();

    // The CPU layer on the same numbers; it takes the dropout mask and gives the weights
    // key-major, (H, T keys, T queries).
    auto weights_key_major = torch::empty({H, T, T}), ours = torch::empty({T, D});
    auto dropout_key_major = dropout.transpose(1, 2).contiguous();
    auto grad_qkv = torch::empty({T, 3 * D}), grad_bias = torch::zeros({H, T, T});
    std::vector<float> scratch(cpu::attention_scratch_floats(T, Dh));
    // The products read up to kSlack floats past q | k | v and the upstream gradient.
    std::vector<float> qkv_data(qkv.data_ptr<float>(), qkv.data_ptr<float>() + qkv.numel());
    std::vector<float> upstream_data(upstream.data_ptr<float>(), upstream.data_ptr<float>() + upstream.numel());
    qkv_data.resize(qkv_data.size() + cpu::kSlack);
    upstream_data.resize(upstream_data.size() + cpu::kSlack);
    cpu::attention_forward<cpu::LanesGeneric>(qkv_data.data(), bias.data_ptr<float>(), causal,
                                              dropout_key_major.data_ptr<float>(), weights_key_major.data_ptr<float>(),
                                              ours.data_ptr<float>(), scratch.data(), T, H, Dh);
    cpu::attention_backward<cpu::LanesGeneric>(qkv_data.data(), weights_key_major.data_ptr<float>(), causal,
                                               dropout_key_major.data_ptr<float>(), upstream_data.data(),
                                               grad_qkv.data_ptr<float>(), grad_bias.data_ptr<float>(), scratch.data(),
                                               T, H, Dh);

    const auto weights = weights_key_major.transpose(1, 2);  // (H, T queries, T keys)
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

// The loss's e^x (cpu::exp_in_place, eight lanes at a time; the softmax takes the same
// cpu::exp_lanes) against the library's, over the whole range it is used in and beyond, with
// a tail that is not a whole vector: within 2 ulp; 0 below -87 and for -inf; NaN stays NaN.
TEST(AttentionLayer, TheVectorExponentialIsWithinTwoUlpOfTheLibrarys) {
  std::vector<float> x;
  for (double v = -87.0; v <= 88.0; v += 0.000731) x.push_back(static_cast<float>(v));
  while (x.size() % 8 != 4) x.push_back(-3.25f);  // a partial last vector, ending in e^0
  x.push_back(0.0f);
  const std::vector<float> input = x;
  cpu::exp_in_place(x.data(), static_cast<int64_t>(x.size()));
  double worst_ulp = 0;
  for (size_t e = 0; e < x.size(); ++e) {
    const double exact = std::exp(static_cast<double>(input[e]));
    const double ulp = std::nextafter(static_cast<float>(exact), INFINITY) - static_cast<float>(exact);
    worst_ulp = std::max(worst_ulp, std::abs(x[e] - exact) / ulp);
  }
  std::printf("  worst error over %zu values in [-87, 88]: %.2f ulp\n", x.size(), worst_ulp);
  EXPECT_LE(worst_ulp, 2.0);
  EXPECT_EQ(x.back(), 1.0f) << "e^0";
  std::vector<float> edges = {-87.5f, -1000.0f, -INFINITY, NAN, 1.0f};
  cpu::exp_in_place(edges.data(), static_cast<int64_t>(edges.size()));
  EXPECT_EQ(edges[0], 0.0f);
  EXPECT_EQ(edges[1], 0.0f);
  EXPECT_EQ(edges[2], 0.0f);
  EXPECT_TRUE(std::isnan(edges[3]));
  EXPECT_NEAR(edges[4], std::exp(1.0f), 3e-7);
}

// The fused CPU step's GELU (cpu::gelu_forward and gelu_backward, eight lanes at a time)
// against x Phi(x) and its slope Phi(x) + x phi(x) computed in double through the library's
// erf and exp, over [-12, 12] with a partial last vector: within 2e-7 (the value) and 3e-7
// (the slope) of max(1, |x|), the vector erf's absolute error being 1.5e-7; the mask
// multiplies both exactly.
TEST(AttentionLayer, TheVectorGeluAndItsSlopeMatchTheirClosedForms) {
  std::vector<float> x;
  for (double v = -12.0; v <= 12.0; v += 0.00137) x.push_back(static_cast<float>(v));
  while (x.size() % 8 != 5) x.push_back(0.75f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> mask(x.size()), ones(x.size(), 1.0f), out(x.size()), masked(x.size()), slope(x.size()),
      masked_slope(x.size());
  for (size_t e = 0; e < x.size(); ++e) mask[e] = e % 3 == 0 ? 0.0f : 1.25f;
  cpu::gelu_forward(x.data(), nullptr, out.data(), n);
  cpu::gelu_forward(x.data(), mask.data(), masked.data(), n);
  cpu::gelu_backward(x.data(), nullptr, ones.data(), slope.data(), n);
  cpu::gelu_backward(x.data(), mask.data(), ones.data(), masked_slope.data(), n);
  double worst_value = 0, worst_slope = 0;
  for (size_t e = 0; e < x.size(); ++e) {
    const double v = x[e], cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    const double scale = std::max(1.0, std::abs(v));
    worst_value = std::max(worst_value, std::abs(out[e] - v * cdf) / scale);
    worst_slope = std::max(worst_slope, std::abs(slope[e] - (cdf + v * pdf)) / scale);
    EXPECT_EQ(masked[e], out[e] * mask[e]) << x[e];
    EXPECT_EQ(masked_slope[e], slope[e] * mask[e]) << x[e];
  }
  std::printf("  worst error over %zu values in [-12, 12]: gelu %.2e, its slope %.2e (relative to max(1, |x|))\n",
              x.size(), worst_value, worst_slope);
  EXPECT_LT(worst_value, 2e-7);
  EXPECT_LT(worst_slope, 3e-7);
}

// The layer norms' sums (cpu::rows_sum, rows_dot, rows_squared_deviation), eight rows at once
// with their lanes transposed, against each row's sum as it is defined: its eight lanes over
// the whole vectors, the lanes added pairwise, ((0 + 4) + (1 + 5)) + ((2 + 6) + (3 + 7)), then
// the last D % 8 terms one at a time; bit for bit, for 1 to 8 rows of a block (a block past
// the last row) and rows with no tail, a tail of four (20 wide) and tails of 1 to 7. Here on
// the generic target (this file's code), whose shuffles are the variants' too.
TEST(LayerNormSums, EightRowsAtOnceEqualEachRowsSumInItsOrder) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  auto lanes_then_tail = [](const float* x, const float* y, float mean, int64_t D, int kind) {
    float lane[8] = {};
    const int64_t full = D / 8 * 8;
    auto term = [&](int64_t d) {
      if (kind == 0) return x[d];
      if (kind == 1) return x[d] * y[d];
      const float deviation = x[d] - mean;
      return deviation * deviation;
    };
    for (int64_t d = 0; d < full; ++d) lane[d % 8] += term(d);
    float sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    for (int64_t d = full; d < D; ++d) sum += term(d);
    return sum;
  };
  int64_t checked = 0;
  for (int64_t D : {4, 7, 8, 13, 16, 20, 23, 31, 64})
    for (int64_t rows = 1; rows <= cpu::kLayerNormRows; ++rows) {
      std::vector<float> x(static_cast<size_t>(rows * D)), y(x.size());
      for (float& v : x) v = uniform(rng);
      for (float& v : y) v = uniform(rng);
      cpu::RowsVec mean{};
      for (int64_t i = 0; i < rows; ++i) mean[i] = uniform(rng);
      const cpu::RowsBlock x_block(x.data(), D, rows), y_block(y.data(), D, rows);
      const cpu::RowsVec sums = cpu::rows_sum(x_block);
      const cpu::RowsVec dots = cpu::rows_dot(x_block, y_block);
      const cpu::RowsVec squares = cpu::rows_squared_deviation(x_block, mean);
      for (int64_t i = 0; i < rows; ++i) {
        const float* x_i = x.data() + i * D;
        const float* y_i = y.data() + i * D;
        ASSERT_EQ(sums[i], lanes_then_tail(x_i, y_i, 0.0f, D, 0)) << "D " << D << " rows " << rows << " row " << i;
        ASSERT_EQ(dots[i], lanes_then_tail(x_i, y_i, 0.0f, D, 1)) << "D " << D << " rows " << rows << " row " << i;
        ASSERT_EQ(squares[i], lanes_then_tail(x_i, y_i, mean[i], D, 2)) << "D " << D << " rows " << rows << " row " << i;
        checked += 3;
      }
    }
  std::printf("  %lld sums, each equal bit for bit\n", static_cast<long long>(checked));
}

// Every product the fused step runs (cpu::matmul, through each variant's tiles: 4 x 3, 5 x 2
// or 10 x 1 vectors on x86-64-v3, up to 5 x 4 and 10 x 2 on x86-64-v4, the generic target's)
// against the element-wise sum it promises: C[r][o] = its start (0, C's value or the bias),
// then one fused multiply-add a k in k's order, bit for bit (the generic target has no FMA:
// there, a product then a sum, as the same expression compiles for this file). Over the
// shapes where the tile choice changes (rows 1 to 12 and the multiples of four, five, eight
// and ten the step uses; one to four vectors a row, full and partial), A read by rows and
// transposed, and C a part of a wider row. A tile that drops a row or column, sums in another order or stores past
// its columns fails here, whatever the training tests' tolerances.
class ProductTest : public test::CpuVariantTest {};

void product_by_variant(CpuVariant variant, const cpu::Product& p) {
#if COPYTASK_CPU_VARIANTS
  if (variant == CpuVariant::x86_64_v4) return cpu::matmul_x86_64_v4(p);
  if (variant == CpuVariant::x86_64_v3) return cpu::matmul_x86_64_v3(p);
#endif
  (void)variant;
  cpu::matmul_generic(p);
}

TEST_P(ProductTest, EveryElementIsItsStartThenOneFusedMultiplyAddAKInOrder) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto filled = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(rng);
    return v;
  };
  const bool fused = GetParam() != CpuVariant::generic;
  int64_t checked = 0;
  for (int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 20, 30, 32, 40})
    for (int64_t K : {1, 10, 20, 33})
      for (int64_t O : {1, 5, 8, 10, 11, 16, 20, 24, 32, 33, 60})
        for (int start = 0; start < 3; ++start)  // 0, C's values, the bias
          for (bool transposed : {false, true}) {
            const int64_t c_row = O + 3;  // C's row is wider than O: columns past O stay as they were
            const auto A = filled(static_cast<size_t>(rows * K));
            auto B = filled(static_cast<size_t>(K * O + cpu::kSlack));
            const auto bias = filled(static_cast<size_t>(O + cpu::kSlack));
            auto C = filled(static_cast<size_t>(rows * c_row + cpu::kSlack));
            const auto before = C;
            const int64_t a_row = transposed ? 1 : K, a_red = transposed ? rows : 1;
            product_by_variant(GetParam(), cpu::Product{A.data(), a_row, a_red, B.data(), O,
                                                        start == 2 ? bias.data() : nullptr, C.data(), c_row, rows, K,
                                                        O, start == 1});
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t o = 0; o < c_row; ++o) {
                const float got = C[r * c_row + o];
                if (o >= O) {
                  ASSERT_EQ(got, before[r * c_row + o]) << "stored past the columns: rows " << rows << " O " << O;
                  continue;
                }
                float sum = start == 0 ? 0.0f : start == 1 ? before[r * c_row + o] : bias[o];
                for (int64_t k = 0; k < K; ++k) {
                  const float a = A[r * a_row + k * a_red], b = B[k * O + o];
                  if (fused) sum = std::fma(a, b, sum);
                  else sum += a * b;
                }
                ASSERT_EQ(got, sum) << "rows " << rows << " K " << K << " O " << O << " start " << start
                                    << (transposed ? " A transposed" : "") << " at (" << r << ", " << o << ")";
                ++checked;
              }
          }
  std::printf("  %lld elements, each equal bit for bit\n", static_cast<long long>(checked));
}

INSTANTIATE_CPU_VARIANTS(ProductTest);

// The attention layer (cpu::attention_forward and attention_backward, its weights key-major)
// through each variant against the element-wise definition it promises, bit for bit: every
// product element its chain of fused multiply-adds over the reduced index in order (a
// product then a sum on the generic target, which has no FMA); the logits q.k scale (+ the
// bias, fused); each query's softmax over its seen keys as its row had taken it: the
// maximum, e^(x - maximum) (cpu::exp_lanes), their sum in the keys' order, each times the
// sum's inverse; backward, the row's sum of w d(weights) a fused multiply-add a key in order,
// d(weights) the upstream product times the dropout mask rounded on its own. Over query
// counts below, at and across the vectors' widths (the last vector of queries overlapping
// the one before), causal or not, with and without the bias and dropout. A softmax vector
// that runs a query in other lanes than its own, a sum in another order, or a multiply
// the compiler contracts where it was not before, fails here.
class AttentionLayerTest : public test::CpuVariantTest {};

TEST_P(AttentionLayerTest, EveryNumberIsItsElementWiseDefinitionBitForBit) {
  const bool fused = GetParam() != CpuVariant::generic;
  auto fma_or = [&](float a, float b, float c) { return fused ? std::fma(a, b, c) : a * b + c; };
  // e^x as the variant compiles it (its polynomial's multiply-adds fused where it has FMA).
  auto exp_of = [](float x) {
    return cpu::on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY { return cpu::exp_lanes(cpu::Vec4{x, 0.0f, 0.0f, 0.0f})[0]; });
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  int64_t checked = 0;
  for (int64_t T : {1, 2, 3, 4, 5, 7, 8, 9, 10, 13, 16, 17, 20})
    for (bool causal : {false, true})
      for (bool with_bias : {false, true})
        for (bool with_dropout : {false, true}) {
          // Dh = 5: a scale that is not a power of two, so a rounded product differs from a fused one.
          const int64_t H = 2, Dh = 5, D = H * Dh;
          const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
          auto filled = [&](int64_t n) {
            std::vector<float> v(static_cast<size_t>(n + cpu::kSlack));
            for (float& x : v) x = normal(rng);
            return v;
          };
          const auto qkv = filled(T * 3 * D), upstream = filled(T * D), bias = filled(H * T * T);
          std::vector<float> mask(static_cast<size_t>(H * T * T));  // query-major: (H, T, T)
          for (float& m : mask) m = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng) < 0.3f ? 0.0f : 1.0f / 0.7f;
          std::vector<float> mask_key_major(mask.size());
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < T; ++i)
              for (int64_t j = 0; j < T; ++j) mask_key_major[(h * T + j) * T + i] = mask[(h * T + i) * T + j];
          std::vector<float> weights(static_cast<size_t>(H * T * T)), mixed(static_cast<size_t>(T * D + cpu::kSlack));
          std::vector<float> grad_qkv(static_cast<size_t>(T * 3 * D)), grad_bias(static_cast<size_t>(H * T * T), 0.5f);
          std::vector<float> scratch(static_cast<size_t>(cpu::attention_scratch_floats(T, Dh)));
          const float* bias_p = with_bias ? bias.data() : nullptr;
          const float* drop_p = with_dropout ? mask_key_major.data() : nullptr;
          cpu::on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY {
            using Lanes = decltype(lanes);
            cpu::attention_forward<Lanes>(qkv.data(), bias_p, causal, drop_p, weights.data(), mixed.data(),
                                          scratch.data(), T, H, Dh);
            cpu::attention_backward<Lanes>(qkv.data(), weights.data(), causal, drop_p, upstream.data(),
                                           grad_qkv.data(), with_bias ? grad_bias.data() : nullptr, scratch.data(), T,
                                           H, Dh);
          });

          // The definition, head by head; q, k, v, g of row r at column d.
          auto q = [&](int64_t r, int64_t h, int64_t d) { return qkv[r * 3 * D + h * Dh + d]; };
          auto k = [&](int64_t r, int64_t h, int64_t d) { return qkv[r * 3 * D + D + h * Dh + d]; };
          auto v = [&](int64_t r, int64_t h, int64_t d) { return qkv[r * 3 * D + 2 * D + h * Dh + d]; };
          auto g = [&](int64_t r, int64_t h, int64_t d) { return upstream[r * D + h * Dh + d]; };
          const std::string at = "T " + std::to_string(T) + (causal ? " causal" : "") + (with_bias ? " bias" : "") +
                                 (with_dropout ? " dropout" : "");
          auto same = [&](float got, float want, const std::string& what) {
            ++checked;
            return std::memcmp(&got, &want, sizeof got) == 0 ? ::testing::AssertionSuccess()
                                                             : ::testing::AssertionFailure()
                                                                   << at << ": " << what << " " << got << " != " << want;
          };
          for (int64_t h = 0; h < H; ++h) {
            std::vector<float> w(static_cast<size_t>(T * T), 0.0f), kept(w.size()), gw(w.size()), gs(w.size(), 0.0f);
            auto seen = [&](int64_t i, int64_t j) { return !causal || j <= i; };
            auto m = [&](int64_t i, int64_t j) { return with_dropout ? mask[(h * T + i) * T + j] : 1.0f; };
            for (int64_t i = 0; i < T; ++i) {
              std::vector<float> logit(static_cast<size_t>(T));
              float row_max = -INFINITY;
              for (int64_t j = 0; j < T; ++j) {
                float score = 0.0f;
                for (int64_t d = 0; d < Dh; ++d) score = fma_or(q(i, h, d), k(j, h, d), score);
                logit[j] = with_bias ? fma_or(score, scale, bias[(h * T + i) * T + j]) : score * scale;
                if (seen(i, j)) row_max = std::max(row_max, logit[j]);
              }
              float total = 0.0f;
              for (int64_t j = 0; j < T; ++j)
                if (seen(i, j)) total += w[i * T + j] = exp_of(logit[j] - row_max);
              const float inverse_total = 1.0f / total;
              for (int64_t j = 0; j < T; ++j) {
                if (seen(i, j)) w[i * T + j] *= inverse_total;
                kept[i * T + j] = with_dropout ? w[i * T + j] * m(i, j) : w[i * T + j];
                ASSERT_TRUE(same(weights[(h * T + j) * T + i], w[i * T + j], "weight"));
              }
            }
            for (int64_t i = 0; i < T; ++i)
              for (int64_t d = 0; d < Dh; ++d) {
                float sum = 0.0f;
                for (int64_t j = 0; j < T; ++j) sum = fma_or(kept[i * T + j], v(j, h, d), sum);
                ASSERT_TRUE(same(mixed[i * D + h * Dh + d], sum, "mixed"));
              }
            for (int64_t i = 0; i < T; ++i) {
              for (int64_t j = 0; j < T; ++j) {
                float sum = 0.0f;
                for (int64_t d = 0; d < Dh; ++d) sum = fma_or(g(i, h, d), v(j, h, d), sum);
                gw[i * T + j] = with_dropout ? sum * m(i, j) : sum;
              }
              float weighted = 0.0f;
              for (int64_t j = 0; j < T; ++j)
                if (seen(i, j)) weighted = fma_or(w[i * T + j], gw[i * T + j], weighted);
              for (int64_t j = 0; j < T; ++j) {
                const float grad_logit = seen(i, j) ? w[i * T + j] * (gw[i * T + j] - weighted) : 0.0f;
                if (with_bias) {
                  ASSERT_TRUE(same(grad_bias[(h * T + i) * T + j], 0.5f + grad_logit, "bias gradient"));
                }
                gs[i * T + j] = grad_logit * scale;
              }
            }
            for (int64_t r = 0; r < T; ++r)
              for (int64_t d = 0; d < Dh; ++d) {
                float dq = 0.0f, dk = 0.0f, dv = 0.0f;
                for (int64_t x = 0; x < T; ++x) {
                  dq = fma_or(gs[r * T + x], k(x, h, d), dq);
                  dk = fma_or(gs[x * T + r], q(x, h, d), dk);
                  dv = fma_or(kept[x * T + r], g(x, h, d), dv);
                }
                ASSERT_TRUE(same(grad_qkv[r * 3 * D + h * Dh + d], dq, "dq"));
                ASSERT_TRUE(same(grad_qkv[r * 3 * D + D + h * Dh + d], dk, "dk"));
                ASSERT_TRUE(same(grad_qkv[r * 3 * D + 2 * D + h * Dh + d], dv, "dv"));
              }
          }
        }
  std::printf("  %lld numbers, each equal bit for bit\n", static_cast<long long>(checked));
}

INSTANTIATE_CPU_VARIANTS(AttentionLayerTest);

}  // namespace
}  // namespace copytask

namespace copytask {
namespace {

// The examples' values into the lanes and back: every element where the layout says, the
// lanes past a partial group's examples 0, and back out only the group's examples; on each
// variant (16 x 16 blocks with AVX-512, 8 x 8 otherwise).
class ExampleLanesTest : public test::CpuVariantTest {};

TEST_P(ExampleLanesTest, IntoAndOutOfTheLanesIsATransposition) {
  for (const int64_t n : {1, 5, 15, 16, 17, 40, 603})
    for (const int64_t count : {1, 7, 16}) {
      const int64_t stride = n + 3;  // each example's row, with a gap
      std::vector<float> in(static_cast<size_t>(cpu::kExampleLanes * stride));
      for (size_t x = 0; x < in.size(); ++x) in[x] = static_cast<float>(x) + 0.5f;
      std::vector<float> lanes(static_cast<size_t>(n * cpu::kExampleLanes), -1.0f);
      cpu::on_cpu_variant([&](auto variant) COPYTASK_KERNEL_BODY {
        cpu::to_lanes<decltype(variant)>(in.data(), stride, count, n, lanes.data());
      });
      for (int64_t i = 0; i < n; ++i)
        for (int64_t e = 0; e < cpu::kExampleLanes; ++e)
          ASSERT_EQ(lanes[i * cpu::kExampleLanes + e], e < count ? in[e * stride + i] : 0.0f)
              << "n " << n << ", count " << count << ", element " << i << ", lane " << e;
      std::vector<float> out(in.size(), -2.0f);
      cpu::on_cpu_variant([&](auto variant) COPYTASK_KERNEL_BODY {
        cpu::from_lanes<decltype(variant)>(lanes.data(), n, count, out.data(), stride);
      });
      for (int64_t e = 0; e < cpu::kExampleLanes; ++e)
        for (int64_t i = 0; i < stride; ++i)
          ASSERT_EQ(out[e * stride + i], e < count && i < n ? in[e * stride + i] : -2.0f)
              << "n " << n << ", count " << count << ", example " << e << ", element " << i;
    }
}

INSTANTIATE_CPU_VARIANTS(ExampleLanesTest);

// The attention of a group across the lanes gives each example the numbers of the
// example-at-a-time attention (cpu_layers.h, held to its element-wise definition above), bit
// for bit: the weights, the mixed values, the gradients of q, k, v and the bias, with and
// without a bias, the causal mask and dropout, full and partial groups, several T and heads.
class AttentionLanesTest : public test::CpuVariantTest {};

TEST_P(AttentionLanesTest, EachExampleGetsTheExampleAtATimeAttentionsNumbersBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  const int64_t L = cpu::kExampleLanes;
  int64_t checked = 0;
  struct Case {
    int64_t T, H, Dh;
  };
  const Case shapes[] = {{1, 1, 3}, {3, 2, 5}, {10, 1, 20}, {10, 2, 5}, {13, 4, 4}, {17, 2, 8}};
  for (const Case shape : shapes)
    for (const int64_t count : {16, 5})
      for (bool causal : {false, true})
        for (bool with_bias : {false, true})
          for (bool with_dropout : {false, true}) {
            const int64_t T = shape.T, H = shape.H, Dh = shape.Dh, D = H * Dh, HTT = H * T * T;
            auto filled = [&](int64_t n) {
              std::vector<float> v(static_cast<size_t>(n + cpu::kSlack));
              for (float& x : v) x = normal(rng);
              return v;
            };
            // Each example's inputs one after another, as the group's workspace holds them.
            const auto qkv = filled(L * T * 3 * D), upstream = filled(L * T * D), bias = filled(L * HTT);
            std::vector<float> mask(static_cast<size_t>(L * HTT));  // key-major, each example's
            std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
            for (float& m : mask) m = uniform(rng) < 0.3f ? 0.0f : 1.0f / 0.7f;
            // One example at a time.
            auto floats = [](int64_t n, float value = 0.0f) { return std::vector<float>(static_cast<size_t>(n), value); };
            auto weights = floats(L * HTT), mixed = floats(L * T * D + cpu::kSlack);
            auto grad_qkv = floats(L * T * 3 * D), grad_bias = floats(L * HTT, 0.5f);
            std::vector<float> scratch(static_cast<size_t>(cpu::attention_scratch_floats(T, Dh)));
            // Across the lanes.
            auto qkv_l = floats(L * T * 3 * D), bias_l = floats(L * HTT), mask_l = floats(L * HTT);
            auto weights_l = floats(L * HTT), mixed_l = floats(L * T * D), upstream_l = floats(L * T * D);
            auto grad_qkv_l = floats(L * T * 3 * D), grad_logits_l = floats(L * HTT);
            auto scratch_l = floats(cpu::attention_lanes_scratch_floats(T));
            for (int64_t e = 0; e < L; ++e)
              for (int64_t h = 0; h < H; ++h)
                for (int64_t i = 0; i < T; ++i)
                  for (int64_t j = 0; j < T; ++j)
                    bias_l[(((h * T + j) * T) + i) * L + e] = e < count ? bias[e * HTT + (h * T + i) * T + j] : 0.0f;
            cpu::on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY {
              using Lanes = decltype(lanes);
              for (int64_t e = 0; e < count; ++e) {
                const float* drop = with_dropout ? mask.data() + e * HTT : nullptr;
                cpu::attention_forward<Lanes>(qkv.data() + e * T * 3 * D, with_bias ? bias.data() + e * HTT : nullptr,
                                              causal, drop, weights.data() + e * HTT, mixed.data() + e * T * D,
                                              scratch.data(), T, H, Dh);
                cpu::attention_backward<Lanes>(qkv.data() + e * T * 3 * D, weights.data() + e * HTT, causal, drop,
                                               upstream.data() + e * T * D, grad_qkv.data() + e * T * 3 * D,
                                               with_bias ? grad_bias.data() + e * HTT : nullptr, scratch.data(), T,
                                               H, Dh);
              }
              cpu::to_lanes<Lanes>(qkv.data(), T * 3 * D, count, T * 3 * D, qkv_l.data());
              cpu::to_lanes<Lanes>(mask.data(), HTT, count, HTT, mask_l.data());
              cpu::to_lanes<Lanes>(upstream.data(), T * D, count, T * D, upstream_l.data());
              cpu::attention_forward_lanes<Lanes>(qkv_l.data(), with_bias ? bias_l.data() : nullptr, causal,
                                                  with_dropout ? mask_l.data() : nullptr, weights_l.data(),
                                                  mixed_l.data(), scratch_l.data(), T, H, Dh);
              cpu::attention_backward_lanes<Lanes>(qkv_l.data(), weights_l.data(), causal,
                                                   with_dropout ? mask_l.data() : nullptr, upstream_l.data(),
                                                   grad_qkv_l.data(), with_bias ? grad_logits_l.data() : nullptr,
                                                   scratch_l.data(), T, H, Dh);
            });
            const std::string at = "T " + std::to_string(T) + ", H " + std::to_string(H) + ", Dh " +
                                   std::to_string(Dh) + ", " + std::to_string(count) + " examples" +
                                   (causal ? " causal" : "") + (with_bias ? " bias" : "") +
                                   (with_dropout ? " dropout" : "");
            auto same = [&](float got, float want, const char* what, int64_t e, int64_t x) {
              ++checked;
              return std::memcmp(&got, &want, sizeof got) == 0
                         ? ::testing::AssertionSuccess()
                         : ::testing::AssertionFailure() << at << ": " << what << " of example " << e << ", element "
                                                         << x << ": " << got << " != " << want;
            };
            for (int64_t e = 0; e < count; ++e) {
              for (int64_t x = 0; x < HTT; ++x)
                ASSERT_TRUE(same(weights_l[x * L + e], weights[e * HTT + x], "weight", e, x));
              for (int64_t x = 0; x < T * D; ++x)
                ASSERT_TRUE(same(mixed_l[x * L + e], mixed[e * T * D + x], "mixed", e, x));
              for (int64_t x = 0; x < T * 3 * D; ++x)
                ASSERT_TRUE(same(grad_qkv_l[x * L + e], grad_qkv[e * T * 3 * D + x], "grad_qkv", e, x));
              if (with_bias)
                for (int64_t h = 0; h < H; ++h)
                  for (int64_t i = 0; i < T; ++i)
                    for (int64_t j = 0; j < T; ++j) {
                      const int64_t query_major = (h * T + i) * T + j, key_major = (h * T + j) * T + i;
                      ASSERT_TRUE(same(0.5f + grad_logits_l[key_major * L + e], grad_bias[e * HTT + query_major],
                                       "bias gradient", e, query_major));
                    }
            }
          }
  std::printf("  %lld numbers, each equal bit for bit\n", static_cast<long long>(checked));
}

INSTANTIATE_CPU_VARIANTS(AttentionLanesTest);

}  // namespace
}  // namespace copytask
