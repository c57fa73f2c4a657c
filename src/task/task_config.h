#pragma once
// The data's configuration: the copy task (task.*) and the length-generalization sets
// (eval.*). Here, in the task layer, so that the task builds on its own; config/config.h
// holds them in the whole Config.
#include <cstdint>
#include <string>
#include <vector>

namespace copytask {

struct TaskConfig {
  int64_t vocab_size = 11;  // 0 = padding, 1..vocab_size-2 = content, vocab_size-1 = <copy>
  int64_t context = 10;     // sequence length T, input and output
  int64_t min_len = 1;      // content tokens per example, at least
  int64_t max_len = 8;      // content tokens per example, at most
  int64_t examples = 10000; // examples, train + test (unique under sampling "unique")
  double test_fraction = 0.1;
  int64_t seed = 0;         // the data's seed: same data for every scheme and seed of a study
  // What the output does with the content (task/task_kind.h): copy, reverse, or selective
  // (copy the content from among noise tokens, the share `noise` of the input before <copy>).
  std::string kind = "copy";
  double noise = 0.5;
  // How the output is asked for (task/task_kind.h): `placeholders`, every output at once from
  // padding after <copy>; or `next-token`, the outputs after <copy> in the input, each
  // predicted from the tokens before it (teacher forcing; greedy generation in evaluation).
  std::string format = "placeholders";
  // How the examples are drawn (task/copy_task.h): `unique`, distinct inputs, shuffled and
  // split; or `fresh`, the test split's inputs distinct as before and the train split drawn
  // independently from the task's distribution, repeats allowed, never a test input, so that
  // each minibatch a member meets is a fresh draw (Kazemnejad et al.'s protocol).
  std::string sampling = "unique";
  // Under next-token, the token that ends the copy (task/task_kind.h): `padding` (0, as the
  // padding after it), or `own`, a token of its own (V-2, or V-3 under selective), taken from
  // the content's ids.
  std::string end_token = "padding";
  // Under next-token, which positions the loss reads and, under coupled position IDs, which
  // place each token takes (task/task_kind.h): `copytask`, every position in the loss and the
  // position that predicts output j at source j's place; or `cho` (Cho et al. 2024), only the
  // outputs and the end in the loss, each output token at its source's place, the end token
  // and the padding at ID 0.
  std::string convention = "copytask";
};

// Length generalization (docs/design.md section 1): after training, and at every evaluation,
// each member is also evaluated at every content length min_len..max_len, on examples
// drawn per length from its own seed, each length in a context long enough for the whole
// copy. Off when max_len is 0.
// The longest content length eval.max_len may ask for: a context of 513, whose score-bias
// tables and attention stay small.
constexpr int64_t kEvalMaxLenLimit = 256;

struct EvalConfig {
  int64_t max_len = 0;       // the longest content length evaluated; 0 = off, else >= task.max_len
  int64_t per_length = 200;  // examples per length (all the inputs there are, where fewer exist)
  int64_t seed = 1;          // the evaluation examples' seed, the same for every member
  // Whose inputs the lengths are: "shared" (one set per length from eval.seed, every member
  // on it) or "per-seed" (one set per training seed, from eval.seed and that seed: the arms
  // of one seed still compare on the same inputs, and the spread over seeds also covers
  // the draw of the inputs).
  std::string inputs = "shared";
  // Where offset and coupled position IDs start at the evaluated lengths: "zero" (every
  // example at 0), or "drawn" (each example's start drawn as in training, uniform in 0..L-T).
  std::string position_start = "zero";
  // Read by the evaluation, not by the data: RoPE's rescalings (pi, ntk, yarn), each
  // evaluated beside the plain numbers for the members that rotate q and k, with factor
  // rope_factor (0 = per length: the evaluated context over the trained one).
  std::vector<std::string> rope_rescaling;
  double rope_factor = 0;
};

}  // namespace copytask
