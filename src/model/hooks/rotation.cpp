// The rotation hook: q and k of every head turned pair by pair by the angle of their
// position,
//   (x_2i, x_2i+1) at position p  ->  (x_2i c - x_2i+1 s, x_2i s + x_2i+1 c),
//   c = cos(angle[p, i]), s = sin(angle[p, i])                      table (P, Dh/2)
// (rope, xpos). A member without it has zero angles, which turn nothing. positional.json
// shows the relative kernel: q_m . k_n of equal contents as a function of m - n.
// Shapes: M members, B batch, H heads, T positions, P table positions, Dh head dimension.
#include <torch/torch.h>

#include "model/cpu_attention_lanes.h"
#include "model/hooks/cpu_hook.h"
#include "model/hooks/position_rows.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/positional_analysis.h"

namespace copytask {
namespace cpu {
namespace {

// One pair (a, b) turned by the angle of cos c and sin s, for a float or a vector of lanes.
// This file is compiled with -ffp-contract=off (CMakeLists.txt): each product rounded before
// the sum, as LibTorch's model turns them (x cos - y sin), so that the rows, the lanes and
// every variant give the same bits. Left to the compiler, the rows' loop had fused some
// products into multiply-adds and not others (its vector body, not its tail), which no other
// form could match.
template <class V>
COPYTASK_INLINE void turn_pair(V& a, V& b, V c, V s) {
  const V turned_a = a * c - b * s;
  b = a * s + b * c;
  a = turned_a;
}

// The angle's gradient term of one pair: -g_2i r_2i+1 + g_2i+1 r_2i.
COPYTASK_INLINE float angle_gradient_term(float g0, float g1, float r0, float r1) { return -g0 * r1 + g1 * r0; }

// Turns the pairs (2i, 2i+1) of every head of x (T rows of row_stride floats, the first D
// used) by the angle whose cos and sin are at [t * Dh/2 + i].
void rotation_forward(float* x, int64_t row_stride, const float* cos_table, const float* sin_table,
                      int64_t T, int64_t H, int64_t Dh) {
  on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
    const int64_t pairs = Dh / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        float* x_h = x + t * row_stride + h * Dh;
        for (int64_t i = 0; i < pairs; ++i)
          turn_pair(x_h[2 * i], x_h[2 * i + 1], cos_table[t * pairs + i], sin_table[t * pairs + i]);
      }
  });
}

// grad (the gradient at the turned values, laid out as x) turned back into the gradient
// at the values before the turn. When grad_angles (T, Dh/2) is given, it accumulates the
// angles' gradient, sum over heads of -g_2i r_2i+1 + g_2i+1 r_2i, from the turned values r.
void rotation_backward(float* grad, const float* rotated, int64_t row_stride, const float* cos_table,
                       const float* sin_table, float* grad_angles, int64_t T, int64_t H, int64_t Dh) {
  on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
    const int64_t pairs = Dh / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        float* g_h = grad + t * row_stride + h * Dh;
        const float* r_h = rotated + t * row_stride + h * Dh;
        for (int64_t i = 0; i < pairs; ++i) {
          if (grad_angles)
            grad_angles[t * pairs + i] += angle_gradient_term(g_h[2 * i], g_h[2 * i + 1], r_h[2 * i], r_h[2 * i + 1]);
          turn_pair(g_h[2 * i], g_h[2 * i + 1], cos_table[t * pairs + i], -sin_table[t * pairs + i]);  // back: -angle
        }
      }
  });
}

// The angle's cos and sin at (t, i) of the lanes lane .. lane + W - 1 of a group: the
// shared table's, or each example's rows (its position IDs); cos 1 and sin 0 past the group.
struct AngleLanes {
  const float *cos_table, *sin_table;  // the shared (T, Dh/2) rows, or null: the examples' own
  const HookLanes& group;
  int64_t cos_at, sin_at;              // where an example's rows start in its workspace
  template <class Vec>
  COPYTASK_INLINE void at(int64_t t_i, int64_t lane, Vec& c, Vec& s) const {
    if (cos_table) {
      c = Vec{} + cos_table[t_i];
      s = Vec{} + sin_table[t_i];
      return;
    }
    for (int e = 0; e < static_cast<int>(sizeof(Vec) / sizeof(float)); ++e) {
      const bool in_group = lane + e < group.n;
      c[e] = in_group ? group.example[lane + e]->work[cos_at + t_i] : 1.0f;
      s[e] = in_group ? group.example[lane + e]->work[sin_at + t_i] : 0.0f;
    }
  }
};

