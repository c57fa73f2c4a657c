#pragma once
// The task kinds (task.kind) and the layout rules each one sets: which tokens are content,
// where the output starts, what each output copies, and how long a context an example of
// k content tokens needs. Pure C++ (no tensors), like copy_task.h.
//
//   copy      input : c1 .. ck <copy> _ ..         target: c1 .. ck <copy> c1 .. ck _
//   reverse   input : c1 .. ck <copy> _ ..         target: c1 .. ck <copy> ck .. c1 _
//   selective input : c1 ~ c2 ~ ~ .. ck <copy> _   target: (the input) <copy> c1 .. ck _
//
// The target repeats the input up to <copy> (the model echoes each input token), then the
// output: output j (0-based) sits at position p + 1 + j, where p is the position of <copy>,
// and copies the input position source(j):
//   copy      source(j) = j              distance (p + 1 + j) - j = k + 1, grows with k
//   reverse   source(j) = k - 1 - j      distance 2j + 2, the same at every k
//   selective source(j) = the position of the j-th content token, counted past the noise
// The formats (task.format): above, `placeholders`. Under `next-token` the input is the
// whole sequence and the model predicts each next token from those before it (causal):
//   copy      input : c1 .. ck <copy> c1 .. ck _ ..     target: c1 .. ck c1 .. ck _ _
// the prefix echoed as above, then from <copy> on the next token: <copy> predicts output 0
// (output j is predicted at p + j), the last output predicts the end: padding (0), or under
// task.end_token = own a token of its own, E, which the input then holds after the outputs
// (c1 .. ck <copy> c1 .. ck E _ ..), and which predicts padding.
// task.convention = cho (Cho et al. 2024; next-token with an end token of its own) keeps
// the sequence and changes what is read of it: only the positions from <copy> to the last
// output (those that predict an output or the end) are in the loss; the prefix's echo and
// every position from the end token on have the target kOutOfLoss (task/tokens.h):
//   copy      input : c1 .. ck <copy> c1 .. ck E _ ..   target: - .. - c1 .. ck E - - ..
// Selective inputs hold m = round(k * noise / (1 - noise)) noise tokens `~` at uniformly
// drawn places among the p = k + m positions before <copy>, so that about the share `noise`
// of them is noise. Token ids: 0 = padding, V-1 = <copy>; content 1..V-2, except under
// selective, where V-2 is the noise token and the content is 1..V-3; under end_token = own
// the end token is the highest id below those, and the content one id fewer.
#include <cstdint>
#include <string>
#include <vector>

#include "task/task_config.h"

