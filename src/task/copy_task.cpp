#include "task/copy_task.h"

#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "util/uniform.h"

namespace copytask {
namespace {


}  // namespace

int64_t copy_inputs_of_length(int64_t content_vocab, int64_t k) {
  int64_t count = 1;
  for (int64_t i = 0; i < k; ++i) {
    if (count > std::numeric_limits<int64_t>::max() / content_vocab) return std::numeric_limits<int64_t>::max();
    count *= content_vocab;
  }
  return count;
}

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
  int64_t total = 0;
  for (int64_t k = task.min_len; k <= task.max_len; ++k) {
    int64_t count = copy_inputs_of_length(task.vocab_size - 2, k);
    if (count > std::numeric_limits<int64_t>::max() - total) return std::numeric_limits<int64_t>::max();
    total += count;
  }
  return total;
}

std::pair<int64_t, int64_t> copy_task_split_sizes(const TaskConfig& task) {
  int64_t test = static_cast<int64_t>(std::llround(static_cast<double>(task.examples) * task.test_fraction));
  return {task.examples - test, test};
}

std::vector<int64_t> copy_input(const std::vector<int64_t>& content, int64_t vocab_size, int64_t context) {
  std::vector<int64_t> input(context, kPadToken);
  const int64_t k = static_cast<int64_t>(content.size());
  for (int64_t i = 0; i < k && i < context; ++i) input[i] = content[i];
  if (k < context) input[k] = copy_token(vocab_size);
  return input;
}

std::vector<int64_t> copy_target(const std::vector<int64_t>& content, int64_t vocab_size, int64_t context) {
  std::vector<int64_t> target = copy_input(content, vocab_size, context);
  const int64_t k = static_cast<int64_t>(content.size());
  for (int64_t i = 0; i < k && k + 1 + i < context; ++i) target[k + 1 + i] = content[i];
  return target;
}

void copy_split_append(CopySplit& split, const std::vector<int64_t>& content, int64_t vocab_size, int64_t context) {
  auto input = copy_input(content, vocab_size, context);
  auto target = copy_target(content, vocab_size, context);
  split.inputs.insert(split.inputs.end(), input.begin(), input.end());
  split.targets.insert(split.targets.end(), target.begin(), target.end());
  split.count += 1;
}

CopyTask copy_task_generate(const TaskConfig& task) {
  const int64_t content_vocab = task.vocab_size - 2;
  const int64_t test_count = copy_task_split_sizes(task).second;
  if (task.examples > copy_task_capacity(task))
    throw std::invalid_argument("task.examples exceeds the number of distinct inputs");

  std::mt19937_64 engine(static_cast<uint64_t>(task.seed) * 0x9E3779B97F4A7C15ull + 0x5DEECE66Dull);
  std::vector<int64_t> lengths;  // lengths that still have unused inputs
  std::vector<int64_t> used_of_length(task.max_len + 1, 0);
  for (int64_t k = task.min_len; k <= task.max_len; ++k) lengths.push_back(k);

  std::unordered_set<std::string> seen;
  seen.reserve(static_cast<size_t>(task.examples) * 2);
  std::vector<std::vector<int64_t>> contents;
  contents.reserve(task.examples);
  while (static_cast<int64_t>(contents.size()) < task.examples) {
    const size_t slot = uniform_below(engine, lengths.size());
    const int64_t k = lengths[slot];
    std::vector<int64_t> content(k);
    // A duplicate is drawn again at the same length, so every length keeps its share
    // until all of its inputs are used.
    do {
      for (auto& token : content) token = 1 + static_cast<int64_t>(uniform_below(engine, content_vocab));
    } while (!seen.insert(content_key(content)).second);
    contents.push_back(std::move(content));
    if (++used_of_length[k] == copy_inputs_of_length(content_vocab, k)) lengths.erase(lengths.begin() + slot);
  }

  // Shuffle before splitting: the short lengths run out of distinct inputs early, so in
  // drawing order they cluster at the front, and the test split would get all of them.
  for (size_t i = contents.size() - 1; i > 0; --i) std::swap(contents[i], contents[uniform_below(engine, i + 1)]);
  CopyTask out;
  out.vocab_size = task.vocab_size;
  out.context = task.context;
  for (int64_t i = 0; i < task.examples; ++i)
    copy_split_append(i < test_count ? out.test : out.train, contents[i], task.vocab_size, task.context);
  return out;
}

std::vector<int64_t> probe_tokens(const std::string& text, const TaskConfig& task, int64_t context) {
  if (context == 0) context = task.context;
  std::istringstream stream(text);
  std::vector<int64_t> content;
  std::string word;
  while (stream >> word) {
    size_t used = 0;
    long long token = 0;
    try {
      token = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size())
      throw std::invalid_argument("'" + word + "' is not a token id; write content tokens as integers, e.g. \"7 1 8 2\"");
    if (token < 1 || token > task.vocab_size - 2)
      throw std::invalid_argument("token " + word + " is not a content token; content tokens are 1.." +
                                  std::to_string(task.vocab_size - 2) + " (0 is padding, " +
                                  std::to_string(task.vocab_size - 1) + " is <copy>, both added for you)");
    content.push_back(token);
  }
  if (content.empty()) throw std::invalid_argument("a probe needs at least one content token, e.g. \"7 1 8 2\"");
  if (static_cast<int64_t>(content.size()) + 1 > context)
    throw std::invalid_argument(std::to_string(content.size()) + " tokens plus <copy> do not fit in " +
                                (context == task.context ? "task.context = " : "the longest context the model covers, ") +
                                std::to_string(context));
  return content;
}

std::string tokens_to_text(const std::vector<int64_t>& tokens, int64_t vocab_size) {
  std::string text;
  for (int64_t token : tokens) {
    if (!text.empty()) text += ' ';
    if (token == kPadToken) text += '_';
    else if (token == copy_token(vocab_size)) text += "<copy>";
    else text += std::to_string(token);
  }
  return text;
}

}  // namespace copytask