// Turns q and k of a group's q | k | v (or of their gradient) in lanes (T, 3D) by the
// angles, or by minus them (back): each lane the operations of its example's rows, so the
// same bits. The forward's rotation and the backward's second half.
void rotation_turn_lanes(float* qkv_l, const AngleLanes& angles, int64_t T, int64_t H, int64_t Dh, bool back) {
  on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY {
    using Vec = LanesChunk<decltype(lanes)>;
    constexpr int W = sizeof(Vec) / sizeof(float);
    const int64_t pairs = Dh / 2, D = H * Dh;
    for (int64_t lane = 0; lane < kExampleLanes; lane += W)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < pairs; ++i) {
          Vec c, s;
          angles.at(t * pairs + i, lane, c, s);
          if (back) s = -s;
          for (int64_t h = 0; h < H; ++h)
            for (int64_t part : {int64_t{0}, D}) {  // q, k
              float* x = qkv_l + kExampleLanes * (t * 3 * D + part + h * Dh + 2 * i) + lane;
              Vec a = load_vec<Vec>(x), b = load_vec<Vec>(x + kExampleLanes);
              turn_pair(a, b, c, s);
              store_vec(x, a);
              store_vec(x + kExampleLanes, b);
            }
        }
  });
}

// rotation_backward of a group's gradient at q and k in lanes (T, 3D), given the turned
// q | k | v in lanes. The angles' gradient (grad_angles_of(g), or none where it returns null)
// is taken first, example by example in rotation_backward's order (q's terms, then k's, by
// position, head and pair), which the examples sharing the member's table gradient need.
template <class GradAngles>
void rotation_backward_lanes(float* grad_l, const float* rotated_l, const AngleLanes& angles,
                             const GradAngles& grad_angles_of, int64_t n, int64_t T, int64_t H, int64_t Dh) {
  const int64_t pairs = Dh / 2, D = H * Dh;
  for (int64_t g = 0; g < n; ++g) {
    float* grad_angles = grad_angles_of(g);
    if (!grad_angles) continue;
    auto at = [&](const float* lanes, int64_t column, int64_t t) { return lanes[kExampleLanes * (t * 3 * D + column) + g]; };
    for (int64_t part : {int64_t{0}, D})
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < pairs; ++i) {
            const int64_t column = part + h * Dh + 2 * i;
            grad_angles[t * pairs + i] += angle_gradient_term(at(grad_l, column, t), at(grad_l, column + 1, t),
                                                              at(rotated_l, column, t), at(rotated_l, column + 1, t));
          }
  }
  rotation_turn_lanes(grad_l, angles, T, H, Dh, /*back=*/true);
}

// One member's rotation on the fused CPU step: the cos and sin of its angles, made once per
// step; under position IDs (model.position_ids) each example's rows of them, and its angles' gradient.
class CpuRotation : public CpuHook {
 public:
  explicit CpuRotation(const CpuHookMaking& making)
      : s_(*making.shape), R_(making.shape->Dh / 2), P_(making.positions), gathers_(making.gathers),
        wants_grad_(making.wants_grad) {
    // In LibTorch's float32 cos and sin, as the LibTorch model turns q and k.
    auto angles = torch::from_blob(const_cast<float*>(making.table), {P_, R_}, torch::kFloat32);  // (P, Dh/2)
    auto cos = angles.cos().contiguous(), sin = angles.sin().contiguous();
    cos_.assign(cos.data_ptr<float>(), cos.data_ptr<float>() + cos.numel());
    sin_.assign(sin.data_ptr<float>(), sin.data_ptr<float>() + sin.numel());
  }
  // Under position IDs other than 0..T-1: the example's cos (T, Dh/2), sin (T, Dh/2), angles' gradient (T, Dh/2).
  int64_t workspace_floats() const override { return gathers_ ? 3 * s_.T * R_ : 0; }
  int64_t grad_floats() const override { return wants_grad_ ? P_ * R_ : 0; }

