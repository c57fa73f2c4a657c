// Each positional scheme's table against its closed form (docs/design.md section 2), written
// out here independently of the scheme files: sinusoidal, RoPE (base, partial rotary, and
// q.k depending only on m - n), ALiBi (the paper's slopes, symmetric, offset, two-sided,
// learned), T5's buckets, the dynamic bias MLP, KERPLE and FIRE.
#include <cmath>

#include <ATen/core/Generator.h>
#include <gtest/gtest.h>

#include "compat/torch_compat.h"
#include "model/positional.h"
#include "test_util.h"

namespace copytask {
namespace {

std::shared_ptr<PositionalScheme> scheme_make(const std::string& name, const PositionalOptions& options = {},
                                       PositionalShape shape = {10, 8, 2}) {
  auto scheme = positional_scheme_make(name, options, shape);
  at::Generator generator = generator_make(torch::kCPU, 17);
  scheme->init(torch::randn({shape.positions, shape.embed}), generator);
  return scheme;
}

// The named parameter of a scheme, to set or read.
torch::Tensor parameter(PositionalScheme& scheme, const std::string& name) {
  auto params = scheme.named_parameters();
  EXPECT_TRUE(params.contains(name)) << name;
  return params[name];
}

void set(PositionalScheme& scheme, const std::string& name, const torch::Tensor& value) {
  torch::NoGradGuard no_grad;
  parameter(scheme, name).copy_(value);
}

TEST(Sinusoidal, MatchesTheClosedForm) {
  const int64_t T = 12, D = 20;
  auto table = scheme_make("sinusoidal", {}, {T, D, 1})->table(T);
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{T, D}));
  auto a = table.accessor<float, 2>();
  for (int64_t p = 0; p < T; ++p)
    for (int64_t i = 0; i < D / 2; ++i) {
      const double angle = p / std::pow(10000.0, 2.0 * i / D);
      EXPECT_NEAR(a[p][2 * i], std::sin(angle), 1e-6) << "p=" << p << " i=" << i;
      EXPECT_NEAR(a[p][2 * i + 1], std::cos(angle), 1e-6) << "p=" << p << " i=" << i;
    }
}

TEST(Rope, AnglesFollowTheBaseAndTheRotatedFraction) {
  // Dh = 12: full rotation (6 pairs), and a third of it (2 pairs) with base 500.
  const int64_t T = 9, D = 24, H = 2, Dh = 12;
  auto full = scheme_make("rope", {}, {T, D, H})->table(T);
  PositionalOptions partial_options;
  partial_options.rope_base = 500;
  partial_options.rope_fraction = 1.0 / 3.0;
  auto partial = scheme_make("rope", partial_options, {T, D, H})->table(T);
  ASSERT_EQ(full.sizes(), (std::vector<int64_t>{T, Dh / 2}));
  auto f = full.accessor<float, 2>(), q = partial.accessor<float, 2>();
  for (int64_t p = 0; p < T; ++p)
    for (int64_t i = 0; i < Dh / 2; ++i) {
      EXPECT_NEAR(f[p][i], p * std::pow(10000.0, -2.0 * i / Dh), 1e-5);
      // Two pairs rotate, with frequencies over their 4 dimensions; the rest stay.
      EXPECT_NEAR(q[p][i], i < 2 ? p * std::pow(500.0, -2.0 * i / 4) : 0.0, 1e-5) << p << " " << i;
    }
}

