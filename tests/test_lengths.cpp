// Length generalization: the per-length sets (fresh inputs, the right context, the same
// draw every time), the per-length scores against a direct evaluation of the same
// examples, every scheme at a context longer than the training one (the causal mask too),
// and a learned table's rows.
#include <cmath>
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "config/config.h"
#include "model/encoder.h"
#include "model/positional.h"
#include "task/copy_task.h"
#include "task/length_sets.h"
#include "test_util.h"
#include "train/evaluate.h"

namespace copytask {
namespace {

// The reference task and an evaluation to twice its longest length.
TaskConfig reference_task() { return TaskConfig{}; }
EvalConfig eval_to(int64_t max_len, int64_t per_length = 200) {
  EvalConfig eval;
  eval.max_len = max_len;
  eval.per_length = per_length;
  return eval;
}

// The records keep the evaluation's means at 6 significant digits (train/evaluate.h), and
// JSON writes them so: 0.733333 where the double had been 0.7333333333333333.
TEST(LengthEvaluation, MeansAreKeptAtSixSignificantDigits) {
  EXPECT_EQ(measurement_rounded(11.0 / 15.0), 0.733333);
  EXPECT_EQ(measurement_rounded(0.12345678e-7), 1.23457e-8);
  EXPECT_EQ(measurement_rounded(2.0 / 3.0 * 1000), 666.667);
  EXPECT_EQ(measurement_rounded(0.25), 0.25);
  EXPECT_EQ(measurement_rounded(0.0), 0.0);
  EXPECT_EQ(nlohmann::json(measurement_rounded(11.0 / 15.0)).dump(), "0.733333");
  EXPECT_TRUE(std::isnan(measurement_rounded(std::nan(""))));
  for (double x : {1e-12, 3.7e-5, 0.5, 0.999999, 1.0, 2.5e3})
    EXPECT_NEAR(measurement_rounded(x * M_PI), x * M_PI, 5e-6 * x * M_PI) << x;
}

TEST(LengthSets, EveryLengthInAContextForTheWholeCopyOnInputsNeverTrainedOn) {
  const TaskConfig task = reference_task();
  const CopyTask data = copy_task_generate(task);
  const auto sets = length_sets_generate(task, eval_to(16), data.train);
  ASSERT_EQ(sets.size(), 16u);
  std::set<std::vector<int64_t>> trained;
  for (int64_t i = 0; i < data.train.count; ++i) trained.insert(test::example_row(data.train.inputs, i, task.context));
  for (const auto& set : sets) {
    const int64_t k = set.length, T = set.context;
    EXPECT_EQ(T, std::max<int64_t>(10, 2 * k + 1)) << k;
    EXPECT_EQ(set.trained, k <= 8) << k;
    // 9^k inputs exist; the trained lengths lose the training split's share of them.
    std::set<std::vector<int64_t>> inputs;
    for (int64_t i = 0; i < set.examples.count; ++i) {
      const auto input = test::example_row(set.examples.inputs, i, T), target = test::example_row(set.examples.targets, i, T);
      std::vector<int64_t> content(input.begin(), input.begin() + k);
      EXPECT_EQ(input, copy_input(content, task.vocab_size, T));
      EXPECT_EQ(target, copy_target(content, task.vocab_size, T));
      // The whole copy fits: the target holds all k tokens after <copy>.
      EXPECT_EQ(std::vector<int64_t>(target.begin() + k + 1, target.begin() + 2 * k + 1), content);
      for (int64_t token : content) EXPECT_TRUE(token >= 1 && token <= 9);
      inputs.insert(input);
      if (set.trained) {
        EXPECT_EQ(trained.count(input), 0u) << "a trained input at length " << k;
      }
    }
    EXPECT_EQ(static_cast<int64_t>(inputs.size()), set.examples.count) << "duplicates at length " << k;
    int64_t trained_of_length = 0;  // training inputs of length k: <copy> at position k
    if (set.trained)
      for (const auto& input : trained) trained_of_length += input[k] == 10 ? 1 : 0;
    const int64_t available = static_cast<int64_t>(std::pow(9.0, static_cast<double>(k))) - trained_of_length;
    EXPECT_EQ(set.examples.count, std::min<int64_t>(200, available)) << k;
  }
  // Lengths 1 and 2 have fewer than 200 inputs outside the training split: all of them.
  EXPECT_LT(sets[0].examples.count, 9);
  EXPECT_LT(sets[1].examples.count, 81);
}

TEST(LengthSets, TheSameDrawEveryTimeAndALongerRangeKeepsTheShorterSets) {
  const TaskConfig task = reference_task();
  const CopyTask data = copy_task_generate(task);
  const auto a = length_sets_generate(task, eval_to(12, 50), data.train);
  const auto b = length_sets_generate(task, eval_to(12, 50), data.train);
  const auto longer = length_sets_generate(task, eval_to(16, 50), data.train);
  ASSERT_EQ(a.size(), 12u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].examples.inputs, b[i].examples.inputs) << "length " << a[i].length;
    EXPECT_EQ(a[i].examples.inputs, longer[i].examples.inputs) << "length " << a[i].length;
  }
  EvalConfig other = eval_to(12, 50);
  other.seed = 2;
  EXPECT_NE(length_sets_generate(task, other, data.train)[10].examples.inputs, a[10].examples.inputs);
  EXPECT_TRUE(length_sets_generate(task, EvalConfig{}, data.train).empty()) << "eval.max_len = 0 is off";
}

