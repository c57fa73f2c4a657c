// The softmax_scale hook: each block's logits multiplied, row by row, by a scale of the
// number of keys the query sees,
//   logits[h, i, j] *= s[l, h] ln(n_i),   n_i = i + 1 (causal) or T        table s (L, H)
// before the causal mask (the length scale option, scalable softmax: model/schemes/
// length_scale.cpp). It reads no positions: n counts keys, the same under randomized
// positions. A member without it is not scaled. positional.json shows s through the
// option's reported values.
// Shapes: M members, B batch, H heads, T positions, L blocks.
#include <cmath>

#include <torch/torch.h>

#include "model/hooks/cpu_hook.h"
#include "model/hooks/registry.h"
#include "model/positional.h"

namespace copytask {
namespace cpu {
namespace {

class CpuSoftmaxScale : public CpuHook {
 public:
  explicit CpuSoftmaxScale(const CpuHookMaking& making)
      : s_(*making.shape), causal_(making.causal), wants_grad_(making.wants_grad),
        scale_(making.table, making.table + making.shape->L * making.shape->H) {}
  // The logits each block's forward received (L, H, T, T), which its backward reads.
  int64_t workspace_floats() const override { return s_.L * s_.H * s_.T * s_.T; }
  int64_t grad_floats() const override { return wants_grad_ ? s_.L * s_.H : 0; }
  bool stages_attention() const override { return true; }

  void softmax_forward(const HookExample& e, int64_t l, float* logits) const override {
    const int64_t T = s_.T, n = s_.H * T * T;
    std::copy(logits, logits + n, e.work + l * n);
    for (int64_t h = 0; h < s_.H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t seen = causal_ ? i + 1 : T;
        const float m = scale_[l * s_.H + h] * std::log(static_cast<float>(seen));
        float* row = logits + (h * T + i) * T;
        for (int64_t j = 0; j < seen; ++j) row[j] *= m;
      }
  }
  void softmax_backward(const HookExample& e, int64_t l, float* grad_logits) const override {
    const int64_t T = s_.T, n = s_.H * T * T;
    const float* before = e.work + l * n;
    for (int64_t h = 0; h < s_.H; ++h) {
      float grad_scale = 0;
      for (int64_t i = 0; i < T; ++i) {
        const int64_t seen = causal_ ? i + 1 : T;
        const float log_seen = std::log(static_cast<float>(seen));
        const float m = scale_[l * s_.H + h] * log_seen;
        float* g = grad_logits + (h * T + i) * T;
        const float* z = before + (h * T + i) * T;
        float row = 0;
        for (int64_t j = 0; j < seen; ++j) {
          row += g[j] * z[j];
          g[j] *= m;
        }
        grad_scale += log_seen * row;
      }
      if (e.grad) e.grad[l * s_.H + h] += grad_scale;
    }
  }

 private:
  Shape s_;
  bool causal_, wants_grad_;
  std::vector<float> scale_;  // (L, H)
};

}  // namespace
}  // namespace cpu

namespace {

class SoftmaxScaleHook : public Hook {
 public:
  std::string name() const override { return "softmax_scale"; }
  HookSite site() const override { return HookSite::softmax; }
  std::vector<int64_t> table_shape(const EncoderShape& shape, int64_t) const override {
    return {shape.blocks, shape.heads};
  }
  bool reads_positions() const override { return false; }
  void apply(const HookTable& table, SiteState& state) const override {
    const int64_t M = state.logits.size(0), H = state.logits.size(2), T = state.logits.size(3);
    // Device operations only (no host copies), so a CUDA graph can capture them.
    auto keys = torch::arange(1, T + 1, state.logits.options()).view({1, 1, 1, T, 1});                // (1, 1, 1, T, 1) i + 1
    auto causal = state.causal_flags.view({M, 1, 1, 1, 1});                                           // (M, 1, 1, 1, 1)
    auto log_seen = torch::where(causal, keys, torch::full_like(keys, static_cast<double>(T))).log();  // (M, 1, 1, T, 1)
    auto s = table.stacked.select(1, state.block).view({M, 1, H, 1, 1});                              // (M, 1, H, 1, 1)
    auto scale = s * log_seen;                                                                         // (M, 1, H, T, 1)
    state.logits = state.logits * torch::where(table.used_flags.view({M, 1, 1, 1, 1}), scale, torch::ones_like(scale));
  }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<cpu::CpuSoftmaxScale>(making);
  }
};

}  // namespace

const Hook& softmax_scale_hook() {
  static const SoftmaxScaleHook hook;
  return hook;
}

}  // namespace copytask