TEST(Rope, RotatesEachPairAndTheDotProductDependsOnlyOnTheDistance) {
  const int64_t T = 10, Dh = 8;
  auto angles = scheme_make("rope", {}, {T, Dh, 1})->table(T).to(torch::kFloat64);  // (T, Dh/2)
  torch::manual_seed(2);
  // The same query and key vectors placed at every position.
  auto q = torch::randn({1, Dh}, torch::kFloat64).expand({T, Dh}).contiguous();
  auto k = torch::randn({1, Dh}, torch::kFloat64).expand({T, Dh}).contiguous();
  auto qr = rotate_pairs(q, angles.cos(), angles.sin()), kr = rotate_pairs(k, angles.cos(), angles.sin());
  auto xa = q.accessor<double, 2>(), ra = qr.accessor<double, 2>();
  for (int64_t p = 0; p < T; ++p)
    for (int64_t i = 0; i < Dh / 2; ++i) {
      const double theta = p * std::pow(10000.0, -2.0 * i / Dh), a = xa[p][2 * i], b = xa[p][2 * i + 1];
      EXPECT_NEAR(ra[p][2 * i], a * std::cos(theta) - b * std::sin(theta), 1e-6);
      EXPECT_NEAR(ra[p][2 * i + 1], a * std::sin(theta) + b * std::cos(theta), 1e-6);
    }
  EXPECT_LT(test::max_abs_diff(qr.norm(2, -1), q.norm(2, -1)), 1e-9);
  const auto scores = torch::matmul(qr, kr.t());  // scores[m][n] = q_m . k_n
  auto s = scores.accessor<double, 2>();
  for (int64_t m = 0; m + 1 < T; ++m)
    for (int64_t n = 0; n + 1 < T; ++n) EXPECT_NEAR(s[m][n], s[m + 1][n + 1], 1e-5) << m << "," << n;
  EXPECT_GT(std::abs(s[0][0] - s[0][3]), 1e-3) << "different distances give different scores";
}

TEST(Alibi, PaperSlopes) {
  auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "head " << i;
  };
  near(alibi_paper_slopes(1), {1.0 / 256});
  near(alibi_paper_slopes(2), {1.0 / 16, 1.0 / 256});
  std::vector<double> eight;
  for (int h = 1; h <= 8; ++h) eight.push_back(std::pow(2.0, -h));
  near(alibi_paper_slopes(8), eight);
  // 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  std::vector<double> twelve = eight;
  for (double e : {0.5, 1.5, 2.5, 3.5}) twelve.push_back(std::pow(2.0, -e));
  near(alibi_paper_slopes(12), twelve);
}

// bias[h][i][j] against expected(h, d) for d = i - j.
template <typename Expected>
void expect_bias(const torch::Tensor& table, Expected expected, double tolerance = 1e-6) {
  auto a = table.detach().to(torch::kFloat64).contiguous();
  auto b = a.accessor<double, 3>();
  for (int64_t h = 0; h < a.size(0); ++h)
    for (int64_t i = 0; i < a.size(1); ++i)
      for (int64_t j = 0; j < a.size(2); ++j)
        EXPECT_NEAR(b[h][i][j], expected(h, i - j, i), tolerance) << "h " << h << " i " << i << " j " << j;
}

TEST(Alibi, EveryDirectionMatchesItsClosedForm) {
  const int64_t T = 7, H = 3;
  const auto paper = alibi_paper_slopes(H);
  expect_bias(scheme_make("alibi", {}, {T, 6, H})->table(T), [&](int64_t h, int64_t d, int64_t) { return -paper[h] * std::abs(d); });

  PositionalOptions offset;
  offset.alibi_direction = "offset";
  offset.alibi_slopes = {0.5, 0.25, 2.0};
  expect_bias(scheme_make("alibi", offset, {T, 6, H})->table(T), [&](int64_t h, int64_t d, int64_t) {
    return -offset.alibi_slopes[h] * (std::abs(d) - (d > 0 ? 0.5 : 0.0));  // keys to the left: +0.5 slope
  });

  PositionalOptions two_sided;
  two_sided.alibi_direction = "two-sided";
  two_sided.alibi_slopes = {0.5, 0.25, 2.0};
  two_sided.alibi_right_slopes = {3.0, 0.125, 1.0};
  auto scheme = scheme_make("alibi", two_sided, {T, 6, H});
  expect_bias(scheme->table(T), [&](int64_t h, int64_t d, int64_t) {
    return d >= 0 ? -two_sided.alibi_slopes[h] * d : -two_sided.alibi_right_slopes[h] * -d;
  });
  EXPECT_FALSE(scheme->learned());
  const auto reported = scheme->reported_values();
  ASSERT_EQ(reported.size(), 2u);
  EXPECT_EQ(reported[1].first, "right_slopes");
  EXPECT_EQ(reported[1].second, two_sided.alibi_right_slopes);
}

