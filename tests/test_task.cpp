// The copy task: layout, uniqueness, disjoint splits, determinism.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "task/copy_task.h"
#include "test_util.h"

namespace copytask {
namespace {

TEST(Task, InputAndTargetLayout) {
  // 1 7 2 <copy> _ _ _ _ _ _  ->  1 7 2 <copy> 1 7 2 _ _ _
  EXPECT_EQ(copy_input({1, 7, 2}, 11, 10), (std::vector<int64_t>{1, 7, 2, 10, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(copy_target({1, 7, 2}, 11, 10), (std::vector<int64_t>{1, 7, 2, 10, 1, 7, 2, 0, 0, 0}));
  EXPECT_EQ(copy_target({9}, 11, 10), (std::vector<int64_t>{9, 10, 9, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(Task, TargetIsCutAtTheContextEnd) {
  // 1 2 3 4 5 6 7 <copy> _ _  ->  1 2 3 4 5 6 7 <copy> 1 2
  EXPECT_EQ(copy_target({1, 2, 3, 4, 5, 6, 7}, 11, 10), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 10, 1, 2}));
  EXPECT_EQ(copy_target({1, 2, 3, 4, 5, 6, 7, 8, 9}, 11, 10), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

TEST(Task, ExamplesAreUniqueSplitsDisjointAndWellFormed) {
  TaskConfig config;  // the reference protocol: 10000 examples, 10% test
  CopyTask task = copy_task_generate(config);
  EXPECT_EQ(task.train.count, 9000);
  EXPECT_EQ(task.test.count, 1000);
  const int64_t T = task.context;
  std::set<std::vector<int64_t>> train_inputs, test_inputs;
  std::vector<int64_t> length_counts(T, 0);
  for (int64_t i = 0; i < task.train.count; ++i) train_inputs.insert(test::example_row(task.train.inputs, i, T));
  for (int64_t i = 0; i < task.test.count; ++i) test_inputs.insert(test::example_row(task.test.inputs, i, T));
  EXPECT_EQ(static_cast<int64_t>(train_inputs.size()), task.train.count) << "duplicate train inputs";
  EXPECT_EQ(static_cast<int64_t>(test_inputs.size()), task.test.count) << "duplicate test inputs";
  for (const auto& input : test_inputs) EXPECT_EQ(train_inputs.count(input), 0u) << "a test input is in train";

  // Every example: k content tokens in 1..V-2, <copy>, padding; target = its copy.
  for (const CopySplit* split : {&task.train, &task.test})
    for (int64_t i = 0; i < split->count; ++i) {
      auto input = test::example_row(split->inputs, i, T);
      auto target = test::example_row(split->targets, i, T);
      int64_t k = 0;
      while (k < T && input[k] >= 1 && input[k] <= 9) ++k;
      ASSERT_GE(k, config.min_len);
      ASSERT_LE(k, config.max_len);
      ASSERT_EQ(input[k], 10);
      for (int64_t j = k + 1; j < T; ++j) ASSERT_EQ(input[j], 0);
      std::vector<int64_t> content(input.begin(), input.begin() + k);
      ASSERT_EQ(target, copy_target(content, 11, T));
      length_counts[k] += 1;
    }
  // Lengths are uniform over 1..8 until a length runs out of distinct inputs: lengths 1,
  // 2 and 3 have only 9, 81 and 729, so the other five share the remaining 9181 evenly.
  EXPECT_EQ(length_counts[1], 9);
  EXPECT_EQ(length_counts[2], 81);
  EXPECT_EQ(length_counts[3], 729);
  for (int64_t k = 4; k <= 8; ++k) EXPECT_NEAR(length_counts[k], 9181 / 5, 150) << "length " << k;

  // The split is unbiased across lengths: each length sends about 10% of its examples to
  // test (a split in drawing order once sent every short example to test).
  std::vector<int64_t> test_counts(T, 0);
  for (int64_t i = 0; i < task.test.count; ++i) {
    auto input = test::example_row(task.test.inputs, i, T);
    test_counts[std::find(input.begin(), input.end(), 10) - input.begin()] += 1;
  }
  EXPECT_LT(test_counts[2], 25) << "length 2 has 81 examples; about 8 belong in test";
  EXPECT_NEAR(test_counts[3], 73, 30);
  for (int64_t k = 4; k <= 8; ++k) EXPECT_NEAR(test_counts[k], 184, 45) << "length " << k;
}

// task.sampling = fresh (Kazemnejad et al.'s protocol): the test split distinct, at most half
// of each length's inputs, and the train split drawn example by example from the task's
// distribution: every length about equally often (not the distinct inputs' share), repeats
// where inputs are few, never a test input, the same for a seed.
TEST(Task, FreshSamplingDrawsTheTrainSplitFromTheDistributionNeverATestInput) {
  TaskConfig config;  // lengths 1..8 of 9 content symbols
  config.sampling = "fresh";
  config.examples = 40000;
  const CopyTask task = copy_task_generate(config);
  EXPECT_EQ(task.train.count, 36000);
  EXPECT_EQ(task.test.count, 4000);
  const int64_t T = task.context;
  std::set<std::vector<int64_t>> test_inputs, train_distinct;
  std::vector<int64_t> test_lengths(T, 0);
  for (int64_t i = 0; i < task.test.count; ++i) {
    const auto input = test::example_row(task.test.inputs, i, T);
    test_inputs.insert(input);
    test_lengths[std::find(input.begin(), input.end(), 10) - input.begin()] += 1;
  }
  EXPECT_EQ(static_cast<int64_t>(test_inputs.size()), task.test.count) << "the test split stays distinct";
  EXPECT_EQ(test_lengths[1], 4) << "half of length 1's 9 inputs";
  EXPECT_EQ(test_lengths[2], 40) << "half of length 2's 81";
  std::vector<int64_t> length_counts(T, 0);
  for (int64_t i = 0; i < task.train.count; ++i) {
    const auto input = test::example_row(task.train.inputs, i, T);
    ASSERT_EQ(test_inputs.count(input), 0u) << "a test input in the train split";
    train_distinct.insert(input);
    length_counts[std::find(input.begin(), input.end(), 10) - input.begin()] += 1;
    ASSERT_EQ(test::example_row(task.train.targets, i, T),
              copy_target(std::vector<int64_t>(input.begin(), std::find(input.begin(), input.end(), 10)), 11, T));
  }
  // Uniform over the 8 lengths: 4500 each, within 5 standard deviations of a binomial (about 63).
  for (int64_t k = 1; k <= 8; ++k) EXPECT_NEAR(length_counts[k], 4500, 320) << "length " << k;
  EXPECT_LT(static_cast<int64_t>(train_distinct.size()), task.train.count) << "length 1 has 9 inputs: repeats";
  const CopyTask again = copy_task_generate(config);
  EXPECT_EQ(again.train.inputs, task.train.inputs);
  EXPECT_EQ(again.test.inputs, task.test.inputs);
}

TEST(Task, DeterministicForASeedAndDifferentAcrossSeeds) {
  TaskConfig config;
  config.examples = 500;
  CopyTask a = copy_task_generate(config), b = copy_task_generate(config);
  EXPECT_EQ(a.train.inputs, b.train.inputs);
  EXPECT_EQ(a.test.inputs, b.test.inputs);
  config.seed = 1;
  CopyTask c = copy_task_generate(config);
  EXPECT_NE(a.train.inputs, c.train.inputs);
}

TEST(Task, EveryPossibleInputCanBeDrawn) {
  TaskConfig config;
  config.vocab_size = 4;  // content tokens 1, 2
  config.context = 5;
  config.min_len = 1;
  config.max_len = 3;
  config.examples = 14;   // 2 + 4 + 8: all of them
  config.test_fraction = 0.25;
  EXPECT_EQ(copy_task_capacity(config), 14);
  CopyTask task = copy_task_generate(config);
  std::set<std::vector<int64_t>> all;
  for (int64_t i = 0; i < task.train.count; ++i) all.insert(test::example_row(task.train.inputs, i, 5));
  for (int64_t i = 0; i < task.test.count; ++i) all.insert(test::example_row(task.test.inputs, i, 5));
  EXPECT_EQ(all.size(), 14u);
  config.examples = 15;
  EXPECT_THROW(copy_task_generate(config), std::invalid_argument);
}

TEST(Task, ProbesParse) {
  TaskConfig config;
  EXPECT_EQ(probe_example("7 1 8 2", config).content, (std::vector<int64_t>{7, 1, 8, 2}));
  EXPECT_TRUE(probe_example("7 1 8 2", config).noise_at.empty());
  EXPECT_THROW(probe_example("", config), std::invalid_argument);
  EXPECT_THROW(probe_example("0 1", config), std::invalid_argument);
  EXPECT_THROW(probe_example("7 ~ 1", config), std::invalid_argument) << "~ is selective's noise only";
  EXPECT_EQ(tokens_to_text(copy_input({7, 1}, 11, 5), 11), "7 1 <copy> _ _");
}

}  // namespace
}  // namespace copytask
