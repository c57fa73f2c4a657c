#pragma once
// The length-generalization sets (docs/design.md section 1): for every content length k from
// task.min_len to eval.max_len, examples of exactly that length in a context long enough
// for the whole copy, T_k = max(task.context, 2k + 1). So a trained length keeps the
// training context (its inputs look like the test split's), and a longer one is copied
// whole, with no cut. Pure C++ (no tensors), like copy_task.h.
#include <cstdint>
#include <optional>
#include <vector>

#include "task/task_config.h"
#include "task/copy_task.h"

namespace copytask {

struct LengthSet {
  int64_t length = 0;   // k content tokens
  int64_t context = 0;  // T_k
  bool trained = false; // k <= task.max_len: a length the training split holds
  CopySplit examples;   // count x T_k inputs and targets
};

// The context a length is evaluated in: max(task.context, the whole example's), where the
// whole example is 2k + 1 tokens for copy and reverse (task/task_kind.h).
int64_t length_context(const TaskConfig& task, int64_t length);

// One set per length task.min_len..eval.max_len, drawn from eval.seed (each length from
// its own stream, so a longer eval.max_len keeps the shorter lengths' examples): up to
// eval.per_length distinct inputs, uniform over the inputs of that length that are not in
// the training split (a trained length is tested on inputs never trained on); all of them,
// in a shuffled order, where fewer exist. Empty when eval.max_len is 0.
// member_seed: none = the sets every member shares (eval.inputs = shared); a seed = that
// seed's own sets (eval.inputs = per-seed), each length's stream keyed by eval.seed and it.
// Where a length has fewer inputs than eval.per_length, every seed gets all of them (in
// its own order), so each length's count is the same for every seed.
std::vector<LengthSet> length_sets_generate(const TaskConfig& task, const EvalConfig& eval, const CopySplit& train,
                                            std::optional<int64_t> member_seed = std::nullopt);

// Each seed's own sets (eval.inputs = per-seed), in the seeds' order: what
// length_sets_generate gives for each, the training split read once.
std::vector<std::vector<LengthSet>> length_sets_generate_per_seed(const TaskConfig& task, const EvalConfig& eval,
                                                                  const CopySplit& train,
                                                                  const std::vector<int64_t>& seeds);

}  // namespace copytask
