#include "task/length_sets.h"

#include <algorithm>
#include <random>
#include <string>
#include <unordered_set>

#include "util/splitmix.h"
#include "util/uniform.h"

namespace copytask {
namespace {

// Where enumerating every input of a length is cheaper than drawing with rejection: when
// the wanted and excluded inputs are a large share of them, or there are few at all.
constexpr int64_t kEnumerateAtMost = 1'000'000;

// The training inputs by content length (index k), each as the tokens before <copy>
// (noise included), in one pass.
std::vector<std::unordered_set<std::string>> trained_prefixes(const CopySplit& train, const TaskConfig& task) {
  std::vector<std::unordered_set<std::string>> by_length(task.max_len + 1);
  for (int64_t i = 0; i < train.count; ++i) {
    const int64_t* row = train.inputs.data() + i * task.context;
    const OutputSources sources = output_sources(task, row, task.context);
    const int64_t k = sources.length();
    if (sources.copy_at >= 0 && k <= task.max_len)
      by_length[k].insert(content_key(std::vector<int64_t>(row, row + sources.copy_at)));
  }
  return by_length;
}

// The index-th input of length k: its content the index / C-th in lexicographic order (base
// content_vocab digits), its noise places the index % C-th combination (C = the ways to
// place the noise).
Example nth_example(int64_t index, int64_t k, const TaskConfig& task) {
  const int64_t vocab = content_vocab(task), m = noise_count(task, k);
  const int64_t placements = choose(k + m, m);
  Example example;
  example.noise_at = nth_combination(index % placements, k + m, m);
  int64_t content_index = index / placements;
  example.content.resize(k);
  for (int64_t i = k - 1; i >= 0; --i) {
    example.content[i] = 1 + content_index % vocab;
    content_index /= vocab;
  }
  return example;
}

}  // namespace

int64_t length_context(const TaskConfig& task, int64_t length) {
  return std::max(task.context, whole_example_context(task, length));
}

namespace {

// The sets of one seed (or the shared ones), given the trained inputs' prefixes by length.
std::vector<LengthSet> length_sets_draw(const TaskConfig& task, const EvalConfig& eval,
                                        const std::vector<std::unordered_set<std::string>>& trained,
                                        std::optional<int64_t> member_seed) {
  std::vector<LengthSet> sets;
  const int64_t vocab = content_vocab(task);
  const std::unordered_set<std::string> none;
  for (int64_t k = task.min_len; k <= eval.max_len; ++k) {
    LengthSet set;
    set.length = k;
    set.context = length_context(task, k);
    set.trained = k <= task.max_len;
    // Its own stream per length: a longer eval.max_len leaves the shorter lengths' examples as they were.
    // A member seed's sets mix that seed in: a stream of its own, the shared one untouched.
    const uint64_t seed_key = member_seed ? splitmix64_mix(static_cast<uint64_t>(*member_seed) + kSplitMixGamma) : 0;
    std::mt19937_64 engine(((static_cast<uint64_t>(eval.seed) * 0x9E3779B97F4A7C15ull + 0x5DEECE66Dull) ^
                            (static_cast<uint64_t>(k) * 0xD1B54A32D192ED03ull)) ^
                           seed_key);
    const std::unordered_set<std::string>& excluded = set.trained ? trained[k] : none;
    const int64_t capacity = inputs_of_length(task, k);
    const int64_t available = capacity - static_cast<int64_t>(excluded.size());
    const int64_t wanted = std::min(eval.per_length, available);
    std::vector<Example> examples;
    if (capacity <= kEnumerateAtMost && capacity <= 4 * (wanted + static_cast<int64_t>(excluded.size()))) {
      // Every input not trained on, then the first `wanted` of a shuffle.
      for (int64_t index = 0; index < capacity; ++index) {
        Example example = nth_example(index, k, task);
        if (!excluded.count(content_key(example_prefix(task, example)))) examples.push_back(std::move(example));
      }
      for (int64_t i = 0; i < wanted; ++i)
        std::swap(examples[i], examples[i + uniform_below(engine, examples.size() - i)]);
      examples.resize(wanted);
    } else {
      // Uniform draws; a repeat or a trained input is drawn again.
      std::unordered_set<std::string> seen;
      while (static_cast<int64_t>(examples.size()) < wanted) {
        Example example;
        example.content.resize(k);
        for (auto& token : example.content) token = 1 + static_cast<int64_t>(uniform_below(engine, vocab));
        example.noise_at = random_noise_places(engine, task, k);
        const std::string key = content_key(example_prefix(task, example));
        if (excluded.count(key) || !seen.insert(key).second) continue;
        examples.push_back(std::move(example));
      }
    }
    for (const auto& example : examples) example_append(set.examples, task, example, set.context);
    sets.push_back(std::move(set));
  }
  return sets;
}

}  // namespace

std::vector<LengthSet> length_sets_generate(const TaskConfig& task, const EvalConfig& eval, const CopySplit& train,
                                            std::optional<int64_t> member_seed) {
  if (eval.max_len <= 0) return {};
  return length_sets_draw(task, eval, trained_prefixes(train, task), member_seed);
}

std::vector<std::vector<LengthSet>> length_sets_generate_per_seed(const TaskConfig& task, const EvalConfig& eval,
                                                                  const CopySplit& train,
                                                                  const std::vector<int64_t>& seeds) {
  std::vector<std::vector<LengthSet>> by_seed;
  if (eval.max_len <= 0) return std::vector<std::vector<LengthSet>>(seeds.size());
  // The training split's inputs, by length, once for every seed (a second on a study of
  // hundreds of thousands of examples).
  const std::vector<std::unordered_set<std::string>> trained = trained_prefixes(train, task);
  for (const int64_t seed : seeds) by_seed.push_back(length_sets_draw(task, eval, trained, seed));
  return by_seed;
}

}  // namespace copytask
