#include "task/length_sets.h"

#include <algorithm>
#include <random>
#include <string>
#include <unordered_set>

#include "util/uniform.h"

namespace copytask {
namespace {

// Where enumerating every input of a length is cheaper than drawing with rejection: when
// the wanted and excluded inputs are a large share of them, or there are few at all.
constexpr int64_t kEnumerateAtMost = 1'000'000;

// The training inputs' content tokens by length (index k: the tokens before <copy>), in one pass.
std::vector<std::unordered_set<std::string>> trained_contents(const CopySplit& train, const TaskConfig& task) {
  std::vector<std::unordered_set<std::string>> by_length(task.max_len + 1);
  for (int64_t i = 0; i < train.count; ++i) {
    const int64_t* row = train.inputs.data() + i * task.context;
    const int64_t k = std::find(row, row + task.context, copy_token(task.vocab_size)) - row;  // content is never <copy>
    if (k <= task.max_len) by_length[k].insert(content_key(std::vector<int64_t>(row, row + k)));
  }
  return by_length;
}

// The index-th input of length k in lexicographic order (base content_vocab digits).
std::vector<int64_t> nth_content(int64_t index, int64_t k, int64_t content_vocab) {
  std::vector<int64_t> content(k);
  for (int64_t i = k - 1; i >= 0; --i) {
    content[i] = 1 + index % content_vocab;
    index /= content_vocab;
  }
  return content;
}

}  // namespace

int64_t length_context(const TaskConfig& task, int64_t length) { return std::max(task.context, 2 * length + 1); }

std::vector<LengthSet> length_sets_generate(const TaskConfig& task, const EvalConfig& eval, const CopySplit& train) {
  std::vector<LengthSet> sets;
  if (eval.max_len <= 0) return sets;
  const int64_t content_vocab = task.vocab_size - 2;
  const std::vector<std::unordered_set<std::string>> trained = trained_contents(train, task);
  const std::unordered_set<std::string> none;
  for (int64_t k = task.min_len; k <= eval.max_len; ++k) {
    LengthSet set;
    set.length = k;
    set.context = length_context(task, k);
    set.trained = k <= task.max_len;
    // Its own stream per length: a longer eval.max_len leaves the shorter lengths' examples as they were.
    std::mt19937_64 engine((static_cast<uint64_t>(eval.seed) * 0x9E3779B97F4A7C15ull + 0x5DEECE66Dull) ^
                           (static_cast<uint64_t>(k) * 0xD1B54A32D192ED03ull));
    const std::unordered_set<std::string>& excluded = set.trained ? trained[k] : none;
    const int64_t capacity = copy_inputs_of_length(content_vocab, k);
    const int64_t available = capacity - static_cast<int64_t>(excluded.size());
    const int64_t wanted = std::min(eval.per_length, available);
    std::vector<std::vector<int64_t>> contents;
    if (capacity <= kEnumerateAtMost && capacity <= 4 * (wanted + static_cast<int64_t>(excluded.size()))) {
      // Every input not trained on, then the first `wanted` of a shuffle.
      for (int64_t index = 0; index < capacity; ++index) {
        auto content = nth_content(index, k, content_vocab);
        if (!excluded.count(content_key(content))) contents.push_back(std::move(content));
      }
      for (int64_t i = 0; i < wanted; ++i)
        std::swap(contents[i], contents[i + uniform_below(engine, contents.size() - i)]);
      contents.resize(wanted);
    } else {
      // Uniform draws; a repeat or a trained input is drawn again.
      std::unordered_set<std::string> seen;
      while (static_cast<int64_t>(contents.size()) < wanted) {
        std::vector<int64_t> content(k);
        for (auto& token : content) token = 1 + static_cast<int64_t>(uniform_below(engine, content_vocab));
        const std::string key = content_key(content);
        if (excluded.count(key) || !seen.insert(key).second) continue;
        contents.push_back(std::move(content));
      }
    }
    for (const auto& content : contents) copy_split_append(set.examples, content, task.vocab_size, set.context);
    sets.push_back(std::move(set));
  }
  return sets;
}

}  // namespace copytask
