// The scheme interface (DESIGN.md section 2): the registry's names, one hook per scheme
// with the table shape it promises, and, for every registered scheme, every parameter it
// owns receives a non-zero gradient through a real training step, on the fused CPU step
// (tables in, tables' gradients out, autograd to the parameters) and on the autograd step.
#include <gtest/gtest.h>

#include "model/positional.h"
#include "task/copy_task.h"
#include "test_util.h"
#include "train/trainer.h"

namespace copytask {
namespace {

TEST(Schemes, TheRegistryNamesEveryScheme) {
  EXPECT_EQ(positional_names(), (std::vector<std::string>{"none", "sinusoidal", "learned", "rope", "alibi", "t5", "dynamic",
                                                          "kerple", "fire"}));
  EXPECT_EQ(positional_entry("xpos"), nullptr);
  EXPECT_THROW(positional_scheme_make("xpos", {}, {}), std::invalid_argument);
}

TEST(Schemes, EachSchemeHasOneHookAndItsTableHasTheHooksShape) {
  const PositionalShape shape{10, 8, 2};
  for (const auto& name : positional_names()) {
    auto scheme = positional_scheme_make(name, {}, shape);
    const PositionalHook hook = scheme->hook();
    EXPECT_EQ(hook == PositionalHook::none, name == "none") << name;
    const torch::Tensor table = scheme->table(10);
    switch (hook) {
      case PositionalHook::none: EXPECT_FALSE(table.defined()) << name; break;
      case PositionalHook::additive: EXPECT_EQ(table.sizes(), (std::vector<int64_t>{10, 8})) << name; break;
      case PositionalHook::rotation: EXPECT_EQ(table.sizes(), (std::vector<int64_t>{10, 2})) << name; break;
      case PositionalHook::score_bias: EXPECT_EQ(table.sizes(), (std::vector<int64_t>{2, 10, 10})) << name; break;
    }
    if (table.defined()) {
      EXPECT_EQ(table.scalar_type(), torch::kFloat32) << name;
    }
  }
}

// One member per registered scheme, and the learned variants of ALiBi.
std::vector<MemberSpec> every_scheme_members() {
  std::vector<MemberSpec> members;
  int64_t seed = 0;
  for (const auto& name : positional_names()) {
    members.push_back({name, seed, name, seed % 2 == 1, {}});  // every other one causal
    ++seed;
  }
  PositionalOptions learned;
  learned.alibi_learned = true;
  members.push_back({"alibi-learned", seed++, "alibi", false, learned});
  learned.alibi_direction = "two-sided";
  members.push_back({"alibi-two-sided", seed++, "alibi", false, learned});
  return members;
}

void expect_every_scheme_parameter_gets_a_gradient(bool fused) {
  TaskConfig task;
  task.examples = 300;
  const TrainData data = train_data_upload(copy_task_generate(task), torch::kCPU);
  TrainConfig train;
  train.batch_size = 32;
  const auto members = every_scheme_members();
  Encoder model(test::small_shape(0.1), members, torch::kCPU);
  const auto owned = training_step_make(model, data, test::with_step(train, fused));
  TrainingStep& step = *owned;
  ASSERT_EQ(step.name(), fused ? "fused CPU" : "autograd");
  int64_t checked = 0;
  for (int round = 0; round < 2; ++round) {  // a second step: the gradients are set again, not left over
    step.run();
    for (int64_t m = 0; m < model->member_count(); ++m)
      for (const auto& item : model->scheme(m).named_parameters()) {
        const torch::Tensor& grad = item.value().grad();
        ASSERT_TRUE(grad.defined()) << members[m].arm << " " << item.key();
        EXPECT_GT(grad.abs().max().item<double>(), 0.0) << members[m].arm << " " << item.key();
        ++checked;
      }
  }
  // learned 1, alibi learned 1 + 2, t5 1, dynamic 6, kerple 2, fire 6 parameters; two rounds.
  EXPECT_EQ(checked, 2 * (1 + 1 + 2 + 1 + 6 + 2 + 6));
}

TEST(Schemes, EveryParameterOfEverySchemeGetsAGradientOnTheFusedStep) {
  expect_every_scheme_parameter_gets_a_gradient(true);
}

TEST(Schemes, EveryParameterOfEverySchemeGetsAGradientOnTheAutogradStep) {
  expect_every_scheme_parameter_gets_a_gradient(false);
}

}  // namespace
}  // namespace copytask
