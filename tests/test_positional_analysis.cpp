// positional.json's analyses against closed forms: the sinusoidal table's dot products
// depend only on m - n, RoPE's kernel is the cosine sum of its frequencies, a PCA of points
// on a line explains everything with one axis, ALiBi's bias is -slope * |i - j| and a
// bias's curve against the distance is its diagonals.
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/positional.h"
#include "model/positional_analysis.h"

namespace copytask {
namespace {

std::shared_ptr<PositionalScheme> scheme_of(const std::string& name, int64_t T, int64_t D, int64_t H,
                                            const PositionalOptions& options = {}) {
  return positional_scheme_make(name, options, {T, D, H});
}

TEST(PositionalAnalysis, SinusoidalDotProductIsACosineSumOfTheDistance) {
  const int64_t T = 10, D = 20;
  const auto entry = positional_member_json(*scheme_of("sinusoidal", T, D, 1), 3, T, {});
  EXPECT_EQ(entry["seed"], 3);
  const auto& dot = entry["vectors"]["dot"];
  const auto& cosine = entry["vectors"]["cosine"];
  // sin(a)sin(b) + cos(a)cos(b) = cos(a - b): PE_m . PE_n = sum_i cos((m - n) w_i).
  for (int64_t m = 0; m < T; ++m)
    for (int64_t n = 0; n < T; ++n) {
      double expected = 0;
      for (int64_t i = 0; i < D / 2; ++i) expected += std::cos((m - n) / std::pow(10000.0, 2.0 * i / D));
      EXPECT_NEAR(dot[m][n].get<double>(), expected, 1e-5) << m << "," << n;
      // Every vector has norm sqrt(D / 2), so cosine = dot / (D / 2).
      EXPECT_NEAR(cosine[m][n].get<double>(), expected / (D / 2.0), 1e-5);
    }
  EXPECT_FALSE(entry.contains("path")) << "a fixed table has no training path";
}

TEST(PositionalAnalysis, PcaOfPointsOnALineNeedsOneAxis) {
  // Positions p * u + c for a unit u: the first axis is +-u, explains all the variance,
  // and the projections are p - mean(p) (up to the fixed sign).
  const int64_t T = 7, D = 5;
  auto u = torch::tensor({0.0, 0.6, 0.0, -0.8, 0.0}, torch::kFloat64);
  auto p = torch::arange(T, torch::kFloat64);
  auto vectors = p.unsqueeze(1) * u.unsqueeze(0) + 3.0;  // (T, D)
  PositionPca pca = position_pca(vectors);
  EXPECT_NEAR(pca.explained_variance_ratio[0], 1.0, 1e-9);
  EXPECT_NEAR(pca.explained_variance_ratio[1], 0.0, 1e-9);
  // Fixed sign: the largest component (|-0.8|) is positive, so the axis is -u.
  EXPECT_NEAR(pca.axes[3][0].item<double>(), 0.8, 1e-9);
  const auto points = position_projection_json(vectors, pca);
  for (int64_t t = 0; t < T; ++t) EXPECT_NEAR(points[t][0].get<double>(), -(t - 3.0), 1e-6);
  (void)D;
}

TEST(PositionalAnalysis, LearnedTableGetsItsPathOnTheFinalAxes) {
  const int64_t T = 10, D = 8;
  torch::manual_seed(1);
  auto scheme = scheme_of("learned", T, D, 2);
  auto final_table = torch::randn({T, D});
  {
    torch::NoGradGuard no_grad;
    scheme->named_parameters()["table"].copy_(final_table);
  }
  std::vector<std::pair<int64_t, torch::Tensor>> path = {{0, torch::randn({T, D})}, {100, final_table}};
  const auto entry = positional_member_json(*scheme, 0, T, path);
  ASSERT_EQ(entry["path"].size(), 2u);
  EXPECT_EQ(entry["path"][1]["step"], 100);
  // The last point of the path is the final table: the same points as its PCA.
  EXPECT_EQ(entry["path"][1]["points"], entry["vectors"]["pca"]["points"]);
  EXPECT_NE(entry["path"][0]["points"], entry["path"][1]["points"]);
}

TEST(PositionalAnalysis, RopeKernelIsTheCosineSumOfItsFrequencies) {
  const int64_t T = 10, Dh = 8;
  const auto kernel = relative_kernel_json(scheme_of("rope", T, Dh, 1)->table(T));
  ASSERT_EQ(kernel["distance"].size(), static_cast<size_t>(2 * T - 1));
  for (size_t k = 0; k < kernel["distance"].size(); ++k) {
    const double d = kernel["distance"][k].get<double>();
    double expected = 0;  // q = k = ones: each pair contributes 2 cos(d theta_i); / Dh
    for (int64_t i = 0; i < Dh / 2; ++i) expected += 2.0 * std::cos(d * std::pow(10000.0, -2.0 * i / Dh));
    EXPECT_NEAR(kernel["score"][k].get<double>(), expected / Dh, 1e-5) << "d = " << d;
  }
  EXPECT_NEAR(kernel["score"][T - 1].get<double>(), 1.0, 1e-6) << "d = 0";
  const auto entry = positional_member_json(*scheme_of("rope", T, 2 * Dh, 2), 0, T, {});
  EXPECT_EQ(entry["relative_kernel"], kernel);
  EXPECT_FALSE(entry.contains("vectors"));
}

TEST(PositionalAnalysis, AlibiBiasPerHeadAndNoneHasNothing) {
  const int64_t T = 6, H = 4;
  const auto entry = positional_member_json(*scheme_of("alibi", T, 8, H), 2, T, {});
  const auto slopes = alibi_paper_slopes(H);
  ASSERT_EQ(entry["bias"].size(), static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j)
        EXPECT_NEAR(entry["bias"][h][i][j].get<double>(), -slopes[h] * std::abs(i - j), 1e-6);
  EXPECT_EQ(entry["slopes"].size(), static_cast<size_t>(H));
  // Against the signed distance d = i - j: -slope |d| for d = -(T-1) .. T-1.
  const auto& by_distance = entry["bias_by_distance"];
  ASSERT_EQ(by_distance["distance"].size(), static_cast<size_t>(2 * T - 1));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t k = 0; k < 2 * T - 1; ++k)
      EXPECT_NEAR(by_distance["heads"][h][k].get<double>(), -slopes[h] * std::abs(k - (T - 1)), 1e-6);
  const auto none = positional_member_json(*scheme_of("none", T, 8, H), 5, T, {});
  EXPECT_EQ(none, nlohmann::json({{"seed", 5}, {"hooks", nlohmann::json::array()}}));
  EXPECT_EQ(entry["hooks"], nlohmann::json::array({"score_bias"}));
}

// A bias that depends on the side: the two-sided curve has a slope of its own on each side,
// and the learned values the scheme reports are there.
TEST(PositionalAnalysis, BiasByDistanceKeepsTheSignOfTheDistance) {
  const int64_t T = 5;
  PositionalOptions options;
  options.alibi_direction = "two-sided";
  options.alibi_slopes = {0.5};
  options.alibi_right_slopes = {2.0};
  const auto entry = positional_member_json(*scheme_of("alibi", T, 8, 1, options), 0, T, {});
  const auto& curve = entry["bias_by_distance"]["heads"][0];
  EXPECT_NEAR(curve[T - 1 + 2].get<double>(), -1.0, 1e-6);  // d = 2, the key two to the left
  EXPECT_NEAR(curve[T - 1 - 2].get<double>(), -4.0, 1e-6);  // d = -2, two to the right
  EXPECT_EQ(entry["right_slopes"], nlohmann::json::array({2.0}));
  const auto kerple = positional_member_json(*scheme_of("kerple", T, 8, 2), 0, T, {});
  EXPECT_EQ(kerple["r1"], nlohmann::json::array({1.0, 1.0}));
  EXPECT_TRUE(kerple.contains("bias_by_distance"));
}

}  // namespace
}  // namespace copytask
