#include "model/position_ids.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

#include "model/dropout_stream.h"
#include "task/task_kind.h"

namespace copytask {
namespace {
// 128-bit unsigned integers, a GCC and Clang extension (__extension__ says so to -Wpedantic):
// the high half of a 64 x 64-bit product below.
__extension__ typedef unsigned __int128 Uint128;

// Uniform in 0..n-1 from 64 random bits, by the high half of a 64 x 64-bit product (bias
// below 2^-50 for n < 2^14).
int64_t uniform_below(uint64_t bits, int64_t n) {
  return static_cast<int64_t>((static_cast<Uint128>(bits) * static_cast<uint64_t>(n)) >> 64);
}

// One key per (member, step, example): the member's key mixed with the step and the example's index.
uint64_t example_key(uint64_t member_key, uint64_t step, int64_t example) {
  return splitmix64_mix(member_key ^ splitmix64_mix(step * kSplitMixGamma + static_cast<uint64_t>(example)));
}

// The start s of an example's IDs under offset and coupled: uniform in 0..L-T.
int64_t offset_draw(uint64_t key, int64_t T, int64_t range) {
  return uniform_below(splitmix64_mix(key + kSplitMixGamma), range - T + 1);
}

// Each example's coupled places (M, B, T) int64, for the members that couple. A view whose
// members share their examples (stride 0: a full batch) is read once.
class CoupledPlaces {
 public:
  CoupledPlaces(const std::vector<MemberPositionIds>& members, const torch::Tensor& inputs, const TaskConfig& task) {
    const bool any = std::any_of(members.begin(), members.end(),
                                 [](const MemberPositionIds& m) { return m.kind == PositionIdKind::coupled; });
    if (!any) return;
    TORCH_CHECK(inputs.defined() && inputs.dim() == 3 && inputs.scalar_type() == torch::kLong && !inputs.is_cuda(),
                "coupled position IDs: the inputs must be (M, B, T) int64 on the CPU");
    shared_ = inputs.stride(0) == 0;
    const torch::Tensor rows = shared_ ? inputs[0].contiguous() : inputs.contiguous();  // (B, T) | (M, B, T)
    places_ = torch::empty(rows.sizes(), torch::kLong);
    const int64_t T = inputs.size(2), count = rows.numel() / T;
    const int64_t* tokens = rows.data_ptr<int64_t>();
    int64_t* out = places_.data_ptr<int64_t>();
    for (int64_t r = 0; r < count; ++r) coupled_places(task, tokens + r * T, T, out + r * T);
  }
  // Member m's example b: T places.
  const int64_t* of(int64_t m, int64_t b, int64_t B, int64_t T) const {
    return places_.data_ptr<int64_t>() + ((shared_ ? 0 : m * B) + b) * T;
  }

 private:
  bool shared_ = false;
  torch::Tensor places_;
};

// The IDs of a batch: every member's rows by its kind. `drawn_start` draws the starts of
// offset and coupled from `start_key(m, b)` (training, and evaluation at drawn starts; 0
// where L <= T, as for an evaluated context as long as L), else they start at 0;
// `random_key(m, b)` is the key of a random member's example.
template <typename RandomKey, typename StartKey>
torch::Tensor position_ids_batch(const std::vector<MemberPositionIds>& members, const torch::Tensor& inputs,
                                 const TaskConfig& task, bool drawn_start, RandomKey random_key, StartKey start_key) {
  const int64_t M = static_cast<int64_t>(members.size()), B = inputs.size(1), T = inputs.size(2);
  TORCH_CHECK(inputs.size(0) == M, "position IDs: inputs for ", inputs.size(0), " members, ", M, " given");
  const CoupledPlaces coupled(members, inputs, task);
  auto ids = torch::empty({M, B, T}, torch::kLong);  // (M, B, T)
  int64_t* data = ids.data_ptr<int64_t>();
  for (int64_t m = 0; m < M; ++m) {
    const MemberPositionIds& member = members[static_cast<size_t>(m)];
    for (int64_t b = 0; b < B; ++b) {
      int64_t* row = data + (m * B + b) * T;
      switch (member.kind) {
        case PositionIdKind::sequential:
          for (int64_t t = 0; t < T; ++t) row[t] = t;
          break;
        case PositionIdKind::random:
          random_positions_draw(random_key(m, b), T, member.range, row);
          break;
        case PositionIdKind::offset: {
          const int64_t s = drawn_start && member.range > T ? offset_draw(start_key(m, b), T, member.range) : 0;
          for (int64_t t = 0; t < T; ++t) row[t] = s + t;
          break;
        }
        case PositionIdKind::coupled: {
          const int64_t s = drawn_start && member.range > T ? offset_draw(start_key(m, b), T, member.range) : 0;
          const int64_t* places = coupled.of(m, b, B, T);
          for (int64_t t = 0; t < T; ++t) row[t] = coupled_id(task, places[t], s);
          break;
        }
      }
    }
  }
  return ids;
}

}  // namespace

PositionIdKind position_id_kind(const std::string& name) {
  if (name == "sequential") return PositionIdKind::sequential;
  if (name == "random") return PositionIdKind::random;
  if (name == "offset") return PositionIdKind::offset;
  if (name == "coupled") return PositionIdKind::coupled;
  throw std::invalid_argument("unknown model.position_ids \"" + name + "\": must be sequential, random, offset or coupled");
}

void random_positions_draw(uint64_t key, int64_t T, int64_t range, int64_t* out) {
  // Floyd: for j = range-T .. range-1 take a uniform t in 0..j, or j itself when t is
  // already taken; every T-subset is equally likely. T is small (a context), so the
  // membership test is a scan of what is taken so far.
  int64_t taken = 0;
  uint64_t counter = 0;
  for (int64_t j = range - T; j < range; ++j) {
    const int64_t t = uniform_below(splitmix64_mix(key + (++counter) * kSplitMixGamma), j + 1);
    const bool seen = std::find(out, out + taken, t) != out + taken;
    out[taken++] = seen ? j : t;
  }
  std::sort(out, out + T);
}

torch::Tensor position_ids_training(const std::vector<MemberPositionIds>& members, uint64_t step, int64_t first,
                                    const torch::Tensor& inputs, const TaskConfig& task) {
  auto key = [&](int64_t m, int64_t b) { return example_key(members[static_cast<size_t>(m)].key, step, first + b); };
  return position_ids_batch(members, inputs, task, /*drawn_start=*/true, key, key);
}

EvaluationStart evaluation_start(const std::string& name) {
  if (name == "zero") return EvaluationStart::zero;
  if (name == "drawn") return EvaluationStart::drawn;
  throw std::invalid_argument("unknown eval.position_start \"" + name + "\": must be zero or drawn");
}

torch::Tensor position_ids_evaluation(const std::vector<MemberPositionIds>& members, int64_t first,
                                      const torch::Tensor& inputs, const TaskConfig& task, EvaluationStart start) {
  // One key for every member: evaluation examples sit at the same positions whatever the
  // member (for the same L); the context keys the draw, so each length has its own.
  const uint64_t T = static_cast<uint64_t>(inputs.size(2));
  auto random_key = [&](int64_t, int64_t b) { return example_key(0x6576616C706F73ULL, T, first + b); };  // "evalpos"
  auto start_key = [&](int64_t, int64_t b) { return example_key(0x6576616C7374ULL, T, first + b); };     // "evalst"
  return position_ids_batch(members, inputs, task, start == EvaluationStart::drawn, random_key, start_key);
}

}  // namespace copytask