TEST(Alibi, LearnedSlopesStartAtTheGivenOnesAndMove) {
  const int64_t T = 6, H = 2;
  PositionalOptions options;
  options.alibi_direction = "two-sided";
  options.alibi_learned = true;
  auto scheme = scheme_make("alibi", options, {T, 8, H});
  ASSERT_TRUE(scheme->learned());
  const auto paper = alibi_paper_slopes(H);
  expect_bias(scheme->table(T), [&](int64_t h, int64_t d, int64_t) { return -paper[h] * std::abs(d); });
  // The slopes are the exp of their parameters: set them and read the bias and the report.
  set(*scheme, "log_slopes", torch::tensor({std::log(0.5), std::log(0.1)}));
  set(*scheme, "log_right_slopes", torch::tensor({std::log(2.0), std::log(0.3)}));
  const std::vector<double> left = {0.5, 0.1}, right = {2.0, 0.3};
  expect_bias(scheme->table(T), [&](int64_t h, int64_t d, int64_t) { return d >= 0 ? -left[h] * d : -right[h] * -d; });
  EXPECT_NEAR(scheme->reported_values()[0].second[1], 0.1, 1e-6);
}

// T5's bidirectional buckets, written out for the defaults (32 buckets, max distance 128):
// 16 per side, distances 0..7 exact, then 8 + floor(log(n / 8) / log(16) * 8), at most 15.
int64_t t5_bucket(int64_t d) {
  const int64_t n = std::abs(d), side = d < 0 ? 16 : 0;
  if (n < 8) return side + n;
  const int64_t logarithmic = 8 + static_cast<int64_t>(std::floor(std::log(n / 8.0) / std::log(16.0) * 8 + 1e-9));
  return side + std::min<int64_t>(15, logarithmic);
}

TEST(T5, BucketsFollowTheClosedForm) {
  EXPECT_EQ(t5_bucket(0), 0);
  EXPECT_EQ(t5_bucket(7), 7);
  EXPECT_EQ(t5_bucket(-1), 17);
  EXPECT_EQ(t5_bucket(16), 10);    // log(2) / log(16) * 8 = 2 exactly
  EXPECT_EQ(t5_bucket(-127), 31);  // the last bucket of the right side
  const int64_t T = 300, H = 2;
  auto scheme = scheme_make("t5", {}, {T, 8, H});
  // Distinct values per bucket and head: bucket_bias[b][h] = b + 100 h.
  set(*scheme, "bucket_bias", torch::arange(32, torch::kFloat32).unsqueeze(1) + torch::tensor({0.0f, 100.0f}));
  expect_bias(scheme->table(T), [&](int64_t h, int64_t d, int64_t) { return static_cast<double>(t5_bucket(d) + 100 * h); });
}

