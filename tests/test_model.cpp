// Properties of the member-batched encoder: the causal mask, member independence, dropout.
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "model/float_layout.h"
#include "model/parameter_layout.h"
#include "model/positional.h"
#include "model/stacked.h"
#include "test_util.h"

namespace copytask {
namespace {

// Every registered scheme and option (test_util.h) with the causal mask on, or off.
std::vector<MemberSpec> every_scheme(bool causal) {
  std::vector<MemberSpec> members;
  for (const auto& member : test::every_positional_member(test::small_shape(), 10))
    if (member.causal == causal) members.push_back(member);
  return members;
}

// Logits of tokens that agree up to position `kept` and differ after it.
std::pair<torch::Tensor, torch::Tensor> logits_of_two_inputs(Encoder& model, int64_t kept) {
  const auto& shape = model->shape();
  auto first = test::random_tokens(model->member_count(), 4, shape, 3);
  auto second = first.clone();
  auto tail = test::random_tokens(model->member_count(), 4, shape, 4);
  second.narrow(2, kept + 1, shape.context - kept - 1).copy_(tail.narrow(2, kept + 1, shape.context - kept - 1));
  // Make sure the inputs really differ after `kept`.
  second.select(2, shape.context - 1).copy_((first.select(2, shape.context - 1) + 1) % shape.vocab);
  torch::NoGradGuard no_grad;
  model->eval();
  return {model->forward(first), model->forward(second)};
}

TEST(Causal, ChangingLaterTokensLeavesEarlierOutputsUnchanged) {
  Encoder model(test::small_shape(), every_scheme(true), torch::kCPU);
  for (int64_t kept : {0, 3, 7}) {
    auto [a, b] = logits_of_two_inputs(model, kept);  // (M, B, T, V)
    auto early = test::max_abs_diff(a.narrow(2, 0, kept + 1), b.narrow(2, 0, kept + 1));
    EXPECT_LT(early, 1e-6) << "positions 0.." << kept << " changed";
    EXPECT_GT(test::max_abs_diff(a.narrow(2, kept + 1, 1), b.narrow(2, kept + 1, 1)), 1e-4)
        << "position " << kept + 1 << " should see its own changed token";
  }
}

TEST(Causal, WithoutTheMaskEarlierOutputsDoChange) {
  Encoder model(test::small_shape(), every_scheme(false), torch::kCPU);
  auto [a, b] = logits_of_two_inputs(model, 3);
  for (int64_t m = 0; m < model->member_count(); ++m)
    EXPECT_GT(test::max_abs_diff(a[m].narrow(1, 0, 4), b[m].narrow(1, 0, 4)), 1e-5) << model->members()[m].arm;
}

TEST(Members, AMemberOutputDependsOnlyOnItsOwnParameters) {
  Encoder model(test::small_shape(), every_scheme(false), torch::kCPU);
  auto tokens = test::random_tokens(model->member_count(), 3, model->shape(), 5);
  torch::NoGradGuard no_grad;
  model->eval();
  auto before = model->forward(tokens);
  for (auto& [name, value] : model->stacked_parameters()) value[2].add_(0.5);  // change member 2 only
  for (auto& value : model->scheme(2).parameters()) value.add_(0.5);
  auto after = model->forward(tokens);
  for (int64_t m = 0; m < model->member_count(); ++m) {
    if (m == 2) EXPECT_GT(test::max_abs_diff(before[m], after[m]), 1e-3);
    else EXPECT_EQ(test::max_abs_diff(before[m], after[m]), 0.0) << "member " << m;
  }
}

TEST(Members, SameSeedStartsFromTheSameWeightsInEveryScheme) {
  Encoder a(test::small_shape(), std::vector<MemberSpec>{{"rope", 7, "rope", false, {}}}, torch::kCPU);
  Encoder b(test::small_shape(), std::vector<MemberSpec>{{"t5", 7, "t5", true, {}}}, torch::kCPU);
  Encoder c(test::small_shape(), std::vector<MemberSpec>{{"t5", 8, "t5", true, {}}}, torch::kCPU);
  auto pa = a->stacked_parameters(), pb = b->stacked_parameters(), pc = c->stacked_parameters();
  double same = 0, different = 0;
  for (size_t j = 0; j < pa.size(); ++j) {
    same = std::max(same, test::max_abs_diff(pa[j].second, pb[j].second));
    different = std::max(different, test::max_abs_diff(pa[j].second, pc[j].second));
  }
  EXPECT_EQ(same, 0.0);
  EXPECT_GT(different, 0.1);
  // A learned table draws in the model's fixed order too: its other weights are the same.
  Encoder d(test::small_shape(), std::vector<MemberSpec>{{"learned", 7, "learned", false, {}}}, torch::kCPU);
  auto pd = d->stacked_parameters();
  for (size_t j = 0; j < pa.size(); ++j) EXPECT_EQ(test::max_abs_diff(pa[j].second, pd[j].second), 0.0) << pa[j].first;
}

TEST(Dropout, MasksOfAMemberDoNotDependOnItsNeighbours) {
  auto shape = test::small_shape(0.3);
  Encoder lone(shape, std::vector<MemberSpec>{{"rope", 5, "rope", false}}, torch::kCPU);
  Encoder batch(shape, std::vector<MemberSpec>{{"none", 1, "none", false}, {"rope", 5, "rope", false}, {"alibi", 9, "alibi", true}},
                torch::kCPU);
  for (int step = 0; step < 3; ++step) {
    auto lone_masks = lone->dropout_masks(4);
    auto batch_masks = batch->dropout_masks(4);
    auto lone_mask = lone_masks.site(0, kAttentionWeights);    // the first site, member 0: (1, 4, H, T, T)
    auto batch_mask = batch_masks.site(0, kAttentionWeights);  // the first site, members 0..2
    EXPECT_EQ(test::max_abs_diff(lone_mask[0], batch_mask[1]), 0.0) << "step " << step;
    EXPECT_GT(test::max_abs_diff(batch_mask[0], batch_mask[1]), 0.0);
    // Kept values are scaled by 1/(1-p), and about p of them are dropped.
    const double kept = (batch_mask > 0).to(torch::kFloat64).mean().item<double>();
    EXPECT_NEAR(kept, 0.7, 0.1);
    EXPECT_NEAR(batch_mask.max().item<double>(), 1.0 / 0.7, 1e-5);
  }
}

// The CPU masks are a counter-based stream: any range drawn on its own equals the same
// range of the whole buffer, and each step draws new masks.
TEST(Dropout, AnyRangeOfTheStreamEqualsTheBuffer) {
  const EncoderShape shape = test::small_shape(0.25);
  Encoder model(shape, every_scheme(false), torch::kCPU);
  const int64_t M = model->member_count(), B = 37;
  const DropoutMasks first = model->dropout_masks(B), second = model->dropout_masks(B);
  const DropoutLayout& layout = first.layout();
  ASSERT_NE(first.stream(), nullptr);
  // The whole row, site by site in the layout's order: (M, S).
  auto row = [&](const DropoutMasks& masks) {
    std::vector<torch::Tensor> sites;
    for (int64_t l = 0; l < shape.blocks; ++l)
      for (int site = 0; site < kDropoutSites; ++site)
        sites.push_back(masks.site(l, static_cast<DropoutSite>(site)).reshape({M, -1}));
    return torch::cat(sites, 1);
  };
  auto buffer = row(first);
  const int64_t S = layout.row();
  ASSERT_EQ(buffer.size(1), S);
  // The layout's starts agree with the order the sites were concatenated in.
  EXPECT_EQ(layout.start(1, kHidden, 2), layout.start(1, kHidden) + 2 * layout.example_size(kHidden));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t start : {int64_t{0}, int64_t{1}, int64_t{6}, S / 2 + 3, S - 5, layout.start(1, kHidden, 2)}) {
      std::vector<float> part(5);
      first.stream()->fill(m, start, 5, part.data());
      for (int64_t e = 0; e < 5; ++e) EXPECT_EQ(part[e], buffer[m][start + e].item<float>()) << m << " " << start + e;
    }
  auto next_buffer = row(second);
  const double changed = (buffer != next_buffer).to(torch::kFloat64).mean().item<double>();
  EXPECT_NEAR(changed, 2 * 0.25 * 0.75, 0.02) << "independent masks differ where exactly one drops";
  EXPECT_NEAR((buffer == 0).to(torch::kFloat64).mean().item<double>(), 0.25, 0.01);
}

// The stream as tensor operations (what a GPU computes) equals the scalar stream the fused
// CPU step draws, element for element, for ranges that start and end inside a word; and the
// step's vector forms equal it: eight words of one example, and a word of each of 16
// examples across the lanes.
TEST(Dropout, TheTensorFormEqualsTheStream) {
  const DropoutStream stream({1, 0x9E3779B97F4A7C15ULL, 12345678901234567ULL}, 42, 0.3);
  for (const auto& [first, count] : std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {1, 2}, {3, 997}, {4096, 64}, {6, 1}}) {
    const auto masks = dropout_stream_masks(stream, first, count, torch::kCPU);  // (3, count)
    ASSERT_EQ(masks.sizes(), (std::vector<int64_t>{3, count}));
    std::vector<float> row(static_cast<size_t>(count));
    for (int64_t m = 0; m < 3; ++m) {
      stream.fill(m, first, count, row.data());
      EXPECT_EQ(test::max_abs_diff(masks[m], torch::tensor(row)), 0.0) << "member " << m << " from " << first;
    }
  }
  // The words in vectors (what the fused step draws with AVX2 and AVX-512: masks 8 and 16 a
  // register) are the words one by one, for ranges that start and end inside a word and cover
  // several vectors of eight words.
  for (const auto& [first, count] : std::vector<std::pair<int64_t, int64_t>>{{0, 32}, {3, 997}, {5, 31}, {4095, 66}}) {
    std::vector<float> by_word(static_cast<size_t>(count)), by_8(static_cast<size_t>(count), -1.0f),
        by_16(static_cast<size_t>(count), -1.0f);
    for (int64_t m = 0; m < 3; ++m) {
      stream.fill<0>(m, first, count, by_word.data());
      stream.fill<8>(m, first, count, by_8.data());
      stream.fill<16>(m, first, count, by_16.data());
      EXPECT_EQ(by_8, by_word) << "member " << m << " from " << first;
      EXPECT_EQ(by_16, by_word) << "member " << m << " from " << first;
    }
  }
  // Across the lanes (what the fused step draws for a group of 16 examples): example g's
  // element i at [16 place + g], each example's words its own and anywhere in the stream,
  // the places in any order (here reversed), the same masks as each example's fill().
  {
    const int64_t words = 25;  // 100 elements an example
    const uint64_t first_word[16] = {0, 25, 50, 1000, 7, 3, 99999, 25, 26, 27, 400, 401, 5000, 123456789, 42, 1};
    struct Reversed {
      int64_t next;
      int64_t operator()() { return next--; }
    };
    std::vector<float> lanes(static_cast<size_t>(16 * 4 * words), -1.0f), example(static_cast<size_t>(4 * words));
    for (int64_t m = 0; m < 3; ++m) {
      Reversed place{4 * words - 1};
      stream.fill_lanes(m, first_word, words, place, lanes.data());
      for (int64_t g = 0; g < 16; ++g) {
        stream.fill(m, static_cast<int64_t>(4 * first_word[g]), 4 * words, example.data());
        for (int64_t i = 0; i < 4 * words; ++i)
          ASSERT_EQ(lanes[16 * (4 * words - 1 - i) + g], example[i])
              << "member " << m << ", lane " << g << ", element " << i;
      }
    }
  }
  // And it does drop about 30%.
  const double dropped = (dropout_stream_masks(stream, 0, 100000, torch::kCPU) == 0).to(torch::kFloat64).mean().item<double>();
  EXPECT_NEAR(dropped, 0.3, 0.01);
}

