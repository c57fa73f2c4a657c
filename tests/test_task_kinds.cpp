// The task kinds (copy, reverse, selective): their data rules, what each output copies
// against a brute-force search, the error classifier on hand-made outputs, and the
// per-length measurements of why (accuracy by output, attention on the source, entropy,
// error kinds) against a direct computation from the same attention maps.
#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/encoder.h"
#include "task/copy_task.h"
#include "task/length_sets.h"
#include "task/output_errors.h"
#include "task/task_kind.h"
#include "test_util.h"
#include "train/evaluate.h"

namespace copytask {
namespace {

TaskConfig kind_task(const std::string& kind, int64_t context = 10) {
  TaskConfig task;
  task.kind = kind;
  task.context = context;
  task.examples = 2000;
  return task;
}

TEST(TaskKinds, ReverseDrawsCopysInputsAndReversesTheOutput) {
  const TaskConfig copy = kind_task("copy", 17), reverse = kind_task("reverse", 17);
  const CopyTask a = copy_task_generate(copy), b = copy_task_generate(reverse);
  ASSERT_EQ(a.train.inputs, b.train.inputs) << "the same inputs, so the kinds differ in the output alone";
  ASSERT_EQ(a.test.inputs, b.test.inputs);
  for (int64_t i = 0; i < b.train.count; ++i) {
    const auto input = test::example_row(b.train.inputs, i, 17), target = test::example_row(b.train.targets, i, 17);
    const int64_t k = std::find(input.begin(), input.end(), 10) - input.begin();
    for (int64_t t = 0; t <= k; ++t) ASSERT_EQ(target[t], input[t]) << "the input is echoed up to <copy>";
    for (int64_t j = 0; j < k; ++j) ASSERT_EQ(target[k + 1 + j], input[k - 1 - j]) << "output j is content k-1-j";
    for (int64_t t = 2 * k + 1; t < 17; ++t) ASSERT_EQ(target[t], kPadToken);
  }
}

TEST(TaskKinds, SelectiveHidesTheContentAmongNoiseAtTheStatedRate) {
  TaskConfig task = kind_task("selective", 25);
  task.noise = 0.5;  // m = k noise tokens
  const CopyTask data = copy_task_generate(task);
  const int64_t noise = noise_token(task), T = 25;
  EXPECT_EQ(noise, 9);
  EXPECT_EQ(content_vocab(task), 8);
  std::set<std::vector<int64_t>> train_inputs;
  for (int64_t i = 0; i < data.train.count; ++i) train_inputs.insert(test::example_row(data.train.inputs, i, T));
  EXPECT_EQ(static_cast<int64_t>(train_inputs.size()), data.train.count) << "distinct inputs";
  std::set<int64_t> noise_places_seen;
  for (const CopySplit* split : {&data.train, &data.test})
    for (int64_t i = 0; i < split->count; ++i) {
      const auto input = test::example_row(split->inputs, i, T), target = test::example_row(split->targets, i, T);
      if (split == &data.test) { ASSERT_EQ(train_inputs.count(input), 0u) << "a test input is in train"; }
      const int64_t copy_at = std::find(input.begin(), input.end(), 10) - input.begin();
      std::vector<int64_t> content;
      int64_t noise_tokens = 0;
      for (int64_t t = 0; t < copy_at; ++t) {
        if (input[t] == noise) {
          ++noise_tokens;
          noise_places_seen.insert(t);
        } else {
          ASSERT_GE(input[t], 1);
          ASSERT_LE(input[t], 8);
          content.push_back(input[t]);
        }
      }
      const int64_t k = static_cast<int64_t>(content.size());
      ASSERT_GE(k, task.min_len);
      ASSERT_LE(k, task.max_len);
      ASSERT_EQ(noise_tokens, k) << "noise 0.5: as many noise tokens as content tokens";
      for (int64_t j = 0; j < k; ++j) ASSERT_EQ(target[copy_at + 1 + j], content[j]) << "the content in order";
      ASSERT_LE(copy_at + 1 + k, T) << "the whole example fits the context the config demands";
    }
  EXPECT_GE(noise_places_seen.size(), 15u) << "the noise is placed all over the prefix, not at fixed places";

  // The rate: round(k * noise / (1 - noise)) noise tokens, and the context that holds it.
  task.noise = 0.25;
  EXPECT_EQ(noise_count(task, 3), 1);
  EXPECT_EQ(noise_count(task, 8), 3);
  EXPECT_EQ(whole_example_context(task, 8), 8 + 3 + 1 + 8);
  EXPECT_EQ(noise_count(kind_task("copy"), 8), 0);
}

TEST(TaskKinds, EverySelectiveInputCanBeDrawnAndTheCountIsExact) {
  TaskConfig task = kind_task("selective", 7);
  task.vocab_size = 5;  // content 1, 2; noise 3; <copy> 4
  task.min_len = 1;
  task.max_len = 2;
  task.noise = 0.5;
  // k = 1: 2 contents x C(2, 1) places; k = 2: 4 x C(4, 2).
  EXPECT_EQ(copy_task_capacity(task), 2 * 2 + 4 * 6);
  task.examples = 28;
  task.test_fraction = 0.25;
  const CopyTask data = copy_task_generate(task);
  std::set<std::vector<int64_t>> all;
  for (int64_t i = 0; i < data.train.count; ++i) all.insert(test::example_row(data.train.inputs, i, 7));
  for (int64_t i = 0; i < data.test.count; ++i) all.insert(test::example_row(data.test.inputs, i, 7));
  EXPECT_EQ(all.size(), 28u);
  // nth_example's enumeration (the length sets') reaches each of them once.
  std::set<std::vector<int64_t>> places;
  for (int64_t i = 0; i < choose(4, 2); ++i) places.insert(nth_combination(i, 4, 2));
  EXPECT_EQ(places.size(), 6u);
  for (const auto& p : places) EXPECT_TRUE(std::is_sorted(p.begin(), p.end()) && p.back() < 4);
}

TEST(TaskKinds, LengthSetsOfEachKindHoldWholeExamplesNeverTrainedOn) {
  for (const std::string kind : {"reverse", "selective"}) {
    TaskConfig task = kind_task(kind, kind == "selective" ? 17 : 10);
    const CopyTask data = copy_task_generate(task);
    EvalConfig eval;
    eval.max_len = 12;
    eval.per_length = 40;
    const auto sets = length_sets_generate(task, eval, data.train);
    std::set<std::vector<int64_t>> trained;
    for (int64_t i = 0; i < data.train.count; ++i) trained.insert(test::example_row(data.train.inputs, i, task.context));
    for (const auto& set : sets) {
      EXPECT_EQ(set.context, std::max(task.context, whole_example_context(task, set.length))) << kind;
      for (int64_t n = 0; n < set.examples.count; ++n) {
        const auto input = test::example_row(set.examples.inputs, n, set.context);
        const OutputSources sources = output_sources(task, input.data(), set.context);
        ASSERT_EQ(sources.length(), set.length) << kind;
        ASSERT_LE(sources.output_begin() + set.length, set.context) << kind << ": the whole output fits";
        if (set.context == task.context) { ASSERT_EQ(trained.count(input), 0u) << kind << ": a trained input"; }
      }
    }
    // A longer range keeps the shorter lengths' examples.
    eval.max_len = 14;
    const auto longer = length_sets_generate(task, eval, data.train);
    for (size_t i = 0; i < sets.size(); ++i) EXPECT_EQ(longer[i].examples.inputs, sets[i].examples.inputs) << kind;
  }
}

// What each output copies, against a search: with distinct content tokens, the input
// position that holds the output's target token is the only one it can copy.
TEST(TaskKinds, EachOutputsSourceIsWhereABruteForceSearchFindsItsToken) {
  for (const std::string kind : {"copy", "reverse", "selective"}) {
    TaskConfig task = kind_task(kind, 40);
    task.vocab_size = 40;
    task.max_len = 12;
    task.noise = 0.4;
    const CopyTask data = copy_task_generate(task);
    int64_t checked = 0;
    for (int64_t i = 0; i < data.train.count; ++i) {
      const auto input = test::example_row(data.train.inputs, i, 40), target = test::example_row(data.train.targets, i, 40);
      const OutputSources sources = output_sources(task, input.data(), 40);
      std::set<int64_t> distinct;
      for (int64_t at : sources.content_at) distinct.insert(input[at]);
      if (static_cast<int64_t>(distinct.size()) != sources.length()) continue;
      for (int64_t j = 0; j < sources.length(); ++j) {
        const int64_t wanted = target[sources.output_begin() + j];
        int64_t found = -1;
        for (int64_t t = 0; t < sources.copy_at; ++t)
          if (input[t] == wanted) found = t;
        ASSERT_EQ(sources.sources[j], found) << kind << " example " << i << " output " << j;
        const int64_t distance = sources.output_begin() + j - found;
        if (kind == "copy") { ASSERT_EQ(distance, sources.length() + 1) << "copy reads k + 1 back"; }
        if (kind == "reverse") { ASSERT_EQ(distance, 2 * j + 2) << "reverse reads 2j + 2 back at every k"; }
        ++checked;
      }
    }
    EXPECT_GT(checked, 1000) << kind;
  }
}

// Coupled places (model.position_ids = coupled) in closed form, written out for one
// example of each kind: output j at the place of the content token it copies (copy j,
// reverse k-1-j, selective the j-th content token past the noise); content, noise, <copy>
// and the padding after the outputs keep their own place; outputs cut at the context too.
TEST(TaskKinds, CoupledPlacesPutEachOutputAtItsSource) {
  auto places_of = [](const TaskConfig& task, const std::vector<int64_t>& row) {
    std::vector<int64_t> places(row.size());
    coupled_places(task, row.data(), static_cast<int64_t>(row.size()), places.data());
    return places;
  };
  TaskConfig copy;  // vocab 11: <copy> 10, noise (selective) 9
  copy.context = 10;
  TaskConfig reverse = copy, selective = copy;
  reverse.kind = "reverse";
  selective.kind = "selective";
  //                                        3  5  7 <c>  _  _  _  _  _  _
  EXPECT_EQ(places_of(copy, {3, 5, 7, 10, 0, 0, 0, 0, 0, 0}), (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 7, 8, 9}));
  EXPECT_EQ(places_of(reverse, {3, 5, 7, 10, 0, 0, 0, 0, 0, 0}), (std::vector<int64_t>{0, 1, 2, 3, 2, 1, 0, 7, 8, 9}));
  //                                        3  ~  5  ~  ~  7 <c>  _  _  _
  EXPECT_EQ(places_of(selective, {3, 9, 5, 9, 9, 7, 10, 0, 0, 0}), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 0, 2, 5}));
  // Cut at the context: 6 content tokens leave room for 3 outputs.
  EXPECT_EQ(places_of(copy, {1, 2, 3, 4, 5, 6, 10, 0, 0, 0}), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 0, 1, 2}));
  // No <copy>: every token keeps its place.
  EXPECT_EQ(places_of(copy, {1, 2, 3, 4, 5, 6, 7, 8, 9, 1}), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// The next-token format written out: the input holds the outputs after <copy> and the end
// (padding); the target echoes the prefix, then from <copy> on is the next token; output j
// is predicted at <copy> + j; the whole example takes one token more; coupled places put
// output j's source at the position that predicts it.
TEST(TaskKinds, TheNextTokenFormatLaysOutEachKindAndItsCoupling) {
  TaskConfig copy;
  copy.context = 10;
  copy.format = "next-token";
  TaskConfig reverse = copy, selective = copy;
  reverse.kind = "reverse";
  selective.kind = "selective";
  const Example plain{{3, 5, 7}, {}}, noisy{{3, 5, 7}, {1, 3, 4}};
  EXPECT_EQ(example_input(copy, plain, 10), (std::vector<int64_t>{3, 5, 7, 10, 3, 5, 7, 0, 0, 0}));
  EXPECT_EQ(example_target(copy, plain, 10), (std::vector<int64_t>{3, 5, 7, 3, 5, 7, 0, 0, 0, 0}));
  EXPECT_EQ(example_input(reverse, plain, 10), (std::vector<int64_t>{3, 5, 7, 10, 7, 5, 3, 0, 0, 0}));
  EXPECT_EQ(example_target(reverse, plain, 10), (std::vector<int64_t>{3, 5, 7, 7, 5, 3, 0, 0, 0, 0}));
  //                                                                   3  ~  5  ~  ~  7 <c>  3  5  7
  EXPECT_EQ(example_input(selective, noisy, 10), (std::vector<int64_t>{3, 9, 5, 9, 9, 7, 10, 3, 5, 7}));
  EXPECT_EQ(example_target(selective, noisy, 10), (std::vector<int64_t>{3, 9, 5, 9, 9, 7, 3, 5, 7, 0}));
  // Cut at the context, the target still names the next token.
  EXPECT_EQ(example_target(copy, Example{{1, 2, 3, 4, 5}, {}}, 8), (std::vector<int64_t>{1, 2, 3, 4, 5, 1, 2, 3}));
  EXPECT_EQ(whole_example_context(copy, 3), 8);
  TaskConfig placeholders = copy;
  placeholders.format = "placeholders";
  EXPECT_EQ(whole_example_context(placeholders, 3), 7);

  const std::vector<int64_t> row = example_input(reverse, plain, 10);
  const OutputSources sources = output_sources(reverse, row.data(), 10);
  EXPECT_EQ(sources.output_begin(), 3) << "<copy> predicts output 0";
  EXPECT_EQ(sources.sources, (std::vector<int64_t>{2, 1, 0}));
  std::vector<int64_t> places(10);
  coupled_places(reverse, row.data(), 10, places.data());
  EXPECT_EQ(places, (std::vector<int64_t>{0, 1, 2, 2, 1, 0, 6, 7, 8, 9}));
}

// task.end_token = own: the end token is an id of its own (V-2; V-3 under selective, below
// the noise token), the input holds it after the outputs, the last output predicts it and it
// predicts padding; the content has one id fewer; an output that writes it is a stop.
TEST(TaskKinds, AnEndTokenOfItsOwnEndsTheNextTokenCopy) {
  TaskConfig copy;
  copy.context = 10;
  copy.format = "next-token";
  copy.end_token = "own";
  TaskConfig selective = copy;
  selective.kind = "selective";
  EXPECT_EQ(end_token(copy), 9);
  EXPECT_EQ(content_vocab(copy), 8);
  EXPECT_EQ(end_token(selective), 8);
  EXPECT_EQ(noise_token(selective), 9);
  EXPECT_EQ(content_vocab(selective), 7);
  const Example plain{{3, 5, 7}, {}}, noisy{{3, 5, 7}, {1, 3, 4}};
  //                                                                  3  5  7 <c> 3  5  7  E
  EXPECT_EQ(example_input(copy, plain, 10), (std::vector<int64_t>{3, 5, 7, 10, 3, 5, 7, 9, 0, 0}));
  EXPECT_EQ(example_target(copy, plain, 10), (std::vector<int64_t>{3, 5, 7, 3, 5, 7, 9, 0, 0, 0}));
  //                                                                      3  ~  5  ~  ~  7 <c>  3  5  7
  EXPECT_EQ(example_input(selective, noisy, 11), (std::vector<int64_t>{3, 9, 5, 9, 9, 7, 10, 3, 5, 7, 8}));
  EXPECT_EQ(example_target(selective, noisy, 11), (std::vector<int64_t>{3, 9, 5, 9, 9, 7, 3, 5, 7, 8, 0}));
  // Cut at the context: the end token only where it fits.
  EXPECT_EQ(example_input(copy, plain, 7), (std::vector<int64_t>{3, 5, 7, 10, 3, 5, 7}));
  EXPECT_EQ(example_target(copy, plain, 7), (std::vector<int64_t>{3, 5, 7, 3, 5, 7, 9}));
  const std::vector<int64_t> row = example_input(copy, plain, 10);
  const OutputSources sources = output_sources(copy, row.data(), 10);
  EXPECT_EQ(output_error(copy, row.data(), sources, 1, 9), OutputError::stop);
  TaskConfig padding = copy;
  padding.end_token = "padding";
  EXPECT_EQ(end_token(padding), 0);
  EXPECT_EQ(content_vocab(padding), 9);
}

// The two next-token conventions written out for one example of each kind: the input, the
// targets (-1 out of the loss), the loss mask and the coupled IDs at start 4. copytask: every
// position in the loss, the position that predicts output j at source j's place; cho (Cho et
// al. 2024): only <copy> .. the last output in the loss (they predict the outputs and the
// end), each output token at its source's place, <copy> one step before output 0's source,
// the prefix from 2, the end token and the padding at ID 0 whatever the start.
TEST(TaskKinds, TheTwoNextTokenConventionsWrittenOut) {
  TaskConfig copytask;
  copytask.format = "next-token";
  copytask.end_token = "own";
  TaskConfig cho = copytask;
  cho.convention = "cho";
  struct Form {
    std::string kind;
    Example example;
    int64_t T;
    std::vector<int64_t> input, copytask_target, copytask_ids, cho_target, cho_ids;
  };
  const std::vector<Form> forms = {
      //        c1 c2 c3 <c> o1 o2 o3  E  _  _
      {"copy", {{3, 5, 7}, {}}, 10,
       {3, 5, 7, 10, 3, 5, 7, 9, 0, 0},
       {3, 5, 7, 3, 5, 7, 9, 0, 0, 0},
       {4, 5, 6, 4, 5, 6, 10, 11, 12, 13},
       {-1, -1, -1, 3, 5, 7, 9, -1, -1, -1},
       {6, 7, 8, 5, 6, 7, 8, 0, 0, 0}},
      {"reverse", {{3, 5, 7}, {}}, 10,
       {3, 5, 7, 10, 7, 5, 3, 9, 0, 0},
       {3, 5, 7, 7, 5, 3, 9, 0, 0, 0},
       {4, 5, 6, 6, 5, 4, 10, 11, 12, 13},
       {-1, -1, -1, 7, 5, 3, 9, -1, -1, -1},
       {6, 7, 8, 9, 8, 7, 6, 0, 0, 0}},
      //             3  ~  5  ~  ~  7 <c> o1 o2 o3  E
      {"selective", {{3, 5, 7}, {1, 3, 4}}, 11,
       {3, 9, 5, 9, 9, 7, 10, 3, 5, 7, 8},
       {3, 9, 5, 9, 9, 7, 3, 5, 7, 8, 0},
       {4, 5, 6, 7, 8, 9, 4, 6, 9, 13, 14},
       {-1, -1, -1, -1, -1, -1, 3, 5, 7, 8, -1},
       {6, 7, 8, 9, 10, 11, 5, 6, 8, 11, 0}},
  };
  constexpr int64_t kStart = 4;
  auto text = [](const std::vector<int64_t>& values) {
    std::string out;
    for (int64_t v : values) out += (out.empty() ? "" : " ") + std::to_string(v);
    return out;
  };
  for (const Form& form : forms) {
    for (const bool is_cho : {false, true}) {
      TaskConfig task = is_cho ? cho : copytask;
      task.kind = form.kind;
      task.context = form.T;
      const std::string name = form.kind + (is_cho ? " cho" : " copytask");
      const std::vector<int64_t> input = example_input(task, form.example, form.T);
      const std::vector<int64_t> target = example_target(task, form.example, form.T);
      std::vector<int64_t> places(static_cast<size_t>(form.T)), ids, mask;
      coupled_places(task, input.data(), form.T, places.data());
      for (int64_t place : places) ids.push_back(coupled_id(task, place, kStart));
      for (int64_t y : target) mask.push_back(y >= 0 ? 1 : 0);
      std::printf("  %-18s input  %s\n  %-18s target %s\n  %-18s mask   %s\n  %-18s IDs    %s\n", name.c_str(),
                  text(input).c_str(), "", text(target).c_str(), "", text(mask).c_str(), "",
                  text(ids).c_str());
      EXPECT_EQ(input, form.input) << name << ": the convention does not change the sequence";
      EXPECT_EQ(target, is_cho ? form.cho_target : form.copytask_target) << name;
      EXPECT_EQ(ids, is_cho ? form.cho_ids : form.copytask_ids) << name;
      // The same IDs from the position IDs of a training batch at any start: under cho the
      // end token and the padding stay at 0, every other token moves with the start.
      const OutputSources sources = output_sources(task, input.data(), form.T);
      const int64_t k = sources.length();
      EXPECT_EQ(k, 3) << name;
      if (is_cho) {
        for (int64_t j = 0; j < k; ++j)  // each output token at its source's ID
          EXPECT_EQ(ids[sources.copy_at + 1 + j], ids[sources.sources[j]]) << name << " output " << j;
        // The end is predicted at the last output, which is at the last source's ID.
        EXPECT_EQ(target[sources.copy_at + k], end_token(task)) << name;
        EXPECT_EQ(ids[sources.copy_at + k], ids[sources.sources[k - 1]]) << name;
      } else {
        for (int64_t j = 0; j < k; ++j)  // the position predicting output j at source j's ID
          EXPECT_EQ(ids[sources.output_begin() + j], ids[sources.sources[j]]) << name << " output " << j;
      }
    }
  }
}

// Greedy generation (evaluation under next-token): the same outputs as generating one
// example at a time by hand, each output fed back in; the inputs' own outputs are never read.
TEST(TaskKinds, GenerationFeedsEachOutputBackAndNeverReadsTheAnswer) {
  TaskConfig task;
  task.context = 12;
  task.format = "next-token";
  EncoderShape shape = test::small_shape();
  shape.context = 12;
  shape.task_format = "next-token";
  Encoder model(shape, std::vector<MemberSpec>{{"rope", 3, "rope", true}, {"t5", 4, "t5", true}}, torch::kCPU);
  model->eval();
  const std::vector<Example> examples = {{{3, 5, 7}, {}}, {{1, 2, 3, 4, 5}, {}}, {{9}, {}}};
  std::vector<int64_t> flat;
  for (const auto& example : examples) {
    const auto row = example_input(task, example, 12);
    flat.insert(flat.end(), row.begin(), row.end());
  }
  const int64_t M = 2, N = 3, T = 12;
  const torch::Tensor inputs = torch::tensor(flat, torch::kLong).view({1, N, T}).expand({M, N, T});  // (M, N, T)
  const torch::Tensor generated = model_logits(model, inputs).argmax(-1);                            // (M, N, T)
  // The answer replaced by other tokens: the same generation.
  const torch::Tensor scrambled = inputs.clone();
  for (int64_t n = 0; n < N; ++n) {
    const int64_t k = static_cast<int64_t>(examples[n].content.size());
    for (int64_t j = 0; j < k; ++j) scrambled[0][n][k + 1 + j] = 1 + (j % 3);
  }
  EXPECT_TRUE(torch::equal(model_logits(model, scrambled.narrow(0, 0, 1).expand({M, N, T})).argmax(-1), generated));
  // By hand: one example, one output at a time.
  for (int64_t n = 0; n < N; ++n) {
    const int64_t k = static_cast<int64_t>(examples[n].content.size());
    torch::Tensor sequence = inputs.narrow(1, n, 1).clone();  // (M, 1, T)
    sequence.narrow(2, k + 1, T - k - 1).zero_();
    for (int64_t j = 0; j < k; ++j) {
      torch::NoGradGuard no_grad;
      const auto next = model->forward(sequence).argmax(-1);  // (M, 1, T)
      sequence.select(2, k + 1 + j).copy_(next.select(2, k + j));
    }
    for (int64_t j = 0; j < k; ++j)
      EXPECT_TRUE(torch::equal(generated.select(1, n).select(1, k + j), sequence.select(1, 0).select(1, k + 1 + j)))
          << "example " << n << " output " << j;
  }
}

TEST(TaskKinds, TheErrorClassifierNamesWhatAWrongOutputCopied) {
  auto kind_of = [](const TaskConfig& task, const std::vector<int64_t>& input, int64_t j, int64_t predicted) {
    const OutputSources sources = output_sources(task, input.data(), static_cast<int64_t>(input.size()));
    return output_error_names()[static_cast<int>(output_error(task, input.data(), sources, j, predicted))];
  };
  const TaskConfig copy = kind_task("copy"), reverse = kind_task("reverse"), selective = kind_task("selective");
  // 3 5 7 <copy> _ _ _ _ _ _: output 0 should be 3.
  const std::vector<int64_t> input = {3, 5, 7, 10, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(kind_of(copy, input, 0, 5), "neighbour");
  EXPECT_EQ(kind_of(copy, input, 0, 7), "content");
  EXPECT_EQ(kind_of(copy, input, 0, 0), "stop");
  EXPECT_EQ(kind_of(copy, input, 0, 10), "stop");
  EXPECT_EQ(kind_of(copy, input, 0, 8), "absent");
  EXPECT_EQ(kind_of(copy, input, 1, 3), "neighbour");
  EXPECT_EQ(kind_of(copy, input, 1, 7), "neighbour");
  // Reverse: output 0 should be 7 (content index 2); its neighbour is 5, not 3.
  EXPECT_EQ(kind_of(reverse, input, 0, 5), "neighbour");
  EXPECT_EQ(kind_of(reverse, input, 0, 3), "content");
  // Selective: 3 ~ ~ 5 7 <copy>: output 0 should be 3, its neighbour in the content is 5
  // (the noise between them does not count); the noise token is its own kind.
  const std::vector<int64_t> noisy = {3, 9, 9, 5, 7, 10, 0, 0, 0, 0};
  EXPECT_EQ(kind_of(selective, noisy, 0, 5), "neighbour");
  EXPECT_EQ(kind_of(selective, noisy, 0, 7), "content");
  EXPECT_EQ(kind_of(selective, noisy, 0, 9), "noise");
  EXPECT_EQ(kind_of(selective, noisy, 0, 8), "absent");
  // A repeated token: 4 4 6, output 1 should be 4; 6 is its neighbour.
  const std::vector<int64_t> repeated = {4, 4, 6, 10, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(kind_of(copy, repeated, 1, 6), "neighbour");
  EXPECT_EQ(kind_of(copy, repeated, 2, 8), "absent");
}

// The measurements of why at every length, for every kind, against loops over the
// attention maps model_logits returns (the maps attention.json records).
// Under eval.inputs = shared every member reads one set; under per-seed each member (seeds 0
// and 1) reads its own seed's, and is counted here on that set.
TEST(TaskKinds, TheMeasurementsOfWhyEqualADirectComputationFromTheAttentionMaps) {
  for (const std::string inputs : {"shared", "per-seed"})
  for (const std::string kind : {"copy", "reverse", "selective"}) {
    SCOPED_TRACE(inputs);
    const TaskConfig task = kind_task(kind, kind == "selective" ? 17 : 10);
    const CopyTask data = copy_task_generate(task);
    EvalConfig eval;
    eval.max_len = 10;
    eval.per_length = 12;
    eval.inputs = inputs;
    const LengthData uploaded = length_data_make(task, eval, data.train, {0, 1}, task.context, torch::kCPU);
    // Each member's sets, as the evaluation should read them.
    const std::vector<std::vector<LengthSet>> member_sets =
        inputs == "shared" ? std::vector<std::vector<LengthSet>>(2, length_sets_generate(task, eval, data.train))
                           : std::vector<std::vector<LengthSet>>{length_sets_generate(task, eval, data.train, 0),
                                                                 length_sets_generate(task, eval, data.train, 1)};
    ASSERT_EQ(uploaded.set_seeds.size(), inputs == "shared" ? 0u : 2u);
    if (inputs == "per-seed") {
      ASSERT_NE(member_sets[0][9].examples.inputs, member_sets[1][9].examples.inputs) << "the seeds' sets differ";
    }
    const auto& sets = member_sets[0];
    std::vector<MemberSpec> members = {{"alibi", 0, "alibi", true}, {"rope", 1, "rope"}};
    EncoderShape shape = test::small_shape();
    shape.context = task.context;
    Encoder model(shape, members, torch::kCPU);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.5);
    }
    model->eval();
    const auto scores = evaluate_lengths(model, uploaded, /*chunk=*/5);  // chunks that do not divide N
    for (size_t i = 0; i < sets.size(); ++i) {
      const int64_t k = sets[i].length, T = sets[i].context, N = sets[i].examples.count;
      if (N == 0) continue;
      std::vector<torch::Tensor> attention;  // per block (M, N, H, T, T)
      std::vector<int64_t> flat;
      for (const auto& one : member_sets)
        flat.insert(flat.end(), one[i].examples.inputs.begin(), one[i].examples.inputs.end());
      auto member_inputs = torch::tensor(flat, torch::kLong).view({2, N, T});      // (M, N, T)
      auto predicted = model_logits(model, member_inputs, &attention).argmax(-1);  // (M, N, T)
      auto p = predicted.accessor<int64_t, 3>();
      for (int64_t m = 0; m < 2; ++m) {
        const LengthSet& set = member_sets[m][i];
        ASSERT_EQ(set.examples.count, N) << "every seed's set of a length holds as many examples";
        const LengthScores& s = scores[m][i];
        ASSERT_EQ(static_cast<int64_t>(s.token_by_output.size()), k);
        std::vector<double> right(k, 0.0), errors(kOutputErrorKinds, 0.0);
        std::vector<std::vector<double>> on_source(shape.blocks, std::vector<double>(shape.heads, 0.0)),
            entropy = on_source;
        for (int64_t n = 0; n < N; ++n) {
          const int64_t* input = set.examples.inputs.data() + n * T;
          const int64_t* target = set.examples.targets.data() + n * T;
          const OutputSources sources = output_sources(task, input, T);
          for (int64_t j = 0; j < k; ++j) {
            const int64_t at = sources.output_begin() + j;
            if (p[m][n][at] == target[at]) right[j] += 1;
            else errors[static_cast<int>(output_error(task, input, sources, j, p[m][n][at]))] += 1;
            for (int64_t b = 0; b < shape.blocks; ++b)
              for (int64_t h = 0; h < shape.heads; ++h) {
                auto weights = attention[b][m][n][h][at];  // (T) the output row
                on_source[b][h] += weights[sources.sources[j]].item<double>();
                for (int64_t c = 0; c < T; ++c) {
                  const double a = weights[c].item<double>();
                  if (a > 0) entropy[b][h] -= a * std::log(a);
                }
              }
          }
        }
        // The records keep these means at 6 significant digits (train/evaluate.h).
        auto kept = [](double exact) { return 5e-6 * std::abs(exact) + 1e-12; };
        for (int64_t j = 0; j < k; ++j)
          EXPECT_NEAR(s.token_by_output[j], right[j] / N, kept(right[j] / N)) << kind << " k " << k;
        for (int64_t b = 0; b < shape.blocks; ++b)
          for (int64_t h = 0; h < shape.heads; ++h) {
            EXPECT_NEAR(s.source_attention[b][h], on_source[b][h] / (N * k), 1e-5) << kind << " k " << k;
            EXPECT_NEAR(s.entropy[b][h], entropy[b][h] / (N * k), 1e-4) << kind << " k " << k;
          }
        double wrong = 0;
        for (int e = 0; e < kOutputErrorKinds; ++e) {
          EXPECT_EQ(s.errors[e].first, output_error_names()[e]);
          EXPECT_NEAR(s.errors[e].second, errors[e] / (N * k), kept(errors[e] / (N * k))) << kind << " k " << k;
          wrong += s.errors[e].second;
        }
        EXPECT_NEAR(wrong, 1.0 - s.token, kOutputErrorKinds * kept(1.0)) << "the kinds share out the wrong outputs";
      }
    }
  }
}

}  // namespace
}  // namespace copytask

