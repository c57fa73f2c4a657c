// Each positional scheme against its closed form (DESIGN.md section 2).
#include <cmath>

#include <gtest/gtest.h>

#include "model/positional.h"
#include "test_util.h"

namespace copytask {
namespace {

TEST(Sinusoidal, MatchesTheClosedForm) {
  const int64_t T = 12, D = 20;
  auto table = sinusoidal_table(T, D);
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{T, D}));
  auto a = table.accessor<float, 2>();
  for (int64_t p = 0; p < T; ++p)
    for (int64_t i = 0; i < D / 2; ++i) {
      const double angle = p / std::pow(10000.0, 2.0 * i / D);
      EXPECT_NEAR(a[p][2 * i], std::sin(angle), 1e-6) << "p=" << p << " i=" << i;
      EXPECT_NEAR(a[p][2 * i + 1], std::cos(angle), 1e-6) << "p=" << p << " i=" << i;
    }
}

TEST(Rope, RotatesEachPairByItsClosedFormAngle) {
  const int64_t T = 7, Dh = 6;
  torch::manual_seed(1);
  auto x = torch::randn({T, Dh}, torch::kFloat64);
  auto angles = rope_angles(T, Dh).to(torch::kFloat64);
  auto rotated = rope_rotate(x, angles.cos(), angles.sin());
  auto xa = x.accessor<double, 2>();
  auto ra = rotated.accessor<double, 2>();
  for (int64_t p = 0; p < T; ++p)
    for (int64_t i = 0; i < Dh / 2; ++i) {
      const double theta = p * std::pow(10000.0, -2.0 * i / Dh);
      const double a = xa[p][2 * i], b = xa[p][2 * i + 1];
      EXPECT_NEAR(ra[p][2 * i], a * std::cos(theta) - b * std::sin(theta), 1e-6);
      EXPECT_NEAR(ra[p][2 * i + 1], a * std::sin(theta) + b * std::cos(theta), 1e-6);
    }
}

TEST(Rope, DotProductDependsOnlyOnRelativePositionAndNormsAreKept) {
  const int64_t T = 10, Dh = 8;
  torch::manual_seed(2);
  // The same query and key vectors placed at every position.
  auto q = torch::randn({1, Dh}).expand({T, Dh}).contiguous();
  auto k = torch::randn({1, Dh}).expand({T, Dh}).contiguous();
  auto angles = rope_angles(T, Dh);
  auto qr = rope_rotate(q, angles.cos(), angles.sin());
  auto kr = rope_rotate(k, angles.cos(), angles.sin());
  EXPECT_LT(test::max_abs_diff(qr.norm(2, -1), q.norm(2, -1)), 1e-5);
  auto scores = torch::matmul(qr, kr.t());  // (T, T): scores[m][n] = q_m . k_n
  auto s = scores.accessor<float, 2>();
  int checked = 0;
  for (int64_t m = 0; m + 1 < T; ++m)
    for (int64_t n = 0; n + 1 < T; ++n, ++checked) EXPECT_NEAR(s[m][n], s[m + 1][n + 1], 1e-4) << m << "," << n;
  EXPECT_GT(checked, 0);
  // Not trivially constant: different offsets give different scores.
  EXPECT_GT(std::abs(s[0][0] - s[0][3]), 1e-3);
}

TEST(Alibi, SlopesFollowThePaper) {
  auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "head " << i;
  };
  near(alibi_slopes(1), {1.0 / 256});
  near(alibi_slopes(2), {1.0 / 16, 1.0 / 256});
  std::vector<double> eight;
  for (int h = 1; h <= 8; ++h) eight.push_back(std::pow(2.0, -h));
  near(alibi_slopes(8), eight);
  // 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  std::vector<double> twelve = eight;
  for (double e : {0.5, 1.5, 2.5, 3.5}) twelve.push_back(std::pow(2.0, -e));
  near(alibi_slopes(12), twelve);
}

TEST(Alibi, BiasIsMinusSlopeTimesDistance) {
  const int64_t H = 3, T = 6;
  auto bias = alibi_bias(H, T);
  auto slopes = alibi_slopes(H);
  auto a = bias.accessor<float, 3>();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) EXPECT_NEAR(a[h][i][j], -slopes[h] * std::abs(i - j), 1e-6);
}

}  // namespace
}  // namespace copytask

namespace copytask {
namespace {

// DESIGN.md section 2: each scheme uses at most one of the three hooks.
TEST(Schemes, EachSchemeImplementsAtMostOneHook) {
  ASSERT_EQ(positional_names(), (std::vector<std::string>{"none", "sinusoidal", "learned", "rope", "alibi"}));
  for (const auto& name : positional_names()) {
    auto scheme = positional_scheme(name, 10, 4, torch::kCPU);
    ASSERT_TRUE(scheme) << name;
    EXPECT_EQ(scheme->name(), name);
    const int hooks = (scheme->additive(10, 8).defined() || scheme->adds_learned_table()) +
                      scheme->rotates_qk() + scheme->score_bias(2, 10).defined();
    EXPECT_EQ(hooks, name == "none" ? 0 : 1) << name;
  }
  EXPECT_EQ(positional_scheme("xpos", 10, 4, torch::kCPU), nullptr);
}

}  // namespace
}  // namespace copytask
