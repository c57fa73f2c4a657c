#include "model/random_positions.h"

#include <algorithm>

#include <torch/torch.h>

#include "model/dropout_stream.h"

namespace copytask {
namespace {
// 128-bit unsigned integers, a GCC and Clang extension (__extension__ says so to -Wpedantic):
// the high half of a 64 x 64-bit product below.
__extension__ typedef unsigned __int128 Uint128;
}  // namespace

void random_positions_draw(uint64_t key, int64_t T, int64_t range, int64_t* out) {
  // Floyd: for j = range-T .. range-1 take a uniform t in 0..j, or j itself when t is
  // already taken; every T-subset is equally likely. T is small (a context), so the
  // membership test is a scan of what is taken so far.
  int64_t taken = 0;
  uint64_t counter = 0;
  for (int64_t j = range - T; j < range; ++j) {
    const uint64_t bits = splitmix64_mix(key + (++counter) * kSplitMixGamma);
    // Uniform in 0..j by the high half of a 64 x 64-bit product (bias below 2^-50 for j < 2^14).
    const auto t = static_cast<int64_t>((static_cast<Uint128>(bits) * static_cast<uint64_t>(j + 1)) >> 64);
    const bool seen = std::find(out, out + taken, t) != out + taken;
    out[taken++] = seen ? j : t;
  }
  std::sort(out, out + T);
}

torch::Tensor random_positions_batch(const std::vector<uint64_t>& member_keys, const std::vector<int64_t>& ranges,
                                     uint64_t step, int64_t first, int64_t B, int64_t T) {
  const int64_t M = static_cast<int64_t>(member_keys.size());
  auto positions = torch::empty({M, B, T}, torch::kLong);  // (M, B, T)
  int64_t* data = positions.data_ptr<int64_t>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < B; ++b) {
      int64_t* row = data + (m * B + b) * T;
      if (ranges[m] <= 0) {
        for (int64_t t = 0; t < T; ++t) row[t] = t;
        continue;
      }
      // One key per (member, step, example): the member's key mixed with the step and the example's index.
      const uint64_t key = splitmix64_mix(member_keys[m] ^ splitmix64_mix(step * kSplitMixGamma + static_cast<uint64_t>(first + b)));
      random_positions_draw(key, T, ranges[m], row);
    }
  return positions;
}

}  // namespace copytask
