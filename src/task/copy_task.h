#pragma once
// The copy task (docs/design.md section 1). Pure C++ (no tensors): the trainer uploads it.
//
//   input : c1 .. ck <copy> _ _ _        (k content tokens, then <copy>, padded to T)
//   target: c1 .. ck <copy> c1 .. ck _   (the content repeated after <copy>, cut at T)
//
// Token ids: 0 = padding, 1..V-2 = content, V-1 = <copy>.
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "task/task_config.h"
#include "task/task_kind.h"
#include "task/tokens.h"

namespace copytask {


// N examples of T tokens each, row-major (N * T).
struct CopySplit {
  int64_t count = 0;
  std::vector<int64_t> inputs;
  std::vector<int64_t> targets;
};

struct CopyTask {
  int64_t vocab_size = 0;
  int64_t context = 0;
  int64_t noise_token = -1;  // task/task_kind.h; -1 = none
  CopySplit train;
  CopySplit test;
  // The train split's first examples the train numbers (train_exact, ...) are measured on:
  // all of them, but under task.sampling = fresh as many as the test split holds (that split
  // is a draw for every row of every step, too many to evaluate at every evaluation).
  int64_t train_evaluated = 0;
};

// A content sequence as one hashable key: three bytes per token (vocab_size <= 100000),
// so sequences of different lengths never collide.
std::string content_key(const std::vector<int64_t>& content);

// How many distinct inputs exist: sum over k of inputs_of_length (task/task_kind.h; for
// copy and reverse (V-2)^k), saturated at INT64_MAX.
int64_t copy_task_capacity(const TaskConfig& task);

// {train count, test count}: test = round(examples * test_fraction). Under sampling "fresh"
// only the test count is bounded by the distinct inputs (copy_task_capacity).
std::pair<int64_t, int64_t> copy_task_split_sizes(const TaskConfig& task);

// The examples, deterministic for task.seed; the train and test inputs are disjoint.
// Under task.sampling = unique, every example distinct: the length k is uniform over
// min_len..max_len (a length whose inputs are all used is dropped from the draw; a
// duplicate is redrawn at its length), the content tokens uniform over 1..V-2. Under
// fresh, the test split is drawn so (each length giving it at most half of its inputs, so
// that training still draws every length), and then every train example independently: its
// length uniform over min_len..max_len, its content uniform, repeats allowed, a test input
// drawn again at its length.
CopyTask copy_task_generate(const TaskConfig& task);

// Appends the example of these content tokens (its input and target, T tokens each) to a split.
void copy_split_append(CopySplit& split, const std::vector<int64_t>& content, int64_t vocab_size, int64_t context);

// Appends an example of the task's kind (task/task_kind.h) in a context of T tokens.
void example_append(CopySplit& split, const TaskConfig& task, const Example& example, int64_t context);

// Under selective, noise_count(k) places drawn uniformly from the k + m before <copy>
// (ascending); empty for the other kinds, without drawing.
std::vector<int64_t> random_noise_places(std::mt19937_64& engine, const TaskConfig& task, int64_t k);

// Parses a probe such as "7 1 8 2" (content tokens) into its example; under selective a
// `~` marks a noise token ("7 ~ 1 8 ~ 2"), and a probe without any gets the noise spread
// evenly (even_noise_places). Throws std::invalid_argument saying what is wrong (a token
// out of range, too long for the context, ...). `context` is the longest context allowed,
// 0 = task.context.
Example probe_example(const std::string& text, const TaskConfig& task, int64_t context = 0);

// "7 1 8 2 <copy> _ _ ..." for display; the noise token (when given) as ~.
std::string tokens_to_text(const std::vector<int64_t>& tokens, int64_t vocab_size, int64_t noise = -1);

}  // namespace copytask
