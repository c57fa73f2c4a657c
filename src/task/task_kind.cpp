#include "task/task_kind.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "task/tokens.h"

namespace copytask {

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

int64_t copy_inputs_of_length(int64_t content_vocab, int64_t k) {
  int64_t count = 1;
  for (int64_t i = 0; i < k; ++i) {
    if (count > std::numeric_limits<int64_t>::max() / content_vocab) return std::numeric_limits<int64_t>::max();
    count *= content_vocab;
  }
  return count;
}

const std::vector<std::string>& task_kind_names() {
  static const std::vector<std::string> names{"copy", "reverse", "selective"};
  return names;
}

TaskKind task_kind(const TaskConfig& task) {
  if (task.kind == "copy") return TaskKind::copy;
  if (task.kind == "reverse") return TaskKind::reverse;
  if (task.kind == "selective") return TaskKind::selective;
  throw std::invalid_argument("task.kind = \"" + task.kind + "\" is not a task kind; use copy, reverse or selective");
}

int64_t content_vocab(const TaskConfig& task) {
  return task.vocab_size - (task_kind(task) == TaskKind::selective ? 3 : 2) - (task.end_token == "own" ? 1 : 0);
}

int64_t end_token(const TaskConfig& task) {
  if (task.end_token != "own") return kPadToken;
  return task.vocab_size - (task_kind(task) == TaskKind::selective ? 3 : 2);
}

int64_t noise_token(const TaskConfig& task) {
  return task_kind(task) == TaskKind::selective ? task.vocab_size - 2 : -1;
}

int64_t noise_count(const TaskConfig& task, int64_t k) {
  if (task_kind(task) != TaskKind::selective) return 0;
  return static_cast<int64_t>(std::llround(static_cast<double>(k) * task.noise / (1.0 - task.noise)));
}

int64_t prefix_length(const TaskConfig& task, int64_t k) { return k + noise_count(task, k); }

bool next_token(const TaskConfig& task) { return task.format == "next-token"; }

int64_t whole_example_context(const TaskConfig& task, int64_t k) {
  return prefix_length(task, k) + 1 + k + (next_token(task) ? 1 : 0);  // next-token: and the end token
}

int64_t choose(int64_t n, int64_t m) {
  if (m < 0 || m > n) return 0;
  m = std::min(m, n - m);
  // C(n, i) = C(n, i - 1) * (n - i + 1) / i, exact at every step; saturates on overflow.
  int64_t result = 1;
  for (int64_t i = 1; i <= m; ++i) {
    const int64_t factor = n - i + 1;
    if (result > std::numeric_limits<int64_t>::max() / factor) return std::numeric_limits<int64_t>::max();
    result = result * factor / i;
  }
  return result;
}

int64_t inputs_of_length(const TaskConfig& task, int64_t k) {
  const int64_t contents = copy_inputs_of_length(content_vocab(task), k);
  const int64_t placements = choose(prefix_length(task, k), noise_count(task, k));
  if (placements == 0) return 0;
  if (contents > std::numeric_limits<int64_t>::max() / placements) return std::numeric_limits<int64_t>::max();
  return contents * placements;
}

std::vector<int64_t> example_prefix(const TaskConfig& task, const Example& example) {
  const int64_t k = static_cast<int64_t>(example.content.size());
  const int64_t n = k + static_cast<int64_t>(example.noise_at.size());
  std::vector<int64_t> prefix(n);
  size_t next_noise = 0, next_content = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (next_noise < example.noise_at.size() && example.noise_at[next_noise] == i) {
      prefix[i] = noise_token(task);
      ++next_noise;
    } else {
      prefix[i] = example.content[next_content++];
    }
  }
  return prefix;
}

namespace {
// The placeholders format's target: the prefix echoed, <copy>, the outputs, padding.
std::vector<int64_t> placeholders_target(const TaskConfig& task, const Example& example, int64_t context) {
  std::vector<int64_t> target = copy_input(example_prefix(task, example), task.vocab_size, context);
  const int64_t k = static_cast<int64_t>(example.content.size());
  const int64_t begin = static_cast<int64_t>(example.content.size() + example.noise_at.size()) + 1;
  const bool reversed = task_kind(task) == TaskKind::reverse;
  for (int64_t j = 0; j < k && begin + j < context; ++j) target[begin + j] = example.content[reversed ? k - 1 - j : j];
  return target;
}

// The next-token format's whole sequence: the prefix, <copy>, the outputs and the end token.
std::vector<int64_t> next_token_sequence(const TaskConfig& task, const Example& example, int64_t context) {
  std::vector<int64_t> sequence = placeholders_target(task, example, context);
  const int64_t end_at = static_cast<int64_t>(2 * example.content.size() + example.noise_at.size()) + 1;
  if (end_at < context) sequence[end_at] = end_token(task);
  return sequence;
}
}  // namespace

