// The schemes that read the content or scale attention, against their closed forms written
// out here with loops, independently of the scheme files (docs/schemes.md): xpos's scale,
// the length scale's multiplier, CoPE's counts and interpolation, FoX's gate sums, DAPE's
// MLP, PoPE's polar score, and RoPE's rescalings for evaluation (position interpolation, NTK, YaRN).
#include <cmath>

#include <ATen/core/Generator.h>
#include <gtest/gtest.h>

#include "compat/torch_compat.h"
#include "model/hooks/content_score.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "test_util.h"

namespace copytask {
namespace {

std::shared_ptr<PositionalScheme> content_scheme_make(const std::string& name, const PositionalOptions& options,
                                       const PositionalShape& shape) {
  auto scheme = positional_scheme_make(name, options, shape);
  at::Generator generator = generator_make(torch::kCPU, 23);
  for (PositionalScheme* component : scheme->components())
    component->init(torch::randn({shape.positions, shape.embed}), generator);
  return scheme;
}

// Every parameter of a scheme (and its options) set to N(0, scale) draws, so no term is trivial.
void randomize(PositionalScheme& scheme, double scale, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& parameter : scheme.parameters()) parameter.copy_(torch::randn(parameter.sizes()) * scale);
}

// One example's content inputs: q, k (1, H, T, Dh), scores q.k / sqrt(Dh), input (1, T, D).
ContentInputs inputs(int64_t H, int64_t T, int64_t Dh, bool causal, int64_t block, uint64_t seed) {
  torch::manual_seed(seed);
  ContentInputs in;
  in.block = block;
  in.q = torch::randn({1, H, T, Dh});
  in.k = torch::randn({1, H, T, Dh});
  in.scores = torch::matmul(in.q, in.k.transpose(-1, -2)) / std::sqrt(static_cast<double>(Dh));
  in.input = torch::randn({1, T, H * Dh});
  in.causal = causal;
  return in;
}

torch::Tensor term_of(PositionalScheme& owner, const ContentInputs& in) {
  return owner.content_score()->term(in, content_table(owner)).detach();  // (1, H, T, T)
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(XPos, TheScaleOfQkIsZetaToTheDistanceOverGammaOnTopOfRope) {
  const int64_t T = 12, D = 16, H = 2, Dh = 8;
  PositionalOptions options;
  options.xpos_scale_base = 6;
  auto xpos = content_scheme_make("xpos", options, {T, D, H, 2, true});
  const auto u = xpos->table(qk_scale_hook(), T).to(torch::kFloat64);  // (2, T, Dh/2)
  ASSERT_EQ(u.sizes(), (std::vector<int64_t>{2, T, Dh / 2}));
  for (int64_t p = 0; p < T; ++p)
    for (int64_t r = 0; r < Dh / 2; ++r) {
      const double zeta = (2.0 * r / Dh + 0.4) / 1.4;
      EXPECT_NEAR(u[0][p][r].item<double>(), (p - T / 2) / 6.0 * std::log(zeta), 1e-6) << p << " " << r;
      EXPECT_NEAR(u[1][p][r].item<double>(), -(p - T / 2) / 6.0 * std::log(zeta), 1e-6) << p << " " << r;
    }
  // q_i . k_j of pair r: zeta_r^((i - j) / gamma) times RoPE's own product, for any q and k.
  const auto angles = xpos->table(rotation_hook(), T).to(torch::kFloat64);  // (T, Dh/2)
  torch::manual_seed(4);
  const auto q = torch::randn({Dh}, torch::kFloat64), k = torch::randn({Dh}, torch::kFloat64);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j <= i; ++j)
      for (int64_t r = 0; r < Dh / 2; ++r) {
        auto turned = [&](const torch::Tensor& x, int64_t p) {
          const double c = std::cos(angles[p][r].item<double>()), s = std::sin(angles[p][r].item<double>());
          const double a = x[2 * r].item<double>(), b = x[2 * r + 1].item<double>();
          return std::pair<double, double>{a * c - b * s, a * s + b * c};
        };
        const auto [q0, q1] = turned(q, i);
        const auto [k0, k1] = turned(k, j);
        const double rope = q0 * k0 + q1 * k1;
        const double scaled = rope * std::exp(u[0][i][r].item<double>() + u[1][j][r].item<double>());
        const double zeta = (2.0 * r / Dh + 0.4) / 1.4;
        EXPECT_NEAR(scaled, rope * std::pow(zeta, (i - j) / 6.0), 1e-5 * (1 + std::abs(rope)));
      }
}

TEST(LengthScale, MultipliesEachRowBySLogTheKeysItSees) {
  const int64_t T = 7, H = 2, L = 2;
  PositionalOptions options;
  options.length_scale = true;
  for (bool causal : {false, true}) {
    auto scheme = content_scheme_make("none", options, {T, 8, H, L, causal});
    PositionalScheme* owner = scheme->owner_of(softmax_scale_hook());
    ASSERT_NE(owner, nullptr);
    const auto s = owner->table(softmax_scale_hook(), T);  // (L, H)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(s[l][h].item<double>(), 1.0 / std::log(static_cast<double>(T)), 1e-6) << "the start: 1 / ln context";
    randomize(*scheme, 0.5, 3);
    HookTable table;
    table.stacked = owner->table(softmax_scale_hook(), T).detach().unsqueeze(0);  // (1, L, H)
    table.used = {1};
    table.used_flags = torch::ones({1}, torch::kBool);
    SiteState state;
    state.block = 1;
    torch::manual_seed(5);
    const auto logits = torch::randn({1, 3, H, T, T});
    state.logits = logits;
    const std::vector<uint8_t> flags{static_cast<uint8_t>(causal)};
    state.causal = &flags;
    state.causal_flags = torch::full({1}, causal, torch::kBool);
    softmax_scale_hook().apply(table, state);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double n = causal ? i + 1 : T;
        const double m = table.stacked[0][1][h].item<double>() * std::log(n);
        for (int64_t j = 0; j < T; ++j)
          EXPECT_NEAR(state.logits[0][2][h][i][j].item<double>(), m * logits[0][2][h][i][j].item<double>(), 1e-5);
      }
  }
}

