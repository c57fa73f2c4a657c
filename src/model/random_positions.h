#pragma once
// Randomized positions (Ruoss et al. 2023; docs/design.md section 2): an example's T positions
// are a sorted random subset of 0..L-1 instead of 0..T-1, so a model trained on short
// inputs has already seen every position a longer one uses. A pure function of a key, like
// the dropout stream: the same positions on every device and for any thread count.
// Shapes: M members, B examples, T positions.
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace copytask {

// T distinct positions of 0..range-1 in increasing order, into out[0..T-1] (range >= T),
// drawn from `key` alone (Floyd's sampling on a SplitMix64 counter stream).
void random_positions_draw(uint64_t key, int64_t T, int64_t range, int64_t* out);

// The positions of a batch: (M, B, T) int64 on the CPU. Member m's example b is drawn from
// the key (member_keys[m], step, first + b) where ranges[m] > 0, and is 0..T-1 where it is
// 0 (a member without randomized positions, batched beside one with them).
torch::Tensor random_positions_batch(const std::vector<uint64_t>& member_keys, const std::vector<int64_t>& ranges,
                                     uint64_t step, int64_t first, int64_t B, int64_t T);

}  // namespace copytask