// eval.inputs = per-seed: each seed its own draw (repeatable, never the shared one nor
// another seed's), on inputs never trained on, as many per length as the shared sets hold;
// where a length has fewer inputs than asked, every seed gets all of them.
TEST(LengthSets, EachSeedDrawsItsOwnSetsOfTheSameSizes) {
  const TaskConfig task = reference_task();
  const CopyTask data = copy_task_generate(task);
  const EvalConfig eval = eval_to(12, 50);
  std::set<std::vector<int64_t>> trained;
  for (int64_t i = 0; i < data.train.count; ++i) trained.insert(test::example_row(data.train.inputs, i, task.context));
  const auto shared = length_sets_generate(task, eval, data.train);
  const auto seed0 = length_sets_generate(task, eval, data.train, 0);
  const auto seed1 = length_sets_generate(task, eval, data.train, 1);
  EXPECT_EQ(length_sets_generate(task, eval, data.train, 1)[9].examples.inputs, seed1[9].examples.inputs)
      << "a seed's draw repeats";
  ASSERT_EQ(seed0.size(), shared.size());
  for (size_t i = 0; i < shared.size(); ++i) {
    const int64_t k = shared[i].length, T = shared[i].context, N = shared[i].examples.count;
    for (const auto* own : {&seed0[i], &seed1[i]}) {
      EXPECT_EQ(own->context, T);
      EXPECT_EQ(own->examples.count, N) << "length " << k;
      std::set<std::vector<int64_t>> distinct;
      for (int64_t n = 0; n < N; ++n) {
        const auto input = test::example_row(own->examples.inputs, n, T);
        distinct.insert(input);
        if (own->trained) {
          EXPECT_EQ(trained.count(input), 0u) << "a trained input at length " << k;
        }
      }
      EXPECT_EQ(static_cast<int64_t>(distinct.size()), N) << "duplicates at length " << k;
    }
    if (N == 50) {  // drawn from many: three different draws
      EXPECT_NE(seed0[i].examples.inputs, shared[i].examples.inputs) << "length " << k;
      EXPECT_NE(seed0[i].examples.inputs, seed1[i].examples.inputs) << "length " << k;
    } else {  // all there are, in each draw's order
      auto rows = [&](const LengthSet& set) {
        std::set<std::vector<int64_t>> all;
        for (int64_t n = 0; n < N; ++n) all.insert(test::example_row(set.examples.inputs, n, T));
        return all;
      };
      EXPECT_EQ(rows(seed0[i]), rows(shared[i])) << "length " << k;
    }
  }
  EXPECT_LT(shared[0].examples.count, 50) << "length 1 has fewer inputs than asked: the branch above ran";
}

// The per-length scores, counted here by hand from the logits of the same examples.
TEST(LengthEvaluation, EqualsADirectEvaluationOfTheSameExamples) {
  const TaskConfig task = reference_task();
  const CopyTask data = copy_task_generate(task);
  const auto sets = length_sets_generate(task, eval_to(12, 30), data.train);
  const LengthData uploaded = length_data_upload(sets, task, torch::kCPU);
  std::vector<MemberSpec> members = {{"sinusoidal", 0, "sinusoidal"}, {"rope", 1, "rope", true}, {"t5", 2, "t5"},
                                     {"fire", 3, "fire", true}};
  Encoder model(test::small_shape(), members, torch::kCPU);
  // Train a few steps' worth of randomness into the scores: untrained models copy nothing.
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.5);
  }
  const auto scores = evaluate_lengths(model, uploaded, /*chunk=*/7);  // chunks that do not divide N
  ASSERT_EQ(scores.size(), members.size());
  int64_t some_right = 0;
  for (size_t i = 0; i < sets.size(); ++i) {
    const int64_t k = sets[i].length, T = sets[i].context, N = sets[i].examples.count;
    auto inputs = uploaded.inputs[i].expand({4, N, T});  // (1, N, T) -> (M, N, T)
    auto predicted = model_logits(model, inputs).argmax(-1);            // (M, N, T)
    auto p = predicted.accessor<int64_t, 3>();
    for (int64_t m = 0; m < 4; ++m) {
      int64_t exact = 0, tokens = 0;
      for (int64_t n = 0; n < N; ++n) {
        int64_t right = 0;
        for (int64_t j = 0; j < k; ++j) right += p[m][n][k + 1 + j] == sets[i].examples.targets[n * T + k + 1 + j] ? 1 : 0;
        tokens += right;
        exact += right == k ? 1 : 0;
      }
      const LengthScores& s = scores[m][i];
      EXPECT_EQ(s.length, k);
      EXPECT_EQ(s.context, T);
      EXPECT_EQ(s.count, N);
      EXPECT_TRUE(s.skipped.empty());
      EXPECT_DOUBLE_EQ(s.exact, static_cast<double>(exact) / N) << "member " << m << " length " << k;
      EXPECT_DOUBLE_EQ(s.token, static_cast<double>(tokens) / (N * k)) << "member " << m << " length " << k;
      some_right += tokens;
    }
  }
  EXPECT_GT(some_right, 0) << "the comparison saw no right token at all";
}