// CoPE: counts of sigmoid gates between the key and the query, an embedding interpolated at
// the count, on either side (bidirectional), clamped at the last row.
void expect_cope(bool causal, int64_t rows) {
  const int64_t T = 8, H = 2, Dh = 4, L = 2;
  PositionalOptions options;
  options.cope_positions = rows;
  auto cope = content_scheme_make("cope", options, {T, H * Dh, H, L, causal});
  randomize(*cope, 0.7, 6);
  const auto in = inputs(H, T, Dh, causal, 1, 7);
  const auto term = term_of(*cope, in);
  const auto left = cope->named_parameters()["left_embedding"][1];  // (n, Dh)
  const auto right = causal ? left : cope->named_parameters()["right_embedding"][1];
  const int64_t n = rows;
  int64_t clamped = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= (causal ? i : T - 1); ++j) {
        double p = 0;
        for (int64_t t = std::min(i, j); t <= std::max(i, j); ++t) p += sigmoid(in.scores[0][h][i][t].item<double>());
        if (p > n - 1) ++clamped;
        p = std::min(p, static_cast<double>(n - 1));
        const int64_t f = static_cast<int64_t>(std::floor(p)), c = static_cast<int64_t>(std::ceil(p));
        const double w = p - f;
        const auto& e = j <= i ? left : right;
        const double expected = (1 - w) * in.q[0][h][i].dot(e[f]).item<double>() + w * in.q[0][h][i].dot(e[c]).item<double>();
        EXPECT_NEAR(term[0][h][i][j].item<double>(), expected, 1e-4) << h << " " << i << " " << j;
      }
  if (rows < T) {
    EXPECT_GT(clamped, 0) << "the clamp is exercised";
  }
}

TEST(Cope, CountsGatesOnEitherSideAndInterpolatesTheEmbedding) {
  expect_cope(false, 8);
  expect_cope(true, 8);
  expect_cope(false, 3);
  expect_cope(true, 3);
}

// FoX: sums of ln sigmoid gates of the tokens between the key and the query, left and right.
TEST(Fox, SumsTheLogGatesOfTheTokensInBetween) {
  const int64_t T = 7, H = 2, Dh = 3, D = H * Dh, L = 2;
  for (bool causal : {false, true}) {
    auto fox = content_scheme_make("fox", {}, {T, D, H, L, causal});
    randomize(*fox, 0.8, 8);
    const auto in = inputs(H, T, Dh, causal, 0, 9);
    const auto term = term_of(*fox, in);
    const auto weight = fox->named_parameters()["gate_weight"][0];  // (D, G)
    const auto bias = fox->named_parameters()["gate_bias"][0];      // (G)
    auto gate = [&](int64_t t, int64_t k) {
      return std::log(sigmoid(in.input[0][t].dot(weight.select(1, k)).item<double>() + bias[k].item<double>()));
    };
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          if (causal && j > i) continue;
          double expected = 0;
          if (j <= i)
            for (int64_t t = j + 1; t <= i; ++t) expected += gate(t, h);
          else
            for (int64_t t = i; t <= j - 1; ++t) expected += gate(t, H + h);
          EXPECT_NEAR(term[0][h][i][j].item<double>(), expected, 1e-5) << causal << " " << h << " " << i << " " << j;
        }
  }
}