TEST(Dropout, EvalModeIsDeterministicAndTrainingMasksChangeOutputs) {
  Encoder model(test::small_shape(0.2), every_scheme(false), torch::kCPU);
  auto tokens = test::random_tokens(model->member_count(), 3, model->shape(), 6);
  torch::NoGradGuard no_grad;
  auto a = model->forward(tokens), b = model->forward(tokens);
  EXPECT_EQ(test::max_abs_diff(a, b), 0.0);
  auto masks = model->dropout_masks(3);
  auto c = model->forward(tokens, &masks);
  EXPECT_GT(test::max_abs_diff(a, c), 1e-4);
}

TEST(Loss, MemberLossIsTheMeanCrossEntropy) {
  torch::manual_seed(3);
  auto logits = torch::randn({2, 3, 4, 5});
  auto targets = torch::randint(0, 5, {2, 3, 4}, torch::kLong);
  auto losses = member_losses(logits, targets);
  for (int64_t m = 0; m < 2; ++m) {
    auto expected = torch::nn::functional::cross_entropy(logits[m].reshape({-1, 5}), targets[m].reshape({-1}));
    EXPECT_NEAR(losses[m].item<double>(), expected.item<double>(), 1e-6);
  }
}

}  // namespace
}  // namespace copytask

namespace copytask {
namespace {

// The encoder's parameter layout (model/parameter_layout.h) is every parameter outside the
// positional schemes, once, in its order: what the fused step, checkpoints and the parity
// tests read.
TEST(Model, TheParameterLayoutIsEveryParameterOutsideTheSchemesOnce) {
  EncoderShape shape = test::small_shape();
  shape.blocks = 3;
  Encoder model(shape, std::vector<MemberSpec>{{"t5", 0, "t5", false, test::small_options()}}, torch::kCPU);
  const auto layout = model->stacked_parameters();
  ASSERT_EQ(static_cast<int64_t>(layout.size()), parameter_count(3));
  std::set<std::string> names;
  for (size_t i = 0; i < layout.size(); ++i) {
    EXPECT_EQ(layout[i].first, parameter_name(static_cast<int64_t>(i)));
    EXPECT_TRUE(names.insert(layout[i].first).second) << layout[i].first << " twice";
  }
  EXPECT_EQ(layout.back().first, "blocks.2.ff.fc2.bias");
  size_t outside_schemes = 0;
  for (const auto& item : model->named_parameters()) {
    if (item.key().rfind("positional.", 0) == 0) continue;
    ++outside_schemes;
    EXPECT_TRUE(names.count(item.key())) << item.key() << " is not in the layout";
  }
  EXPECT_EQ(outside_schemes, layout.size());
}

// The fused step's workspace is laid out from one list (model/float_layout.h): parts start
// where the one before ends, the total is their sum, and a part left out is refused.
TEST(Model, AFloatLayoutIsItsListOfParts) {
  const FloatLayout layout({{"a", 3}, {"b", 0}, {"c", 5}});
  EXPECT_EQ(layout.total(), 8);
  EXPECT_EQ(layout.offset(0), 0);
  EXPECT_EQ(layout.offset(2), 3);
  std::vector<float> buffer(8), short_buffer(7);
  EXPECT_EQ(layout.at(buffer, 2), buffer.data() + 3);
  EXPECT_THROW(layout.at(short_buffer, 0), std::logic_error);
  EXPECT_THROW(layout.at(buffer, 3), std::logic_error);
  EXPECT_THROW(FloatLayout({{"a", 3}, {}}), std::logic_error);
}

// The GPU's forms of the stacked layers (model/stacked.h), run here on the CPU: the matmul in
// chunks of rows and the layer norm by moments give the plain forms' values and gradients.
TEST(Stacked, TheMatmulInChunksOfRowsIsTheBatchedMatmulWithItsGradients) {
  EXPECT_EQ(stacked_matmul_chunks(90000), 80);  // the reference study's rows: 1125 a chunk
  EXPECT_EQ(stacked_matmul_chunks(1280), 1);    // a minibatch of 128: one chunk
  EXPECT_EQ(stacked_matmul_chunks(2 * 5 * 9001), 10);
  for (int64_t N : {6000, 2 * 5 * 9001}) {
    const int64_t chunks = stacked_matmul_chunks(N);
    EXPECT_GE(N / chunks, kStackedMatmulChunkRows);
    EXPECT_EQ(N % chunks, 0);
  }
  torch::manual_seed(3);
  const auto rows = torch::randn({3, 6000, 20}, torch::requires_grad());
  const auto weight = torch::randn({3, 20, 7}, torch::requires_grad());
  const auto upstream = torch::randn({3, 6000, 7});
  auto plain = stacked_matmul(rows, weight, 1);
  const auto plain_grads = torch::autograd::grad({plain}, {rows, weight}, {upstream});
  auto chunked = stacked_matmul(rows, weight, stacked_matmul_chunks(6000));
  const auto chunked_grads = torch::autograd::grad({chunked}, {rows, weight}, {upstream});
  EXPECT_LT(test::max_abs_diff(plain, chunked), 1e-5);
  EXPECT_LT(test::max_abs_diff(plain_grads[0], chunked_grads[0]), 1e-5);
  const double largest = plain_grads[1].abs().max().item<double>();
  EXPECT_GT(largest, 1.0) << "the weight gradient sums many rows";
  EXPECT_LT(test::max_abs_diff(plain_grads[1], chunked_grads[1]), 1e-5 * largest);
  EXPECT_THROW(stacked_matmul(rows, weight, 7), c10::Error) << "7 chunks do not divide 6000 rows";
}

TEST(Stacked, TheLayerNormByMomentsIsLibTorchsWithItsGradient) {
  torch::manual_seed(4);
  const auto x = (3 * torch::randn({2, 50, 10, 20}) + 1).requires_grad_();
  const auto upstream = torch::randn({2, 50, 10, 20});
  const auto by_moments = layer_norm_by_moments(x, 1e-5);
  const auto libtorch = torch::layer_norm(x, {20}, {}, {}, 1e-5);
  EXPECT_LT(test::max_abs_diff(by_moments, libtorch), 1e-5);
  const auto a = torch::autograd::grad({by_moments}, {x}, {upstream})[0];
  const auto b = torch::autograd::grad({libtorch}, {x}, {upstream})[0];
  EXPECT_LT(test::max_abs_diff(a, b), 1e-5);
  EXPECT_GT(b.abs().max().item<double>(), 0.1);
}

}  // namespace
}  // namespace copytask