  void example_begin(const HookExample& e) const override {
    if (!e.positions) return;
    position_rows_gather(cos_.data(), e.positions, e.work, s_.T, R_);
    position_rows_gather(sin_.data(), e.positions, e.work + s_.T * R_, s_.T, R_);
    if (e.grad) std::fill(e.work + 2 * s_.T * R_, e.work + 3 * s_.T * R_, 0.0f);
  }
  void example_end(const HookExample& e) const override {
    if (e.positions && e.grad) position_rows_scatter(e.work + 2 * s_.T * R_, e.positions, e.grad, s_.T, R_);
  }
  void query_key_forward(const HookExample& e, int64_t, float* qkv) const override {
    const float *cos = cos_of(e), *sin = sin_of(e);
    rotation_forward(qkv, 3 * s_.D, cos, sin, s_.T, s_.H, s_.Dh);          // q
    rotation_forward(qkv + s_.D, 3 * s_.D, cos, sin, s_.T, s_.H, s_.Dh);   // k
  }
  void query_key_backward(const HookExample& e, int64_t, float* grad_qkv, const float* qkv) const override {
    const float *cos = cos_of(e), *sin = sin_of(e);
    float* grad_angles = !e.grad ? nullptr : e.positions ? e.work + 2 * s_.T * R_ : e.grad;
    rotation_backward(grad_qkv, qkv, 3 * s_.D, cos, sin, grad_angles, s_.T, s_.H, s_.Dh);
    rotation_backward(grad_qkv + s_.D, qkv + s_.D, 3 * s_.D, cos, sin, grad_angles, s_.T, s_.H, s_.Dh);
  }
  bool query_key_in_lanes() const override { return true; }
  void query_key_forward_lanes(const HookLanes& group, int64_t, float* qkv_l) const override {
    rotation_turn_lanes(qkv_l, angles_of(group), s_.T, s_.H, s_.Dh, /*back=*/false);
  }
  void query_key_backward_lanes(const HookLanes& group, int64_t, float* grad_l, const float* qkv_l) const override {
    auto grad_angles_of = [&](int64_t g) -> float* {
      const HookExample& e = *group.example[g];
      return !e.grad ? nullptr : e.positions ? e.work + 2 * s_.T * R_ : e.grad;
    };
    rotation_backward_lanes(grad_l, qkv_l, angles_of(group), grad_angles_of, group.n, s_.T, s_.H, s_.Dh);
  }

 private:
  const float* cos_of(const HookExample& e) const { return e.positions ? e.work : cos_.data(); }
  const float* sin_of(const HookExample& e) const { return e.positions ? e.work + s_.T * R_ : sin_.data(); }
  // A group's examples share the position IDs' presence (the batch has them or not).
  AngleLanes angles_of(const HookLanes& group) const {
    if (group.example[0]->positions) return {nullptr, nullptr, group, 0, s_.T * R_};
    return {cos_.data(), sin_.data(), group, 0, 0};
  }

  Shape s_;
  int64_t R_, P_;
  bool gathers_, wants_grad_;
  std::vector<float> cos_, sin_;  // (P, Dh/2)
};

}  // namespace
}  // namespace cpu

namespace {

class RotationHook : public Hook {
 public:
  std::string name() const override { return "rotation"; }
  HookSite site() const override { return HookSite::query_key; }
  std::vector<int64_t> table_shape(const EncoderShape& shape, int64_t positions) const override {
    return {positions, shape.head_dim() / 2};
  }
  bool reads_positions() const override { return true; }
  torch::Tensor gather(const torch::Tensor& stacked, const torch::Tensor& positions) const override {
    return gather_position_rows(stacked, positions);  // (M, B, T, Dh/2)
  }
  void apply(const HookTable& table, SiteState& state) const override {
    // (M, 1, 1, T, Dh/2), or per example (M, B, 1, T, Dh/2): broadcast over B and the heads.
    auto angles = state.per_example ? table.stacked.unsqueeze(2) : table.stacked.unsqueeze(1).unsqueeze(1);
    auto cos = angles.cos(), sin = angles.sin();
    state.q = rotate_pairs(state.q, cos, sin);
    state.k = rotate_pairs(state.k, cos, sin);
  }
  KernelTableForm kernel_form() const override { return KernelTableForm::pair_angles; }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<cpu::CpuRotation>(making);
  }
  void describe(const HookDescription& member, nlohmann::json& out) const override {
    out["relative_kernel"] = relative_kernel_json(member.table);
  }
};

}  // namespace

const Hook& rotation_hook() {
  static const RotationHook hook;
  return hook;
}

}  // namespace copytask