// DAPE: per (i, j) an MLP of [scores; bias] across heads, LeakyReLU(0.01) in between.
TEST(Dape, AddsAnMlpOfTheScoresAndTheBiasAcrossHeads) {
  const int64_t T = 6, H = 2, Dh = 4, L = 2;
  PositionalOptions options;
  options.dape = true;
  options.dape_hidden = 5;
  auto alibi = content_scheme_make("alibi", options, {T, H * Dh, H, L, false});
  PositionalScheme* dape = alibi->owner_of(content_hook());
  ASSERT_NE(dape, nullptr);
  ASSERT_NE(dape, alibi.get());
  randomize(*dape, 0.6, 10);
  auto in = inputs(H, T, Dh, false, 1, 11);
  in.bias = alibi->table(score_bias_hook(), T).unsqueeze(0);  // (1, H, T, T)
  const auto term = term_of(*dape, in);
  const auto params = dape->named_parameters();
  const auto w1 = params["weight1"][1], b1 = params["bias1"][1], w2 = params["weight2"][1], b2 = params["bias2"][1];
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      std::vector<double> u;
      for (int64_t h = 0; h < H; ++h) u.push_back(in.scores[0][h][i][j].item<double>());
      for (int64_t h = 0; h < H; ++h) u.push_back(in.bias[0][h][i][j].item<double>());
      std::vector<double> hidden(5);
      for (int64_t w = 0; w < 5; ++w) {
        double z = b1[w].item<double>();
        for (int64_t k = 0; k < 2 * H; ++k) z += u[k] * w1[k][w].item<double>();
        hidden[w] = z > 0 ? z : 0.01 * z;
      }
      for (int64_t h = 0; h < H; ++h) {
        double out = b2[h].item<double>();
        for (int64_t w = 0; w < 5; ++w) out += hidden[w] * w2[w][h].item<double>();
        EXPECT_NEAR(term[0][h][i][j].item<double>(), out, 1e-5) << h << " " << i << " " << j;
      }
    }
}

// PoPE: the polar table's phases, and the score that replaces q.k / sqrt(Dh) written out
// with loops, sum_c softplus(q_ic) softplus(k_jc) cos((p_i - p_j) theta_c - delta_hc) / sqrt(Dh),
// theta_c = base^(-c / Dh), delta clamped to [-2 pi, 0]; at positions that need not increase
// and may repeat (read per example, as under randomized positions), and unchanged when every
// position moves by the same amount. A member without the hook keeps its logits.
TEST(Pope, ThePolarScoreReplacesQkAndDependsOnTheDistanceOnly) {
  const int64_t T = 7, H = 2, Dh = 5, D = H * Dh, L = 2, P = 24, B = 2;
  const double base = 100.0, shift = 9;
  PositionalOptions options;
  options.rope_base = base;
  auto pope = content_scheme_make("pope", options, {T, D, H, L, false});
  auto delta_raw = pope->named_parameters()["phase_bias"];  // (H, Dh)
  EXPECT_EQ(delta_raw.abs().max().item<double>(), 0.0) << "the phase bias starts at 0";
  {
    torch::NoGradGuard no_grad;  // from beyond -2 pi to beyond 0: the clamp acts at both ends
    delta_raw.copy_(torch::linspace(-9.0, 2.0, H * Dh).view({H, Dh}));
  }
  const auto delta = delta_raw.detach().to(torch::kFloat64);
  auto clamped = [&](int64_t h, int64_t c) { return std::min(0.0, std::max(-2 * M_PI, delta[h][c].item<double>())); };
  ASSERT_GT(delta.max().item<double>(), 0.0);
  ASSERT_LT(delta.min().item<double>(), -2 * M_PI);
  auto theta = [&](int64_t c) { return std::pow(base, -static_cast<double>(c) / Dh); };

  const auto table = pope->table(polar_hook(), P);  // (2, H, P, Dh)
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{2, H, P, Dh}));
  ASSERT_TRUE(table.requires_grad());
  for (int64_t h = 0; h < H; ++h)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t c = 0; c < Dh; ++c) {
        EXPECT_NEAR(table[0][h][p][c].item<double>(), p * theta(c), 1e-5);
        EXPECT_NEAR(table[1][h][p][c].item<double>(), p * theta(c) + clamped(h, c), 1e-5);
      }

  // Member 0 has the hook, member 1 not; example 1 sits at example 0's positions + shift.
  const std::vector<int64_t> at{3, 0, 11, 5, 5, 14, 1};
  auto positions = torch::empty({2, B, T}, torch::kLong);
  for (int64_t m = 0; m < 2; ++m)
    for (int64_t t = 0; t < T; ++t) {
      positions[m][0][t] = at[t];
      positions[m][1][t] = at[t] + static_cast<int64_t>(shift);
    }
  HookTable hook_table;
  const auto stacked = torch::stack({table.detach(), torch::zeros_like(table)});  // (M, 2, H, P, Dh)
  hook_table.stacked = polar_hook().gather(stacked, positions);                    // (M, B, 2, H, T, Dh)
  ASSERT_EQ(hook_table.stacked.sizes(), (std::vector<int64_t>{2, B, 2, H, T, Dh}));
  hook_table.used = {1, 0};
  hook_table.used_flags = torch::tensor(std::vector<int64_t>{1, 0}).to(torch::kBool);
  torch::manual_seed(13);
  const auto q = torch::randn({2, 1, H, T, Dh}).expand({2, B, H, T, Dh}).contiguous();  // the same content in both examples
  const auto k = torch::randn({2, 1, H, T, Dh}).expand({2, B, H, T, Dh}).contiguous();
  const auto plain = torch::randn({2, B, H, T, T});
  SiteState state;
  state.block = 0;
  state.per_example = true;
  state.q = q;
  state.k = k;
  state.scores = plain;
  state.logits = plain;
  ASSERT_TRUE(polar_hook().replaces_scores());
  polar_hook().apply(hook_table, state);
  EXPECT_TRUE(torch::equal(state.logits[1], plain[1])) << "a member without the hook keeps its logits";
  auto softplus = [](double x) { return std::log1p(std::exp(x)); };
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) {
        double expected = 0;
        for (int64_t c = 0; c < Dh; ++c)
          expected += softplus(q[0][0][h][i][c].item<double>()) * softplus(k[0][0][h][j][c].item<double>()) *
                      std::cos((at[i] - at[j]) * theta(c) - clamped(h, c));
        expected /= std::sqrt(static_cast<double>(Dh));
        for (int64_t b = 0; b < B; ++b)
          EXPECT_NEAR(state.logits[0][b][h][i][j].item<double>(), expected, 1e-4) << b << " " << h << " " << i << " " << j;
        EXPECT_NEAR(state.logits[0][1][h][i][j].item<double>(), state.logits[0][0][h][i][j].item<double>(), 1e-4)
            << "shifted positions, the same logits";
      }
}