std::vector<int64_t> example_input(const TaskConfig& task, const Example& example, int64_t context) {
  // next-token: the whole sequence, the outputs after <copy> and the end token after them.
  if (next_token(task)) return next_token_sequence(task, example, context);
  return copy_input(example_prefix(task, example), task.vocab_size, context);
}

std::vector<int64_t> example_target(const TaskConfig& task, const Example& example, int64_t context) {
  if (!next_token(task)) return placeholders_target(task, example, context);
  // next-token: the prefix echoed (as under placeholders), then from <copy> on each next
  // token: <copy> predicts output 0, output j output j + 1, the last output the end.
  const std::vector<int64_t> sequence = next_token_sequence(task, example, context + 1);
  std::vector<int64_t> target(sequence.begin(), sequence.begin() + context);
  const int64_t copy_at = static_cast<int64_t>(example.content.size() + example.noise_at.size());
  for (int64_t t = copy_at; t < context; ++t) target[t] = sequence[t + 1];
  if (cho_convention(task)) {
    // Only the outputs and the end in the loss: positions copy_at .. copy_at + k.
    const int64_t last = copy_at + static_cast<int64_t>(example.content.size());
    for (int64_t t = 0; t < context; ++t)
      if (t < copy_at || t > last) target[t] = kOutOfLoss;
  }
  return target;
}

std::vector<int64_t> even_noise_places(const TaskConfig& task, int64_t k) {
  const int64_t m = noise_count(task, k), n = k + m;
  std::vector<int64_t> places;
  // The i-th noise token at the middle of the i-th of m equal stretches of the prefix.
  for (int64_t i = 0; i < m; ++i) places.push_back(((2 * i + 1) * n) / (2 * m));
  return places;
}

OutputSources output_sources(const TaskConfig& task, const int64_t* row, int64_t context) {
  OutputSources out;
  const int64_t copy = copy_token(task.vocab_size), noise = noise_token(task);
  for (int64_t i = 0; i < context; ++i)
    if (row[i] == copy) {
      out.copy_at = i;
      break;
    }
  if (out.copy_at < 0) return out;
  out.first_output = out.copy_at + (next_token(task) ? 0 : 1);
  for (int64_t i = 0; i < out.copy_at; ++i)
    if (row[i] != noise) out.content_at.push_back(i);
  const int64_t k = static_cast<int64_t>(out.content_at.size());
  const bool reversed = task_kind(task) == TaskKind::reverse;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t index = reversed ? k - 1 - j : j;
    out.content_index.push_back(index);
    out.sources.push_back(out.content_at[index]);
  }
  return out;
}

bool cho_convention(const TaskConfig& task) { return task.convention == "cho"; }

void coupled_places(const TaskConfig& task, const int64_t* row, int64_t context, int64_t* places) {
  const OutputSources sources = output_sources(task, row, context);
  if (!cho_convention(task)) {
    for (int64_t t = 0; t < context; ++t) places[t] = t;
    for (int64_t j = 0; j < sources.length() && sources.output_begin() + j < context; ++j)
      places[sources.output_begin() + j] = sources.sources[static_cast<size_t>(j)];
    return;
  }
  // Place 0 is the end token's and the padding's; the prefix counts from 2, so that <copy>,
  // one step before output 0's source, is at least 1.
  constexpr int64_t kFirst = 2;
  const int64_t copy_at = sources.copy_at < 0 ? context : sources.copy_at;
  for (int64_t t = 0; t < context; ++t) places[t] = t < copy_at ? t + kFirst : 0;
  if (sources.copy_at < 0 || sources.length() == 0) return;
  const bool reversed = task_kind(task) == TaskKind::reverse;
  places[copy_at] = sources.sources[0] + kFirst + (reversed ? 1 : -1);
  for (int64_t j = 0; j < sources.length() && copy_at + 1 + j < context; ++j)
    places[copy_at + 1 + j] = sources.sources[static_cast<size_t>(j)] + kFirst;
}

int64_t coupled_id(const TaskConfig& task, int64_t place, int64_t start) {
  return cho_convention(task) && place == 0 ? 0 : start + place;
}

std::vector<int64_t> nth_combination(int64_t index, int64_t n, int64_t m) {
  std::vector<int64_t> places;
  int64_t next = 0;
  for (int64_t left = m; left > 0; --left) {
    // Skip the combinations that start at `next` while index lies beyond them.
    while (true) {
      const int64_t starting_here = choose(n - next - 1, left - 1);
      if (index < starting_here) break;
      index -= starting_here;
      ++next;
    }
    places.push_back(next++);
  }
  return places;
}

}  // namespace copytask
