#pragma once
// Position IDs (model.position_ids; docs/design.md section 2): the position each token
// carries, per member and example, which every hook that reads positions reads instead of
// 0..T-1. A pure function of a key, like the dropout stream: the same IDs on every device
// and for any thread count.
//   sequential  0..T-1 (no tensor at all: the hooks read rows 0..T-1)
//   random      a sorted random subset of 0..L-1, in training and in evaluation (Ruoss et al. 2023)
//   offset      s..s+T-1, s uniform in 0..L-T per example in training; in evaluation 0..T-1,
//               or s drawn per example under eval.position_start = drawn (McLeish et al. 2024)
//   coupled     s + the token's coupled place (task/task_kind.h, coupled_places: an output takes
//               its source's place; coupled_id: under task.convention = cho the end token and
//               the padding at 0), s as under offset, in training and in evaluation (Cho et al. 2024)
// Shapes: M members, B examples, T positions.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "task/task_config.h"

namespace copytask {

enum class PositionIdKind { sequential, random, offset, coupled };
// model.position_ids as an enum; throws std::invalid_argument for an unknown name.
PositionIdKind position_id_kind(const std::string& name);

// One member's position IDs: its kind, L, and the key of its stream.
struct MemberPositionIds {
  PositionIdKind kind = PositionIdKind::sequential;
  int64_t range = 0;  // L (0 under sequential)
  uint64_t key = 0;
};

// T distinct positions of 0..range-1 in increasing order, into out[0..T-1] (range >= T),
// drawn from `key` alone (Floyd's sampling on a SplitMix64 counter stream).
void random_positions_draw(uint64_t key, int64_t T, int64_t range, int64_t* out);

// A training step's IDs of examples first..first+B-1 of each member: (M, B, T) int64 on the
// CPU. inputs (M, B, T) int64 on the CPU: the examples' tokens (coupled IDs read them; a
// full batch's view with stride 0 over the members is read once). Member m's example b is
// drawn from the key (members[m].key, step, first + b).
torch::Tensor position_ids_training(const std::vector<MemberPositionIds>& members, uint64_t step, int64_t first,
                                    const torch::Tensor& inputs, const TaskConfig& task);

// Where offset and coupled IDs start in evaluation (eval.position_start): at 0, or at a
// start drawn per example as in training, uniform in 0..L-T.
enum class EvaluationStart { zero, drawn };
EvaluationStart evaluation_start(const std::string& name);  // "zero" | "drawn"

// The IDs of evaluation examples first..first+N-1, inputs (M, N, T): the same at every
// evaluation and for every member of the same kind and L (random draws and drawn starts
// from one key for every member, the context keying the draw, so each length has its own).
torch::Tensor position_ids_evaluation(const std::vector<MemberPositionIds>& members, int64_t first,
                                      const torch::Tensor& inputs, const TaskConfig& task,
                                      EvaluationStart start = EvaluationStart::zero);

}  // namespace copytask
