#include "task/copy_task.h"

#include <algorithm>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "task/task_kind.h"
#include "util/uniform.h"

namespace copytask {

std::string content_key(const std::vector<int64_t>& content) {
  std::string key;
  key.reserve(content.size() * 3);
  for (int64_t token : content) {
    key.push_back(static_cast<char>(token & 0xff));
    key.push_back(static_cast<char>((token >> 8) & 0xff));
    key.push_back(static_cast<char>((token >> 16) & 0xff));
  }
  return key;
}

int64_t copy_task_capacity(const TaskConfig& task) {
  if (task.vocab_size < 3 || task.min_len < 1 || task.max_len < task.min_len) return 0;
  if (content_vocab(task) < 1) return 0;
  int64_t total = 0;
  for (int64_t k = task.min_len; k <= task.max_len; ++k) {
    int64_t count = inputs_of_length(task, k);
    if (count > std::numeric_limits<int64_t>::max() - total) return std::numeric_limits<int64_t>::max();
    total += count;
  }
  return total;
}

std::pair<int64_t, int64_t> copy_task_split_sizes(const TaskConfig& task) {
  int64_t test = static_cast<int64_t>(std::llround(static_cast<double>(task.examples) * task.test_fraction));
  return {task.examples - test, test};
}

void copy_split_append(CopySplit& split, const std::vector<int64_t>& content, int64_t vocab_size, int64_t context) {
  auto input = copy_input(content, vocab_size, context);
  auto target = copy_target(content, vocab_size, context);
  split.inputs.insert(split.inputs.end(), input.begin(), input.end());
  split.targets.insert(split.targets.end(), target.begin(), target.end());
  split.count += 1;
}

void example_append(CopySplit& split, const TaskConfig& task, const Example& example, int64_t context) {
  auto input = example_input(task, example, context);
  auto target = example_target(task, example, context);
  split.inputs.insert(split.inputs.end(), input.begin(), input.end());
  split.targets.insert(split.targets.end(), target.begin(), target.end());
  split.count += 1;
}

std::vector<int64_t> random_noise_places(std::mt19937_64& engine, const TaskConfig& task, int64_t k) {
  const int64_t m = noise_count(task, k), n = k + m;
  if (m == 0) return {};
  std::vector<int64_t> slots(n);
  for (int64_t i = 0; i < n; ++i) slots[i] = i;
  // The first m of a partial Fisher-Yates shuffle: m places, each set equally likely.
  for (int64_t i = 0; i < m; ++i) std::swap(slots[i], slots[i + uniform_below(engine, n - i)]);
  slots.resize(m);
  std::sort(slots.begin(), slots.end());
  return slots;
}

namespace {
// A draw from the task's distribution: the length uniform over min_len..max_len, then the
// content uniform over the content tokens, and under selective the noise's places.
Example example_draw(std::mt19937_64& engine, const TaskConfig& task, int64_t k) {
  Example example;
  example.content.resize(static_cast<size_t>(k));
  for (auto& token : example.content) token = 1 + static_cast<int64_t>(uniform_below(engine, content_vocab(task)));
  example.noise_at = random_noise_places(engine, task, k);
  return example;
}

// task.sampling = fresh: the test split's inputs distinct (as under unique, from the same
// engine), then each train example drawn on its own, never a test input.
CopyTask fresh_generate(const TaskConfig& task, std::mt19937_64& engine) {
  const auto [train_count, test_count] = copy_task_split_sizes(task);
  const int64_t span = task.max_len - task.min_len + 1;
  auto length_draw = [&] { return task.min_len + static_cast<int64_t>(uniform_below(engine, static_cast<uint64_t>(span))); };
  CopyTask out;
  out.vocab_size = task.vocab_size;
  out.context = task.context;
  out.noise_token = noise_token(task);
  std::unordered_set<std::string> test_inputs;
  {
    std::unordered_set<std::string> seen;
    std::vector<Example> examples;
    std::vector<int64_t> used_of_length(static_cast<size_t>(task.max_len + 1), 0);
    while (static_cast<int64_t>(examples.size()) < test_count) {
      const int64_t k = length_draw();
      // At most half of a length's inputs go to the test split, so that training still
      // draws every length (the test's short lengths would otherwise take all of theirs).
      if (used_of_length[k] >= inputs_of_length(task, k) / 2) continue;
      Example example = example_draw(engine, task, k);
      if (!seen.insert(content_key(example_prefix(task, example))).second) continue;
      ++used_of_length[k];
      examples.push_back(std::move(example));
    }
    for (const auto& example : examples) {
      test_inputs.insert(content_key(example_prefix(task, example)));
      example_append(out.test, task, example, task.context);
    }
  }
  for (int64_t i = 0; i < train_count; ++i) {
    const int64_t k = length_draw();
    Example example = example_draw(engine, task, k);
    // Never a test input: drawn again at the same length, so every length keeps its share.
    while (test_inputs.count(content_key(example_prefix(task, example)))) example = example_draw(engine, task, k);
    example_append(out.train, task, example, task.context);
  }
  out.train_evaluated = std::min(out.train.count, out.test.count);
  return out;
}
}  // namespace

CopyTask copy_task_generate(const TaskConfig& task) {
  const int64_t vocab = content_vocab(task);
  const int64_t test_count = copy_task_split_sizes(task).second;
  std::mt19937_64 fresh_engine(static_cast<uint64_t>(task.seed) * 0x9E3779B97F4A7C15ull + 0x5DEECE66Dull);
  if (task.sampling == "fresh") {
    if (test_count > copy_task_capacity(task))
      throw std::invalid_argument("the test split exceeds the number of distinct inputs");
    return fresh_generate(task, fresh_engine);
  }
  if (task.examples > copy_task_capacity(task))
    throw std::invalid_argument("task.examples exceeds the number of distinct inputs");

  std::mt19937_64 engine(static_cast<uint64_t>(task.seed) * 0x9E3779B97F4A7C15ull + 0x5DEECE66Dull);
  std::vector<int64_t> lengths;  // lengths that still have unused inputs
  std::vector<int64_t> used_of_length(task.max_len + 1, 0);
  for (int64_t k = task.min_len; k <= task.max_len; ++k) lengths.push_back(k);

  std::unordered_set<std::string> seen;
  seen.reserve(static_cast<size_t>(task.examples) * 2);
  std::vector<Example> examples;
  examples.reserve(task.examples);
  while (static_cast<int64_t>(examples.size()) < task.examples) {
    const size_t slot = uniform_below(engine, lengths.size());
    const int64_t k = lengths[slot];
    Example example;
    example.content.resize(k);
    // A duplicate is drawn again at the same length, so every length keeps its share
    // until all of its inputs are used. (copy and reverse draw the same inputs.)
    do {
      for (auto& token : example.content) token = 1 + static_cast<int64_t>(uniform_below(engine, vocab));
      example.noise_at = random_noise_places(engine, task, k);
    } while (!seen.insert(content_key(example_prefix(task, example))).second);
    examples.push_back(std::move(example));
    if (++used_of_length[k] == inputs_of_length(task, k)) lengths.erase(lengths.begin() + slot);
  }

  // Shuffle before splitting: the short lengths run out of distinct inputs early, so in
  // drawing order they cluster at the front, and the test split would get all of them.
  for (size_t i = examples.size() - 1; i > 0; --i) std::swap(examples[i], examples[uniform_below(engine, i + 1)]);
  CopyTask out;
  out.vocab_size = task.vocab_size;
  out.context = task.context;
  out.noise_token = noise_token(task);
  for (int64_t i = 0; i < task.examples; ++i)
    example_append(i < test_count ? out.test : out.train, task, examples[i], task.context);
  out.train_evaluated = out.train.count;
  return out;
}

Example probe_example(const std::string& text, const TaskConfig& task, int64_t context) {
  if (context == 0) context = task.context;
  const bool selective = task_kind(task) == TaskKind::selective;
  const int64_t last_content = content_vocab(task);
  std::istringstream stream(text);
  Example example;
  std::string word;
  int64_t position = 0;
  while (stream >> word) {
    if (word == "~") {
      if (!selective)
        throw std::invalid_argument("'~' (a noise token) belongs to task.kind = selective only; this task is " + task.kind);
      example.noise_at.push_back(position++);
      continue;
    }
    size_t used = 0;
    long long token = 0;
    try {
      token = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size())
      throw std::invalid_argument("'" + word + "' is not a token id; write content tokens as integers, e.g. \"7 1 8 2\"" +
                                  std::string(selective ? " (and ~ for a noise token)" : ""));
    if (token < 1 || token > last_content)
      throw std::invalid_argument("token " + word + " is not a content token; content tokens are 1.." +
                                  std::to_string(last_content) + " (0 is padding, " +
                                  (selective ? std::to_string(noise_token(task)) + " is noise, written ~, " : "") +
                                  std::to_string(task.vocab_size - 1) + " is <copy>, both added for you)");
    example.content.push_back(token);
    ++position;
  }
  if (example.content.empty()) throw std::invalid_argument("a probe needs at least one content token, e.g. \"7 1 8 2\"");
  if (selective && example.noise_at.empty())
    example.noise_at = even_noise_places(task, static_cast<int64_t>(example.content.size()));
  const int64_t prefix = static_cast<int64_t>(example.content.size() + example.noise_at.size());
  if (prefix + 1 > context)
    throw std::invalid_argument(std::to_string(prefix) + " tokens plus <copy> do not fit in " +
                                (context == task.context ? "task.context = " : "the longest context the model covers, ") +
                                std::to_string(context));
  return example;
}

std::string tokens_to_text(const std::vector<int64_t>& tokens, int64_t vocab_size, int64_t noise) {
  std::string text;
  for (int64_t token : tokens) {
    if (!text.empty()) text += ' ';
    if (token == kPadToken) text += '_';
    else if (token == noise) text += '~';
    else if (token == copy_token(vocab_size)) text += "<copy>";
    else text += std::to_string(token);
  }
  return text;
}

}  // namespace copytask
