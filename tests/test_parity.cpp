// Parity with an independent PyTorch implementation (tests/reference/make_parity_fixtures.py,
// float64): logits, loss, attention weights and every gradient, for each scheme with the
// causal mask off and on. The C++ model runs in float32, so the tolerance is float32's.
#include <fstream>

#include <gtest/gtest.h>

#include "model/fused_cpu.h"
#include "model/positional.h"
#include "test_util.h"

namespace copytask {
namespace {

struct Fixture {
  std::string name;
  nlohmann::json json;
};

Fixture load_fixture(const std::string& positional, bool causal) {
  const std::string name = "parity_" + positional + (causal ? "_causal" : "");
  std::ifstream file(test::fixtures_dir() + "/" + name + ".json");
  EXPECT_TRUE(file.good()) << "missing fixture " << name << "; run tests/reference/make_parity_fixtures.py";
  return {name, nlohmann::json::parse(file)};
}

EncoderShape shape_of(const nlohmann::json& config) {
  EncoderShape shape;
  shape.vocab = config["vocab_size"];
  shape.context = config["context"];
  shape.embed = config["embed"];
  shape.heads = config["heads"];
  shape.blocks = config["blocks"];
  shape.hidden = config["hidden"];
  shape.dropout = 0.0;
  return shape;
}

constexpr double kTolerance = 5e-5;  // float32 against float64, values of order 1

// Loads every fixture into its own member of ONE mixed batch, so the test checks each
// scheme and the member machinery (per-member hooks, masks, gradients) at once.
TEST(Parity, EveryFixtureAsOneMemberOfAMixedBatch) {
  std::vector<Fixture> fixtures;
  for (const auto& positional : positional_names())
    for (bool causal : {false, true}) fixtures.push_back(load_fixture(positional, causal));
  const int64_t M = static_cast<int64_t>(fixtures.size());
  const EncoderShape shape = shape_of(fixtures[0].json["config"]);

  std::vector<MemberSpec> members;
  for (const auto& fixture : fixtures)
    members.push_back({fixture.name, 0, fixture.json["config"]["positional"], fixture.json["config"]["causal"]});
  Encoder model(shape, members, torch::kCPU);

  std::vector<torch::Tensor> tokens, targets;
  {
    torch::NoGradGuard no_grad;
    for (int64_t m = 0; m < M; ++m) {
      const auto& params = fixtures[m].json["params"];
      for (auto& item : model->named_parameters()) {
        ASSERT_TRUE(params.contains(item.key())) << fixtures[m].name << " lacks " << item.key();
        auto value = test::tensor_from_json(params[item.key()]);
        ASSERT_EQ(value.sizes(), item.value()[m].sizes()) << item.key();
        item.value()[m].copy_(value);
      }
      tokens.push_back(test::tokens_from_json(fixtures[m].json["tokens"]));
      targets.push_back(test::tokens_from_json(fixtures[m].json["targets"]));
    }
  }
  model->eval();
  std::vector<torch::Tensor> attention;
  auto logits = model->forward(torch::stack(tokens), nullptr, &attention);  // (M, B, T, V)
  auto losses = member_losses(logits, torch::stack(targets));              // (M)
  losses.sum().backward();

  double worst_logits = 0, worst_grad = 0, worst_attention = 0, worst_loss = 0;
  for (int64_t m = 0; m < M; ++m) {
    const auto& json = fixtures[m].json;
    const double logits_diff = test::max_abs_diff(logits[m], test::tensor_from_json(json["logits"]));
    const double loss_diff = std::abs(losses[m].item<double>() - json["loss"].get<double>());
    auto expected_attention = test::tensor_from_json(json["attention"]);  // (L, B, H, T, T)
    double attention_diff = 0;
    for (size_t l = 0; l < attention.size(); ++l)
      attention_diff = std::max(attention_diff, test::max_abs_diff(attention[l][m], expected_attention[l]));
    double grad_diff = 0;
    std::string worst_name;
    for (auto& item : model->named_parameters()) {
      const double diff = test::max_abs_diff(item.value().grad()[m], test::tensor_from_json(json["grads"][item.key()]));
      if (diff >= grad_diff) {
        grad_diff = diff;
        worst_name = item.key();
      }
    }
    std::printf("  %-28s maxdiff logits %.2e  loss %.2e  attention %.2e  grads %.2e (%s)\n", fixtures[m].name.c_str(),
                logits_diff, loss_diff, attention_diff, grad_diff, worst_name.c_str());
    EXPECT_LT(logits_diff, kTolerance) << fixtures[m].name;
    EXPECT_LT(loss_diff, kTolerance) << fixtures[m].name;
    EXPECT_LT(attention_diff, kTolerance) << fixtures[m].name;
    EXPECT_LT(grad_diff, kTolerance) << fixtures[m].name << " worst gradient " << worst_name;
    worst_logits = std::max(worst_logits, logits_diff);
    worst_loss = std::max(worst_loss, loss_diff);
    worst_attention = std::max(worst_attention, attention_diff);
    worst_grad = std::max(worst_grad, grad_diff);
  }
  std::printf("parity maxdiff over %lld fixtures: logits %.2e, loss %.2e, attention %.2e, gradients %.2e\n",
              static_cast<long long>(M), worst_logits, worst_loss, worst_attention, worst_grad);

  // The hand-written CPU training step (model/fused_cpu.h) against the same fixtures.
  model->zero_grad();
  const auto fused_losses = fused_cpu_loss_backward(*model, torch::stack(tokens), torch::stack(targets), nullptr);  // (M)
  double worst_fused_loss = 0, worst_fused_grad = 0;
  for (int64_t m = 0; m < M; ++m) {
    const auto& json = fixtures[m].json;
    const double loss_diff = std::abs(fused_losses[m].item<double>() - json["loss"].get<double>());
    EXPECT_LT(loss_diff, kTolerance) << fixtures[m].name << " (fused)";
    worst_fused_loss = std::max(worst_fused_loss, loss_diff);
    for (auto& item : model->named_parameters()) {
      const double diff = test::max_abs_diff(item.value().grad()[m], test::tensor_from_json(json["grads"][item.key()]));
      EXPECT_LT(diff, kTolerance) << fixtures[m].name << " (fused) gradient " << item.key();
      worst_fused_grad = std::max(worst_fused_grad, diff);
    }
  }
  std::printf("parity maxdiff of the fused CPU step: loss %.2e, gradients %.2e\n", worst_fused_loss, worst_fused_grad);
}

// The same check must fail when the model is wrong: perturb one weight of one member and
// the comparison has to notice (guards against a parity test that cannot fail).
TEST(Parity, DetectsAPerturbedWeight) {
  Fixture fixture = load_fixture("rope", false);
  Encoder model(shape_of(fixture.json["config"]), std::vector<MemberSpec>{{"rope", 0, "rope", false}}, torch::kCPU);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters())
    item.value()[0].copy_(test::tensor_from_json(fixture.json["params"][item.key()]));
  model->eval();
  auto tokens = test::tokens_from_json(fixture.json["tokens"]).unsqueeze(0);
  auto expected = test::tensor_from_json(fixture.json["logits"]);
  EXPECT_LT(test::max_abs_diff(model->forward(tokens)[0], expected), kTolerance);
  auto blocks = model->blocks;
  blocks[1]->as<BlockImpl>()->attn->qkv->weight[0][0][0] += 1e-2;
  EXPECT_GT(test::max_abs_diff(model->forward(tokens)[0], expected), kTolerance);
}

}  // namespace
}  // namespace copytask