// Every scheme runs at a context it never trained at, on both CPU forward passes, and a
// causal member's early outputs still ignore later tokens there.
TEST(LengthEvaluation, EverySchemeRunsAtALongerContextAndTheCausalMaskHolds) {
  std::vector<MemberSpec> members;
  for (const auto& name : positional_names()) {
    if (name == "learned") continue;  // its rows: the test below
    members.emplace_back(name, 0, name, false);
    members.emplace_back(name + "+causal", 1, name, true);
  }
  Encoder model(test::small_shape(), members, torch::kCPU);
  model->eval();
  const int64_t M = static_cast<int64_t>(members.size()), T = 25;
  torch::manual_seed(3);
  auto tokens = torch::randint(0, 11, {1, 4, T}, torch::kLong).expand({M, 4, T}).contiguous();  // (M, B, T)
  auto fused = model_logits(model, tokens);                                                     // (M, B, T, V)
  torch::Tensor autograd;
  {
    torch::NoGradGuard no_grad;
    autograd = model->forward(tokens, nullptr);
  }
  EXPECT_LT(test::max_abs_diff(fused, autograd), 1e-4) << "the two forward passes at T = 25";
  auto changed = tokens.clone();
  changed.narrow(2, 20, 5).fill_(5);  // later tokens only
  auto after = model_logits(model, changed);
  for (int64_t m = 0; m < M; ++m) {
    const double early = test::max_abs_diff(fused[m].narrow(1, 0, 20), after[m].narrow(1, 0, 20));
    if (members[m].causal) {
      EXPECT_EQ(early, 0.0) << members[m].arm;
    } else {
      EXPECT_GT(early, 0.0) << members[m].arm << ": a bidirectional member sees later tokens";
    }
  }
}

TEST(LengthEvaluation, ALearnedTableReachesAsFarAsItsRowsAndTheRowsBeyondTrainingKeepTheirStart) {
  PositionalOptions rows25;
  rows25.learned_positions = 25;
  Encoder wide(test::small_shape(), std::vector<MemberSpec>{MemberSpec("learned", 0, "learned", false, rows25)},
               torch::kCPU);
  Encoder narrow(test::small_shape(), std::vector<MemberSpec>{MemberSpec("learned", 0, "learned")}, torch::kCPU);
  EXPECT_EQ(wide->position_limit(), 25);
  EXPECT_EQ(narrow->position_limit(), 10);
  // The same member starts from the same first 10 rows whatever the table's length.
  auto wide_table = wide->scheme(0).table(25).detach();
  EXPECT_EQ(test::max_abs_diff(wide_table.narrow(0, 0, 10), narrow->scheme(0).table(10).detach()), 0.0);
  EXPECT_GT(wide_table.narrow(0, 10, 15).abs().sum().item<double>(), 0.0) << "rows beyond the context are drawn";

  const TaskConfig task = reference_task();
  const CopyTask data = copy_task_generate(task);
  const LengthData lengths = length_data_upload(length_sets_generate(task, eval_to(12, 20), data.train), task, torch::kCPU);
  const auto far = evaluate_lengths(wide, lengths).front();
  const auto near = evaluate_lengths(narrow, lengths).front();
  for (size_t i = 0; i < far.size(); ++i) {
    EXPECT_TRUE(far[i].skipped.empty()) << far[i].length;
    if (lengths.contexts[i] <= 10) {
      EXPECT_TRUE(near[i].skipped.empty());
    } else {
      EXPECT_NE(near[i].skipped.find("learned table's 10 rows"), std::string::npos) << near[i].skipped;
      EXPECT_TRUE(std::isnan(near[i].exact));
    }
  }
}

TEST(LengthConfig, ALearnedTableTooShortForTheLengthsIsRefusedBeforeTraining) {
  try {
    config_resolve(std::nullopt, {"model.positional=learned", "eval.max_len=16"});
    FAIL() << "accepted a learned table of 10 rows for contexts up to 33";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("model.learned_positions=33"), std::string::npos) << error.what();
  }
  Config config = config_resolve(std::nullopt, {"model.positional=learned"});
  config.eval.max_len = 16;
  config_validate(config, /*learned_rows_must_fit_eval=*/false);  // eval of a saved study: reported instead
  EXPECT_NO_THROW(config_resolve(std::nullopt, {"model.positional=learned", "eval.max_len=16", "model.learned_positions=33"}));
  EXPECT_NO_THROW(config_resolve(std::nullopt, {"model.positional=rope", "eval.max_len=16"})) << "rope needs no rows";
}

}  // namespace
}  // namespace copytask