TEST(Dynamic, BiasIsTheMlpOfTheSignedDistance) {
  const int64_t T = 6, H = 2, W = 3;
  for (bool log_distance : {false, true}) {
    PositionalOptions options;
    options.bias_mlp_hidden = W;
    options.dynamic_depth = 2;
    options.dynamic_log_distance = log_distance;
    auto scheme = scheme_make("dynamic", options, {T, 8, H});
    auto params = scheme->named_parameters();
    auto w0 = params["mlp0_weight"].to(torch::kFloat64), b0 = params["mlp0_bias"].to(torch::kFloat64);
    auto w1 = params["mlp1_weight"].to(torch::kFloat64), b1 = params["mlp1_bias"].to(torch::kFloat64);
    auto w2 = params["mlp2_weight"].to(torch::kFloat64), b2 = params["mlp2_bias"].to(torch::kFloat64);
    auto silu = [](double z) { return z / (1 + std::exp(-z)); };
    expect_bias(scheme->table(T), [&](int64_t h, int64_t d, int64_t) {
      const double x = log_distance ? (d > 0 ? 1 : d < 0 ? -1 : 0) * std::log(1.0 + std::abs(d)) : static_cast<double>(d);
      std::vector<double> h1(W), h2(W);
      for (int64_t a = 0; a < W; ++a) h1[a] = silu(x * w0[0][a].item<double>() + b0[a].item<double>());
      for (int64_t a = 0; a < W; ++a) {
        double z = b1[a].item<double>();
        for (int64_t c = 0; c < W; ++c) z += h1[c] * w1[c][a].item<double>();
        h2[a] = silu(z);
      }
      double out = b2[h].item<double>();
      for (int64_t c = 0; c < W; ++c) out += h2[c] * w2[c][h].item<double>();
      return out;
    }, 1e-5);
  }
}

TEST(Kerple, BiasIsMinusR1LogOnePlusR2Distance) {
  const int64_t T = 8, H = 2;
  auto scheme = scheme_make("kerple", {}, {T, 8, H});
  expect_bias(scheme->table(T), [](int64_t, int64_t d, int64_t) { return -std::log1p(std::abs(d)); });  // r1 = r2 = 1
  set(*scheme, "log_r1", torch::tensor({std::log(2.0), std::log(0.5)}));
  set(*scheme, "log_r2", torch::tensor({std::log(3.0), std::log(0.25)}));
  const double r1[] = {2.0, 0.5}, r2[] = {3.0, 0.25};
  expect_bias(scheme->table(T), [&](int64_t h, int64_t d, int64_t) { return -r1[h] * std::log1p(r2[h] * std::abs(d)); });
}

TEST(Fire, BiasIsTheMlpOfTheNormalisedLogDistance) {
  const int64_t T = 9, H = 2, W = 4;
  PositionalOptions options;
  options.bias_mlp_hidden = W;
  options.fire_threshold = 3;
  auto scheme = scheme_make("fire", options, {T, 8, H});
  set(*scheme, "c", torch::tensor({0.3f}));
  set(*scheme, "threshold_scale", torch::tensor({1.1f}));  // L = 3.3: queries from 4 on are their own scale
  auto params = scheme->named_parameters();
  auto w0 = params["mlp0_weight"].to(torch::kFloat64), b0 = params["mlp0_bias"].to(torch::kFloat64);
  auto w1 = params["mlp1_weight"].to(torch::kFloat64), b1 = params["mlp1_bias"].to(torch::kFloat64);
  const double c = 0.3, L = 3.3;
  auto psi = [&](double z) { return std::log(c * z + 1); };
  expect_bias(scheme->table(T), [&](int64_t h, int64_t d, int64_t i) {
    const double x = (d > 0 ? 1 : d < 0 ? -1 : 0) * psi(std::abs(d)) / (psi(std::max(L, static_cast<double>(i))) + 1e-6);
    double out = b1[h].item<double>();
    for (int64_t a = 0; a < W; ++a) out += std::max(0.0, x * w0[0][a].item<double>() + b0[a].item<double>()) * w1[a][h].item<double>();
    return out;
  }, 1e-5);
  // FIRE depends on the query's own position beyond L: the same distance, another bias.
  auto table = scheme->table(T);
  EXPECT_GT(std::abs(table[0][8][6].item<double>() - table[0][5][3].item<double>()), 1e-6);
  // The reported values: |c| and L.
  const auto reported = scheme->reported_values();
  EXPECT_NEAR(reported[0].second[0], 0.3, 1e-6);
  EXPECT_NEAR(reported[1].second[0], 3.3, 1e-5);
}

}  // namespace
}  // namespace copytask
