// The rotation hook's form across the examples' lanes (CpuHook::query_key_forward_lanes and
// query_key_backward_lanes, which the fused CPU step calls for a group of 16 in lanes) gives
// each example the bits of its own call, forward and backward, on each compiled variant: q
// and k turned, the gradient turned back, and the angles' gradient summed in the examples'
// order, whether the examples share the member's table and its gradient (positions 0..T-1) or
// each reads and writes its own rows (position IDs); full and partial groups, one head and
// two.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu_variants.h"
#include "model/cpu_attention_lanes.h"
#include "model/hooks/registry.h"

namespace copytask {
namespace {

class RotationLanes : public test::CpuVariantTest {};

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// count examples' arrays of n floats, one after another, into the lanes layout (element i of
// example e at [16 i + e], zeros past count) and back.
std::vector<float> into_lanes(const std::vector<float>& rows, int64_t n, int64_t count) {
  std::vector<float> lanes(static_cast<size_t>(n * cpu::kExampleLanes), 0.0f);
  for (int64_t e = 0; e < count; ++e)
    for (int64_t i = 0; i < n; ++i) lanes[i * cpu::kExampleLanes + e] = rows[e * n + i];
  return lanes;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The first count examples' lanes against their rows, bit for bit (the lanes past them are
// never read back).
bool lanes_hold_rows(const std::vector<float>& lanes, const std::vector<float>& rows, int64_t n, int64_t count) {
  for (int64_t e = 0; e < count; ++e)
    for (int64_t i = 0; i < n; ++i)
      if (std::memcmp(&lanes[i * cpu::kExampleLanes + e], &rows[e * n + i], sizeof(float)) != 0) return false;
  return true;
}

TEST_P(RotationLanes, EachLaneGetsItsExamplesOwnBits) {
  std::mt19937 rng(5);
  const int64_t T = 10, P = 40;
  for (const int64_t H : {1, 2})
    for (const bool gathers : {false, true})
      for (const int64_t count : {16, 5}) {
        const cpu::Shape s{count, T, 20, H, 20 / H, 32, 11, 2};
        const int64_t R = s.Dh / 2, n = T * 3 * s.D;  // n: one example's q | k | v floats
        const std::string at = std::to_string(H) + " heads, " + (gathers ? "position IDs" : "positions 0..T-1") +
                               ", " + std::to_string(count) + " examples";
        const auto angles = random_floats(rng, P * R, 2.0f);  // (P, Dh/2)
        CpuHookMaking making;
        making.table = angles.data();
        making.positions = P;
        making.shape = &s;
        making.wants_grad = true;
        making.gathers = gathers;
        const auto hook = rotation_hook().cpu(making);
        ASSERT_TRUE(hook->query_key_in_lanes());
        const int64_t work_floats = hook->workspace_floats();
        std::vector<int64_t> positions(static_cast<size_t>(count * T));
        std::uniform_int_distribution<int64_t> position(0, P - 1);
        for (auto& p : positions) p = position(rng);

        const auto qkv = random_floats(rng, count * n, 1.0f), grad_qkv = random_floats(rng, count * n, 1.0f);
        const auto grad_start = random_floats(rng, P * R, 0.1f);  // the member's table gradient so far
        // Rows: example by example, as the step in rows calls the hook.
        auto qkv_rows = qkv, grad_rows = grad_qkv, table_grad_rows = grad_start;
        std::vector<float> work_rows(static_cast<size_t>(count * work_floats + 1));
        for (int64_t e = 0; e < count; ++e) {
          cpu::HookExample example{gathers ? positions.data() + e * T : nullptr, false,
                                   work_rows.data() + e * work_floats, table_grad_rows.data()};
          hook->example_begin(example);
          hook->query_key_forward(example, 1, qkv_rows.data() + e * n);
          hook->query_key_backward(example, 1, grad_rows.data() + e * n, qkv_rows.data() + e * n);
          hook->example_end(example);
        }
        // Lanes: the group at once.
        auto qkv_lanes = into_lanes(qkv, n, count), grad_lanes = into_lanes(grad_qkv, n, count);
        auto table_grad_lanes = grad_start;
        std::vector<float> work_lanes(static_cast<size_t>(count * work_floats + 1));
        std::vector<cpu::HookExample> examples(static_cast<size_t>(count));
        std::vector<const cpu::HookExample*> views;
        for (int64_t e = 0; e < count; ++e) {
          examples[e] = {gathers ? positions.data() + e * T : nullptr, false, work_lanes.data() + e * work_floats,
                         table_grad_lanes.data()};
          hook->example_begin(examples[e]);
          views.push_back(&examples[e]);
        }
        const cpu::HookLanes group{views.data(), count};
        hook->query_key_forward_lanes(group, 1, qkv_lanes.data());
        hook->query_key_backward_lanes(group, 1, grad_lanes.data(), qkv_lanes.data());
        for (const auto& example : examples) hook->example_end(example);

        EXPECT_FALSE(same_bits(qkv_rows, qkv)) << at << ": the rows' call turned nothing";
        EXPECT_FALSE(same_bits(table_grad_rows, grad_start)) << at << ": no angle got a gradient";
        EXPECT_TRUE(lanes_hold_rows(qkv_lanes, qkv_rows, n, count)) << at << ": q | k | v turned";
        EXPECT_TRUE(lanes_hold_rows(grad_lanes, grad_rows, n, count)) << at << ": the gradient at q | k | v";
        EXPECT_TRUE(same_bits(table_grad_lanes, table_grad_rows)) << at << ": the angles' gradient";
      }
}

INSTANTIATE_CPU_VARIANTS(RotationLanes);

}  // namespace
}  // namespace copytask