namespace copytask {
namespace {

// FNV-1a over a list of int64 vectors.
uint64_t digest(const std::vector<const std::vector<int64_t>*>& parts) {
  uint64_t h = 1469598103934665603ull;
  for (const auto* part : parts)
    for (int64_t v : *part)
      for (int byte = 0; byte < 8; ++byte) h = (h ^ ((static_cast<uint64_t>(v) >> (8 * byte)) & 0xff)) * 1099511628211ull;
  return h;
}

// The reference protocol's copy data (task.* defaults) and its length sets to 16, as the
// copytask before the task kinds drew them (commit e945c65 and 61a3028: the same digest, and a compare
// of 6 schemes x 2 seeds with eval.max_len=12 gave the same results.json, metrics.jsonl and
// model.pt byte for byte). A change here changes every study's numbers.
TEST(TaskKinds, TheReferenceProtocolsCopyDataIsAsBefore) {
  const TaskConfig task;
  const CopyTask data = copy_task_generate(task);
  EvalConfig eval;
  eval.max_len = 16;
  const auto sets = length_sets_generate(task, eval, data.train);
  std::vector<const std::vector<int64_t>*> parts = {&data.train.inputs, &data.train.targets, &data.test.inputs,
                                                    &data.test.targets};
  for (const auto& set : sets) parts.push_back(&set.examples.inputs);
  EXPECT_EQ(digest(parts), 6257335763099988960ull) << "the reference data changed";
}

}  // namespace
}  // namespace copytask
