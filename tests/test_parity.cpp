// Parity with an independent PyTorch implementation (tests/reference/make_parity_fixtures.py,
// float64): logits, loss, attention weights and every gradient (the schemes' parameters'
// too), for every scheme and option variant with the causal mask off and on, on the
// LibTorch model and on the fused CPU step. The C++ model runs in float32, so the
// tolerance is float32's. The fused step's check runs on every compiled variant of the CPU
// kernels this CPU can execute (cpu_variants.h).
#include <fstream>

#include <gtest/gtest.h>

#include "autograd_only_scheme.h"
#include "cpu_variants.h"
#include "model/fused_cpu.h"
#include "model/positional.h"
#include "parity_fixtures.h"
#include "task/task_kind.h"
#include "test_util.h"

namespace copytask {
namespace {
using namespace test::parity;

class Parity : public test::CpuVariantTest {};
INSTANTIATE_CPU_VARIANTS(Parity);

void check_mixed_batch(const std::vector<Fixture>& fixtures);
void check_fused_batch(const std::vector<Fixture>& fixtures);

// Every layer form (config/layer_form.h) has a fixture: the default's are the scheme
// fixtures, each other value's a variant with it (python/copytask_ref/layer_forms.py).
void expect_every_layer_form_covered(const std::vector<std::pair<std::string, std::vector<Fixture>>>& groups,
                                     unsigned step) {
  for (const LayerForm& form : layer_forms_each_value()) {
    if (step && !layer_form_unsupported(form, step).empty()) continue;
    const std::string text = layer_form_text(form);
    EXPECT_TRUE(std::any_of(groups.begin(), groups.end(), [&](const auto& g) { return g.first == text; }))
        << "layer form " << text << " has no fixture: declare a Variant with it (docs/adding-a-layer-form.md)";
  }
}

// Loads every fixture into its own member of a mixed batch, one batch per layer form, so
// the test checks each scheme and the member machinery (per-member schemes, masks,
// gradients) at once.
TEST_P(Parity, EveryFixtureAsOneMemberOfAMixedBatch) {
  std::vector<Fixture> fixtures;
  for (const auto& name : fixture_names()) fixtures.push_back(load_fixture(name));
  const EncoderShape shape = shape_of(fixtures[0].json["config"]);
  const std::vector<MemberSpec> members = fixture_members(fixtures);
  // Every registered scheme and option has fixtures, and every scheme with the causal mask on
  // and (where it is defined) off.
  for (const auto& name : positional_names()) {
    if (test::is_test_only_scheme(name)) continue;  // the reference covers the project's schemes
    for (bool causal : {false, true}) {
      const bool defined = test::positional_runs(name, test::small_options(), causal, shape);
      const bool covered = std::any_of(members.begin(), members.end(), [&](const MemberSpec& member) {
        return member.positional == name && member.causal == causal;
      });
      EXPECT_EQ(covered, defined) << name << (causal ? " causal" : "") << ": a fixture "
                                  << (defined ? "is missing" : "exists for a form the scheme refuses");
    }
  }
  for (const auto& option : positional_option_registry())
    EXPECT_TRUE(std::any_of(members.begin(), members.end(),
                            [&](const MemberSpec& member) { return option.enabled(member.options); }))
        << "option " << option.key << " has no fixture";
  const auto groups = fixtures_by_form(std::move(fixtures));
  expect_every_layer_form_covered(groups, 0);
  for (const auto& [form, group] : groups) {
    SCOPED_TRACE("layer form " + form);
    std::printf("layer form %s: %zu fixtures\n", form.c_str(), group.size());
    check_mixed_batch(group);
  }
}

// The fixtures of one layer form as the members of ONE batch on the LibTorch model.
void check_mixed_batch(const std::vector<Fixture>& fixtures) {
  const int64_t M = static_cast<int64_t>(fixtures.size());
  const std::vector<MemberSpec> members = fixture_members(fixtures);
  LoadedBatch batch = loaded_batch(fixtures);
  Encoder& model = batch.model;
  const auto& tokens = batch.tokens;
  const auto& targets = batch.targets;

  auto gradient_difference = [&](int64_t m, std::string* worst_name) {
    return fixture_gradient_difference(model, m, fixtures[m], worst_name);
  };

  // The IDs of the fixtures with position IDs are the reference's; at evaluation (no start
  // drawn) copytask's own give the same up to each example's start: offset 0..T-1, coupled
  // each output at its source's ID (the coupling written twice, independently).
  if (batch.positions.defined()) {
    const auto own = model->evaluation_positions(torch::stack(tokens), 0);  // (M, B, T)
    for (int64_t m = 0; m < M; ++m) {
      if (!fixtures[m].json.contains("positions") || members[m].options.position_ids == "random") continue;
      if (fixtures[m].json["config"].contains("task")) continue;  // a task of its own: ChoFixture... below
      const auto given = batch.positions[m];
      EXPECT_TRUE(torch::equal(given - given.narrow(1, 0, 1), own[m])) << fixtures[m].name << ": other IDs than copytask's";
    }
  }

  std::vector<torch::Tensor> attention;
  auto logits = model->forward(torch::stack(tokens), nullptr, &attention, batch.positions);  // (M, B, T, V)
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
    std::string worst_name;
    const double grad_diff = gradient_difference(m, &worst_name);
    std::printf("  %-30s maxdiff logits %.2e  loss %.2e  attention %.2e  grads %.2e (%s)\n", fixtures[m].name.c_str(),
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
}

// The hand-written CPU step (model/fused_cpu.h) against the fixtures of every scheme that has
// one (a scheme may train on the autograd step only: StepSupport, model/positional.h): the
// tables in, their gradients out and on to the schemes' parameters; and its forward pass.
TEST_P(Parity, TheFusedStepOnEveryFixtureOfASchemeWithOne) {
  std::vector<Fixture> fixtures;
  for (const auto& name : fixture_names()) {
    Fixture fixture = load_fixture(name);
    const auto& config = fixture.json["config"];
    if (positional_steps(config["positional"], options_of(config)) & kFusedCpuStep)
      fixtures.push_back(std::move(fixture));
  }
  ASSERT_FALSE(fixtures.empty());
  // Every layer form the fused step lists as its own has a fixture it is checked on.
  const auto groups = fixtures_by_form(std::move(fixtures));
  expect_every_layer_form_covered(groups, kFusedCpuStep);
  for (const auto& [form, group] : groups) {
    SCOPED_TRACE("layer form " + form);
    const std::string unsupported = layer_form_unsupported(form_of(group[0].json["config"]), kFusedCpuStep);
    if (!unsupported.empty()) {
      std::printf("layer form %s: not on the fused step (%s)\n", form.c_str(), unsupported.c_str());
      continue;
    }
    check_fused_batch(group);
  }
}

// The fixtures of one layer form as ONE batch on the fused CPU step.
void check_fused_batch(const std::vector<Fixture>& fixtures) {
  const int64_t M = static_cast<int64_t>(fixtures.size());
  LoadedBatch batch = loaded_batch(fixtures);
  Encoder& model = batch.model;
  const auto& tokens = batch.tokens;
  const auto& targets = batch.targets;
  model->zero_grad();
  const PositionalTables tables = model->positional_tables(batch.table_positions);
  PositionalTables table_grads;
  const auto fused_losses = fused_cpu_loss_backward(*model, tables, torch::stack(tokens), torch::stack(targets), nullptr,
                                                    &table_grads, batch.positions);  // (M)
  model->positional_backward(tables, table_grads);
  // And its forward pass (evaluation's): the logits.
  const auto fused_logits = fused_cpu_forward(*model, tables, torch::stack(tokens), nullptr, batch.positions);
  double worst_fused_loss = 0, worst_fused_grad = 0, worst_fused_logits = 0;
  for (int64_t m = 0; m < M; ++m) {
    const double loss_diff = std::abs(fused_losses[m].item<double>() - fixtures[m].json["loss"].get<double>());
    EXPECT_LT(loss_diff, kTolerance) << fixtures[m].name << " (fused)";
    std::string worst_name;
    const double grad_diff = fixture_gradient_difference(model, m, fixtures[m], &worst_name);
    EXPECT_LT(grad_diff, kTolerance) << fixtures[m].name << " (fused) gradient " << worst_name;
    const double logits_diff = test::max_abs_diff(fused_logits[m], test::tensor_from_json(fixtures[m].json["logits"]));
    EXPECT_LT(logits_diff, kTolerance) << fixtures[m].name << " (fused forward)";
    std::printf("  %-30s fused maxdiff loss %.2e  grads %.2e (%s)  forward logits %.2e\n", fixtures[m].name.c_str(),
                loss_diff, grad_diff, worst_name.c_str(), logits_diff);
    worst_fused_loss = std::max(worst_fused_loss, loss_diff);
    worst_fused_grad = std::max(worst_fused_grad, grad_diff);
    worst_fused_logits = std::max(worst_fused_logits, logits_diff);
  }
  std::printf("parity maxdiff of the fused CPU step: loss %.2e, gradients %.2e, forward logits %.2e\n", worst_fused_loss,
              worst_fused_grad, worst_fused_logits);
}

// The fixture of Cho et al.'s convention (a next-token copy, an end token of its own, only the
// outputs and the end in the loss, Cho's coupled IDs) was made by the reference from its own
// reading of the paper: copytask's task layer gives the same sequence, targets (-1 out of
// the loss) and IDs up to each example's start, so the parity above is of copytask's layout.
TEST(Parity, ChoFixtureIsCopytasksOwnLayoutOfTheSameExamples) {
  int64_t checked = 0;
  for (const auto& name : fixture_names()) {
    const Fixture fixture = load_fixture(name);
    const auto& config = fixture.json["config"];
    if (!config.contains("task")) continue;
    TaskConfig task;
    task.vocab_size = config["vocab_size"];
    task.context = config["context"];
    task.kind = config["task"]["kind"];
    task.format = config["task"]["format"];
    task.end_token = config["task"]["end_token"];
    task.convention = config["task"]["convention"];
    ASSERT_EQ(task.convention, "cho") << name;
    const int64_t T = task.context;
    for (size_t b = 0; b < fixture.json["tokens"].size(); ++b) {
      const std::vector<int64_t> tokens = fixture.json["tokens"][b], targets = fixture.json["targets"][b],
                                 given = fixture.json["positions"][b];
      const OutputSources sources = output_sources(task, tokens.data(), T);
      ASSERT_GE(sources.copy_at, 1) << name;
      Example example;
      example.content.assign(tokens.begin(), tokens.begin() + sources.copy_at);
      EXPECT_EQ(example_input(task, example, T), tokens) << name << " row " << b;
      EXPECT_EQ(example_target(task, example, T), targets) << name << " row " << b;
      std::vector<int64_t> places(static_cast<size_t>(T));
      coupled_places(task, tokens.data(), T, places.data());
      const int64_t start = given[static_cast<size_t>(sources.copy_at)] - places[static_cast<size_t>(sources.copy_at)];
      for (int64_t t = 0; t < T; ++t)
        EXPECT_EQ(given[static_cast<size_t>(t)], coupled_id(task, places[static_cast<size_t>(t)], start))
            << name << " row " << b << " position " << t;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "no fixture of Cho et al.'s convention; run tests/reference/make_parity_fixtures.py";
}

// The same check must fail when the model is wrong: perturb one weight of one member and
// the comparison has to notice (guards against a parity test that cannot fail).
TEST(ParityCheck, DetectsAPerturbedWeight) {
  Fixture fixture = load_fixture("t5", false);
  const auto& config = fixture.json["config"];
  Encoder model(shape_of(config), std::vector<MemberSpec>{{"t5", 0, "t5", false, options_of(config)}}, torch::kCPU);
  torch::NoGradGuard no_grad;
  for (auto& [slot, name] : parameters_by_fixture_name(model, 0))
    slot.copy_(test::tensor_from_json(fixture.json["params"][name]));
  model->eval();
  auto tokens = test::tokens_from_json(fixture.json["tokens"]).unsqueeze(0);
  auto expected = test::tensor_from_json(fixture.json["logits"]);
  EXPECT_LT(test::max_abs_diff(model->forward(tokens)[0], expected), kTolerance);
  model->scheme(0).named_parameters()["bucket_bias"][1][0] += 1e-2;
  EXPECT_GT(test::max_abs_diff(model->forward(tokens)[0], expected), kTolerance);
}

}  // namespace
}  // namespace copytask
