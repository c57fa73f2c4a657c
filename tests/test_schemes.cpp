// The scheme interface (docs/design.md section 2), for every scheme and option of the
// registry, not a list here: each names itself and says why a config cannot run it; each
// hook's table has the hook's shape; the steps a scheme declares include the one that trains
// it; and every parameter a scheme or option owns receives a non-zero gradient through a
// real training step, on the fused CPU step (tables in, tables' gradients out, autograd to
// the parameters) and on the autograd step.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "autograd_only_scheme.h"
#include "config/config_fields.h"
#include "model/hooks/content_score.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"
#include "task/copy_task.h"
#include "test_util.h"
#include "train/train_data.h"
#include "train/trainer.h"

namespace copytask {
namespace {

TEST(Schemes, TheRegistryNamesEachSchemeAndOptionOnce) {
  std::set<std::string> names;
  for (const auto& entry : positional_registry()) {
    EXPECT_TRUE(names.insert(entry.name).second) << entry.name << " twice";
    EXPECT_FALSE(entry.summary.empty()) << entry.name;
    EXPECT_EQ(positional_entry(entry.name), &entry);
    // Autograd is every scheme's fallback (a scheme without a fused CPU kernel trains on it).
    EXPECT_NE(entry.steps & kAutogradStep, 0u) << entry.name << " cannot train on the autograd step";
  }
  EXPECT_EQ(positional_names().size(), names.size());
  EXPECT_EQ(positional_entry("no-such-scheme"), nullptr);
  EXPECT_THROW(positional_scheme_make("no-such-scheme", {}, {}), std::invalid_argument);
  for (const auto& option : positional_option_registry()) {
    EXPECT_NE(config_field("model." + option.key), nullptr) << "option " << option.key << " has no config key";
    EXPECT_FALSE(option.enabled(PositionalOptions{})) << "option " << option.key << " is on by default";
  }
  // The config lists every scheme the registry has, as the one it checks model.positional against.
  EXPECT_EQ(scheme_rules().names, positional_names());
}

// The scheme of one member of every_positional_member, for a context of 10.
std::shared_ptr<PositionalScheme> member_scheme(const MemberSpec& spec, const EncoderShape& shape) {
  const PositionalShape positional{10, shape.embed, shape.heads, shape.blocks, spec.causal};
  return positional_scheme_make(spec.positional, spec.options, positional);
}

// Each member's hooks: a stacking hook's table has its shape at any P; a content table is
// its component's parameters, flat; the scheme's own table depends on parameters exactly
// when it has some.
TEST(Schemes, EachHooksTableHasTheHooksShape) {
  const EncoderShape shape = test::small_shape();
  int64_t checked = 0;
  for (const auto& spec : test::every_positional_member(shape)) {
    auto scheme = member_scheme(spec, shape);
    for (const Hook* hook : scheme->member_hooks()) {
      PositionalScheme* owner = scheme->owner_of(*hook);
      ASSERT_NE(owner, nullptr);
      for (int64_t P : {int64_t{10}, int64_t{13}}) {
        if (P > owner->position_limit()) continue;
        const torch::Tensor table = owner->table(*hook, P);
        ASSERT_TRUE(table.defined()) << spec.arm << " " << hook->name();
        EXPECT_EQ(table.scalar_type(), torch::kFloat32) << spec.arm << " " << hook->name();
        if (hook->stacks()) {
          EXPECT_EQ(table.sizes().vec(), hook->table_shape(shape, P)) << spec.arm << " " << hook->name() << " P " << P;
        } else {
          int64_t own = 0;
          for (const auto& parameter : owner->parameters(/*recurse=*/false)) own += parameter.numel();
          EXPECT_EQ(table.numel(), own) << spec.arm << " " << hook->name();
          EXPECT_NE(owner->content_score(), nullptr) << spec.arm << ": a content table without a term";
        }
        EXPECT_EQ(table.requires_grad(), owner->learned()) << spec.arm << " " << hook->name();
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// Whether moving `parameter` (one of member m's) changes that member's outputs: a random
// move of every entry, the logits compared, the parameter put back. A bias that shifts all of
// a query's scores alike (the last layer of a score-bias MLP: dynamic's mlpN_bias) moves
// nothing through the softmax, so its true gradient is zero.
bool moves_outputs(Encoder& model, int64_t m, torch::Tensor& parameter, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  model->eval();
  const torch::Tensor before = model->forward(tokens).select(0, m).clone();
  const torch::Tensor kept = parameter.clone();
  parameter.add_(torch::randn_like(parameter) * 0.3);
  const torch::Tensor after = model->forward(tokens).select(0, m);
  parameter.copy_(kept);
  model->train();
  return test::max_abs_diff(before, after) > 1e-4;  // a real move: >= 1e-2 here; rounding: ~1e-7
}

// Every parameter that can move its member's outputs gets a non-zero gradient; one that
// cannot (moves_outputs) gets one that is zero up to rounding. Asserting "non-zero" for
// those had passed only while rounding left ~1e-9 behind; LibTorch 2.11 sums it to 0 exactly.
void expect_every_scheme_parameter_gets_a_gradient(bool fused) {
  TaskConfig task;
  task.examples = 300;
  const TrainData data = train_data_upload(copy_task_generate(task), torch::kCPU);
  TrainConfig train;
  train.batch_size = 32;
  const auto members = test::every_positional_member(test::small_shape(0.1), 0, fused ? kFusedCpuStep : 0u);
  Encoder model(test::small_shape(0.1), members, torch::kCPU);
  const auto made = training_step_make(model, data, test::with_step(train, fused));
  TrainingStep& step = *made;
  ASSERT_EQ(step.name(), fused ? "fused CPU" : "autograd");
  const torch::Tensor tokens = test::random_tokens(model->member_count(), 4, model->shape(), 5);
  int64_t owned = 0, inert = 0;
  for (int64_t m = 0; m < model->member_count(); ++m) owned += static_cast<int64_t>(model->scheme(m).parameters().size());
  ASSERT_GT(owned, 0);
  for (int round = 0; round < 2; ++round) {  // a second step: the gradients are set again, not left over
    step.run();
    int64_t checked = 0;
    for (int64_t m = 0; m < model->member_count(); ++m)
      for (auto& item : model->scheme(m).named_parameters()) {
        const torch::Tensor grad = item.value().grad().defined() ? item.value().grad().clone() : torch::Tensor();
        ASSERT_TRUE(grad.defined()) << members[m].arm << " " << item.key();
        const double largest = grad.abs().max().item<double>();
        if (moves_outputs(model, m, item.value(), tokens)) {
          EXPECT_GT(largest, 0.0) << members[m].arm << " " << item.key();
        } else {
          EXPECT_LE(largest, 1e-6) << members[m].arm << " " << item.key() << " moves no output, yet has a gradient";
          inert += round == 0;
        }
        ++checked;
      }
    EXPECT_EQ(checked, owned) << "every parameter every member's positional owns";
  }
  // Both ways, so the split is not blind: dynamic's last bias at least moves nothing, and
  // most parameters move the outputs.
  EXPECT_GT(inert, 0) << "dynamic's last MLP bias moves no output: is moves_outputs blind?";
  EXPECT_LT(inert, owned / 4) << "most parameters must move the outputs: is moves_outputs blind?";
}

TEST(Schemes, EveryParameterOfEverySchemeGetsAGradientOnTheFusedStep) {
  expect_every_scheme_parameter_gets_a_gradient(true);
}

TEST(Schemes, EveryParameterOfEverySchemeGetsAGradientOnTheAutogradStep) {
  expect_every_scheme_parameter_gets_a_gradient(false);
}

// What a captured CUDA graph reads stays where it is: a scheme's kept tensors (T5's bucket
// index) survive tables of other sizes, as an evaluation at other lengths between two
// replays of the training step asks for them; so do the encoder's kept tables of the
// training length, across RoPE's rescalings for evaluation and back.
TEST(Schemes, WhatACapturedStepReadsSurvivesTablesOfOtherSizes) {
  const EncoderShape shape = test::small_shape();
  int64_t kept = 0;
  for (const auto& spec : test::every_positional_member(shape)) {
    auto scheme = member_scheme(spec, shape);
    // The kept tensors after the first table, held here: their memory cannot be reused, so
    // a tensor made anew can never sit at a recorded address.
    std::vector<torch::Tensor> first;
    const std::vector<int64_t> sizes = {10, 13, 7, 10, 20};
    for (size_t i = 0; i < sizes.size(); ++i) {
      for (const Hook* hook : scheme->member_hooks()) {
        PositionalScheme* owner = scheme->owner_of(*hook);
        if (sizes[i] <= owner->position_limit()) owner->table(*hook, sizes[i]);
      }
      if (i == 0)
        for (const Hook* hook : scheme->member_hooks())
          for (const auto& tensor : scheme->owner_of(*hook)->kept_tensors()) first.push_back(tensor);
    }
    std::set<const void*> now;
    for (const Hook* hook : scheme->member_hooks())
      for (const auto& tensor : scheme->owner_of(*hook)->kept_tensors()) now.insert(tensor.data_ptr());
    for (const auto& tensor : first) EXPECT_TRUE(now.count(tensor.data_ptr())) << spec.arm << ": a kept tensor was replaced";
    kept += static_cast<int64_t>(first.size());
  }
  EXPECT_GT(kept, 0) << "T5 keeps its bucket index: is kept_tensors() empty everywhere?";

  Encoder model(shape, std::vector<MemberSpec>{{"rope", 0, "rope", false}, {"alibi", 1, "alibi", false}}, torch::kCPU);
  const PositionalTables trained = model->positional_tables(10);
  std::vector<const void*> before;
  for (const auto& table : trained.hooks)
    if (table.stacked.defined()) before.push_back(table.stacked.data_ptr());
  ASSERT_FALSE(before.empty());
  model->rope_rescaling_set({"yarn", 2.0, 10});
  model->positional_tables(20);
  model->positional_tables(10);
  model->rope_rescaling_set({});
  const PositionalTables again = model->positional_tables(10);
  std::vector<const void*> after;
  for (const auto& table : again.hooks)
    if (table.stacked.defined()) after.push_back(table.stacked.data_ptr());
  EXPECT_EQ(after, before) << "the training length's tables were made anew after a rescaled evaluation";
}

// Every scheme's reported values come to the host through one helper, from any device.
TEST(Schemes, HostValuesAreTheTensorsValuesFlatInFloat64) {
  const torch::Tensor values = torch::arange(6, torch::kFloat32).view({2, 3}).t();  // (3, 2) not contiguous
  EXPECT_EQ(host_values(values), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  const torch::Tensor learned = torch::ones({2}, torch::requires_grad());
  EXPECT_EQ(host_values(learned * 2), (std::vector<double>{2, 2}));
}

// Forms a scheme leaves undefined are refused by the config check, naming the key and why.
TEST(Schemes, UndefinedFormsAreRefusedWithTheReason) {
  ModelConfig model;
  model.positional = "xpos";
  model.causal = false;
  SchemeProblem problem = positional_problem(model);
  EXPECT_EQ(problem.key, "model.positional");
  EXPECT_NE(problem.problem.find("causal"), std::string::npos) << problem.problem;
  model.causal = true;
  EXPECT_TRUE(positional_problem(model).problem.empty());

  model.positional = "rope";
  model.positional_options.dape = true;
  problem = positional_problem(model);
  EXPECT_EQ(problem.key, "model.dape");
  EXPECT_NE(problem.problem.find("score bias"), std::string::npos) << problem.problem;
  model.positional = "kerple";
  EXPECT_TRUE(positional_problem(model).problem.empty());

  // Position IDs need a scheme that reads positions: content-only schemes read none.
  for (const auto& name : positional_names()) {
    ModelConfig offset;
    offset.positional = name;
    offset.causal = true;
    offset.positional_options.position_ids = "offset";
    offset.positional_options.position_range = 40;
    auto scheme = positional_scheme_make(name, {}, PositionalShape{10, 20, 1, 2, true});
    bool reads = false;
    for (const Hook* hook : scheme->hooks()) reads = reads || hook->reads_positions();
    const SchemeProblem refused = positional_problem(offset);
    EXPECT_EQ(refused.problem.empty(), reads) << name << ": " << refused.problem;
    if (!reads) { EXPECT_EQ(refused.key, "model.position_ids") << name; }
  }
}

// Each scheme's choice under coupled IDs (docs/schemes.md), which make negative ID
// differences (a key ahead of the query) even under the causal mask: it refuses them with a
// message naming model.position_ids, or its tables at P positions are finite on both sides
// of the diagonal and a model trains on them. A new scheme fails here until its choice is
// written in this list.
TEST(Schemes, EachSchemeTakesOrRefusesCoupledIdsAsDocumented) {
  // refuses: reads no positions (none, cope, fox); xpos's scale grows without bound ahead.
  const std::map<std::string, bool> takes_coupled = {
      {"none", false}, {"sinusoidal", true}, {"learned", true}, {"rope", true},  {"xpos", false},
      {"alibi", true}, {"t5", true},         {"dynamic", true}, {"kerple", true}, {"fire", true},
      {"cope", false}, {"fox", false},       {"pope", true}};
  const EncoderShape shape = test::small_shape();
  for (const auto& name : positional_names()) {
    if (test::is_test_only_scheme(name)) continue;
    ASSERT_TRUE(takes_coupled.count(name)) << name << ": write its choice under coupled IDs here and in docs/schemes.md";
    for (bool causal : {false, true}) {
      PositionalOptions plain = test::small_options();
      if (!test::positional_runs(name, plain, causal, shape)) continue;  // a form the scheme refuses anyway
      PositionalOptions coupled = plain;
      coupled.position_ids = "coupled";
      coupled.position_range = 24;
      ModelConfig model;
      model.embed = shape.embed;
      model.heads = shape.heads;
      model.positional = name;
      model.causal = causal;
      model.positional_options = coupled;
      const SchemeProblem problem = positional_problem(model);
      EXPECT_EQ(problem.problem.empty(), takes_coupled.at(name)) << name << (causal ? "+causal: " : ": ") << problem.problem;
      if (!problem.problem.empty()) {
        EXPECT_NE((problem.key + problem.problem).find("position"), std::string::npos) << problem.problem;
        continue;
      }
      Encoder encoder(test::small_shape(0.1), std::vector<MemberSpec>{MemberSpec(name, 0, name, causal, coupled)}, torch::kCPU);
      const PositionalTables tables = encoder->positional_tables(24);
      for (const auto& table : tables.hooks)
        if (table.stacked.defined()) {
          EXPECT_TRUE(torch::isfinite(table.stacked).all().item<bool>()) << name;
        }
      TaskConfig task;
      task.examples = 200;
      const torch::Tensor inputs = train_data_upload(copy_task_generate(task), torch::kCPU).train_inputs.narrow(0, 0, 16).unsqueeze(0);  // (1, B, T)
      const torch::Tensor ids = encoder->training_positions(inputs);                                       // (1, B, T)
      const torch::Tensor logits = encoder->forward(inputs, nullptr, nullptr, ids);
      EXPECT_TRUE(torch::isfinite(logits).all().item<bool>()) << name << (causal ? "+causal" : "");
    }
  }
}

}  // namespace
}  // namespace copytask