namespace copytask {

enum class TaskKind { copy, reverse, selective };

// The names task.kind accepts, in the order the docs list them.
const std::vector<std::string>& task_kind_names();
// task.kind as an enum; throws std::invalid_argument for an unknown name.
TaskKind task_kind(const TaskConfig& task);

// The copy's full input (T tokens: the content, <copy>, padding) and target for given
// content tokens; the other kinds build theirs on them (example_input, example_target).
std::vector<int64_t> copy_input(const std::vector<int64_t>& content, int64_t vocab_size, int64_t context);
std::vector<int64_t> copy_target(const std::vector<int64_t>& content, int64_t vocab_size, int64_t context);
// How many distinct inputs of k content tokens exist, (content_vocab)^k, saturated at INT64_MAX.
int64_t copy_inputs_of_length(int64_t content_vocab, int64_t k);
// How many content token ids there are: V - 2, or V - 3 under selective; one fewer under
// end_token = own.
int64_t content_vocab(const TaskConfig& task);
// The noise token's id (V - 2) under selective; -1 (no token) otherwise.
int64_t noise_token(const TaskConfig& task);
// The token that ends a next-token copy: 0 (padding), or under end_token = own its own id,
// V - 2 (V - 3 under selective).
int64_t end_token(const TaskConfig& task);
// Noise tokens in an input of k content tokens: round(k * noise / (1 - noise)) under
// selective, else 0.
int64_t noise_count(const TaskConfig& task, int64_t k);
// Tokens before <copy> (content and noise): k + noise_count(k). <copy> sits there.
int64_t prefix_length(const TaskConfig& task, int64_t k);
// Whether the task asks for its outputs one next token at a time (task.format = next-token).
bool next_token(const TaskConfig& task);
// The context that holds the whole example: the prefix, <copy> and the k outputs (and the
// end token under next-token).
int64_t whole_example_context(const TaskConfig& task, int64_t k);
// How many distinct inputs of k content tokens exist: content_vocab^k times the ways to
// place the noise, C(k + m, m); saturated at INT64_MAX.
int64_t inputs_of_length(const TaskConfig& task, int64_t k);

// One example: its content tokens and, under selective, the positions of the noise
// tokens within the prefix (ascending; empty otherwise).
struct Example {
  std::vector<int64_t> content;
  std::vector<int64_t> noise_at;
};

// The tokens before <copy>: the content with the noise tokens at their places.
std::vector<int64_t> example_prefix(const TaskConfig& task, const Example& example);
// The full input and target in a context of T tokens (the target cut at T).
std::vector<int64_t> example_input(const TaskConfig& task, const Example& example, int64_t context);
std::vector<int64_t> example_target(const TaskConfig& task, const Example& example, int64_t context);

// Under selective, the noise of an example of k content tokens spread evenly over its
// prefix (noise_count(k) of them): what a probe written as content alone gets.
std::vector<int64_t> even_noise_places(const TaskConfig& task, int64_t k);

// What the outputs of one input row copy: the position of <copy> (`copy_at`, -1 where the
// row has none), and for each output j = 0..k-1 the input position it copies (`sources`)
// and its content index (`content_index`: j, or k - 1 - j under reverse). Read from the row
// itself, so it holds for any placement of the noise.
struct OutputSources {
  int64_t copy_at = -1;
  std::vector<int64_t> sources;
  std::vector<int64_t> content_index;
  std::vector<int64_t> content_at;  // the content tokens' positions, in order
  // Where output j is predicted: position first_output + j (copy_at + 1 under placeholders,
  // copy_at under next-token, where <copy> predicts output 0).
  int64_t first_output = -1;
  int64_t length() const { return static_cast<int64_t>(sources.size()); }
  int64_t output_begin() const { return first_output; }
};
OutputSources output_sources(const TaskConfig& task, const int64_t* input_row, int64_t context);

// Whether the task follows Cho et al.'s convention (task.convention = cho).
bool cho_convention(const TaskConfig& task);

// Position coupling (Cho et al. 2024; model.position_ids = coupled): the place each token of
// an input row takes, into places[0..context-1]. Read from the row (output_sources), so
// every task kind states its coupling by stating its sources. Two conventions:
//   copytask  the position that predicts output j (<copy> for j = 0, output j - 1 after it)
//             takes source j's place, sources[j]; every other token (content, noise, the
//             last output, which predicts the end, the padding) keeps its own place t.
//   cho       each output token takes its source's place; the prefix's tokens their own
//             places counted from 2 (t + 2); <copy> the place one step before output 0's
//             source along the outputs' walk (its place less one under copy and selective,
//             plus one under reverse), so the last output predicts the end at its own
//             source's place; the end token and the padding place 0.
//   copy, k = 3   c1 c2 c3 <copy> c1 c2 c3 E  _
//     copytask     0  1  2   0    1  2  6  7  8
//     cho          2  3  4   1    2  3  4  0  0
// The ID of a token is its place plus the example's start (coupled_id).
void coupled_places(const TaskConfig& task, const int64_t* input_row, int64_t context, int64_t* places);
// The ID of a coupled place at an example's start s: s + place, except under cho, where
// place 0 (the end token and the padding) is ID 0 at every start.
int64_t coupled_id(const TaskConfig& task, int64_t place, int64_t start);

// The index-th combination of m places out of n in lexicographic order (ascending places).
std::vector<int64_t> nth_combination(int64_t index, int64_t n, int64_t m);
// C(n, m), saturated at INT64_MAX.
int64_t choose(int64_t n, int64_t m);

}  // namespace copytask
