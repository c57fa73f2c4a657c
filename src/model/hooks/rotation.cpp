// The rotation hook: q and k of every head turned pair by pair by the angle of their
// position,
//   (x_2i, x_2i+1) at position p  ->  (x_2i c - x_2i+1 s, x_2i s + x_2i+1 c),
//   c = cos(angle[p, i]), s = sin(angle[p, i])                      table (P, Dh/2)
// (rope, xpos). A member without it has zero angles, which turn nothing. positional.json
// shows the relative kernel: q_m . k_n of equal contents as a function of m - n.
// Shapes: M members, B batch, H heads, T positions, P table positions, Dh head dimension.
#include <torch/torch.h>

#include "model/hooks/cpu_hook.h"
#include "model/hooks/position_rows.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/positional_analysis.h"

namespace copytask {
namespace cpu {
namespace {

// Turns the pairs (2i, 2i+1) of every head of x (T rows of row_stride floats, the first D
// used) by the angle whose cos and sin are at [t * Dh/2 + i].
void rotation_forward(float* x, int64_t row_stride, const float* cos_table, const float* sin_table,
                      int64_t T, int64_t H, int64_t Dh) {
  on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
    const int64_t pairs = Dh / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        float* x_h = x + t * row_stride + h * Dh;
        for (int64_t i = 0; i < pairs; ++i) {
          const float c = cos_table[t * pairs + i], s = sin_table[t * pairs + i];
          const float a = x_h[2 * i], b = x_h[2 * i + 1];
          x_h[2 * i] = a * c - b * s;
          x_h[2 * i + 1] = a * s + b * c;
        }
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
          const float c = cos_table[t * pairs + i], s = -sin_table[t * pairs + i];
          const float a = g_h[2 * i], b = g_h[2 * i + 1];
          if (grad_angles) grad_angles[t * pairs + i] += -a * r_h[2 * i + 1] + b * r_h[2 * i];
          g_h[2 * i] = a * c - b * s;
          g_h[2 * i + 1] = a * s + b * c;
        }
      }
  });
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

 private:
  const float* cos_of(const HookExample& e) const { return e.positions ? e.work : cos_.data(); }
  const float* sin_of(const HookExample& e) const { return e.positions ? e.work + s_.T * R_ : sin_.data(); }

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