// RoPE's rescalings for evaluation against their formulas (f_i = base^(-2i / R)).
TEST(RopeRescaling, InterpolationNtkAndYarnFollowTheirFormulas) {
  const int64_t T = 16, D = 8, Dh = 8, R = 8;
  auto rope = content_scheme_make("rope", {}, {T, D, 1, 2, false});
  auto frequency = [&](int64_t i, double base) { return std::pow(base, -2.0 * i / R); };
  const double s = 2.5;
  rope->rescale_for_evaluation({"pi", s, 10});
  auto pi = rope->table(rotation_hook(), T);
  rope->rescale_for_evaluation({"ntk", s, 10});
  auto ntk = rope->table(rotation_hook(), T);
  rope->rescale_for_evaluation({"yarn", s, 10});
  auto yarn = rope->table(rotation_hook(), T);
  ASSERT_EQ(rope->hooks().size(), 2u) << "YaRN's temperature through the qk_scale hook";
  auto temperature = rope->table(qk_scale_hook(), T);
  rope->rescale_for_evaluation({});
  EXPECT_EQ(rope->hooks().size(), 1u);
  auto plain = rope->table(rotation_hook(), T);
  const double ntk_base = 10000.0 * std::pow(s, static_cast<double>(R) / (R - 2));
  for (int64_t p = 0; p < T; ++p)
    for (int64_t i = 0; i < Dh / 2; ++i) {
      const double f = frequency(i, 10000.0);
      EXPECT_NEAR(plain[p][i].item<double>(), p * f, 1e-5);
      EXPECT_NEAR(pi[p][i].item<double>(), p * f / s, 1e-5);
      EXPECT_NEAR(ntk[p][i].item<double>(), p * frequency(i, ntk_base), 1e-5);
      const double turns = 10 * f / (2 * M_PI), kept = std::clamp((turns - 1) / 31, 0.0, 1.0);
      EXPECT_NEAR(yarn[p][i].item<double>(), p * ((1 - kept) * f / s + kept * f), 1e-5);
      for (int which : {0, 1})
        EXPECT_NEAR(temperature[which][p][i].item<double>(), std::log(0.1 * std::log(s) + 1), 1e-6);
    }
  // NTK's exponent R / (R - 2) needs two rotated pairs.
  PositionalOptions one_pair;
  one_pair.rope_fraction = 0.25;  // Dh 8: one pair
  auto narrow = content_scheme_make("rope", one_pair, {T, D, 1, 2, false});
  EXPECT_NE(narrow->rescaling_problem({"ntk", s, 10}), "");
  EXPECT_EQ(narrow->rescaling_problem({"pi", s, 10}), "");
}

}  // namespace
}  // namespace copytask
