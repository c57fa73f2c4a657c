// The qk_scale hook: each pair (2r, 2r+1) of q and of k of every head multiplied by a
// scale of its position,
//   q pair r at position p  *  exp(u[0, p, r]),   k pair r at position p  *  exp(u[1, p, r])
//                                                                  table u (2, P, Dh/2)
// after the rotation (a pair's scale commutes with its turn). So q_i . k_j of pair r gets
// exp(u[0, i, r] + u[1, j, r]): xpos's zeta_r^((i - j) / gamma), or YaRN's temperature at
// evaluation (model/schemes/rope.cpp). A member without it has zeros, which scale by 1.
// positional.json shows the scale of q_i . k_j against i - j, averaged over the pairs.
// Shapes: M members, B batch, H heads, T positions, P table positions, Dh head dimension,
// R = Dh / 2 pairs.
#include <cmath>

#include <torch/torch.h>

#include "model/hooks/cpu_hook.h"
#include "model/hooks/position_rows.h"
#include "model/hooks/registry.h"
#include "model/positional.h"

namespace copytask {
namespace cpu {
namespace {

// Multiplies the pairs of every head of x (T rows of row_stride floats) by scale[t * R + r].
void pair_scale_forward(float* x, int64_t row_stride, const float* scale, int64_t T, int64_t H,
                        int64_t Dh) {
  on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
    const int64_t R = Dh / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        float* x_h = x + t * row_stride + h * Dh;
        for (int64_t r = 0; r < R; ++r) {
          x_h[2 * r] *= scale[t * R + r];
          x_h[2 * r + 1] *= scale[t * R + r];
        }
      }
  });
}

// grad (at the scaled values) turned into the gradient at the values before; grad_log
// (T, R), when given, += the log-scale's gradient: sum over heads of g . (the scaled values).
void pair_scale_backward(float* grad, const float* scaled, int64_t row_stride, const float* scale,
                         float* grad_log, int64_t T, int64_t H, int64_t Dh) {
  on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
    const int64_t R = Dh / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        float* g_h = grad + t * row_stride + h * Dh;
        const float* s_h = scaled + t * row_stride + h * Dh;
        for (int64_t r = 0; r < R; ++r) {
          if (grad_log) grad_log[t * R + r] += g_h[2 * r] * s_h[2 * r] + g_h[2 * r + 1] * s_h[2 * r + 1];
          g_h[2 * r] *= scale[t * R + r];
          g_h[2 * r + 1] *= scale[t * R + r];
        }
      }
  });
}

class CpuQkScale : public CpuHook {
 public:
  explicit CpuQkScale(const CpuHookMaking& making)
      : s_(*making.shape), R_(making.shape->Dh / 2), P_(making.positions), gathers_(making.gathers),
        wants_grad_(making.wants_grad) {
    auto log_scale = torch::from_blob(const_cast<float*>(making.table), {2, P_, R_}, torch::kFloat32);  // (2, P, R)
    auto scale = log_scale.exp().contiguous();
    scale_.assign(scale.data_ptr<float>(), scale.data_ptr<float>() + scale.numel());
  }
  // Under position IDs other than 0..T-1: the example's q and k scales (T, R) each, then their gradients.
  int64_t workspace_floats() const override { return gathers_ ? 4 * s_.T * R_ : 0; }
  int64_t grad_floats() const override { return wants_grad_ ? 2 * P_ * R_ : 0; }

  void example_begin(const HookExample& e) const override {
    if (!e.positions) return;
    const int64_t n = s_.T * R_;
    position_rows_gather(scale_.data(), e.positions, e.work, s_.T, R_);               // q
    position_rows_gather(scale_.data() + P_ * R_, e.positions, e.work + n, s_.T, R_);  // k
    if (e.grad) std::fill(e.work + 2 * n, e.work + 4 * n, 0.0f);
  }
  void example_end(const HookExample& e) const override {
    if (!e.positions || !e.grad) return;
    const int64_t n = s_.T * R_;
    position_rows_scatter(e.work + 2 * n, e.positions, e.grad, s_.T, R_);
    position_rows_scatter(e.work + 3 * n, e.positions, e.grad + P_ * R_, s_.T, R_);
  }
  void query_key_forward(const HookExample& e, int64_t, float* qkv) const override {
    pair_scale_forward(qkv, 3 * s_.D, scale_of(e, 0), s_.T, s_.H, s_.Dh);
    pair_scale_forward(qkv + s_.D, 3 * s_.D, scale_of(e, 1), s_.T, s_.H, s_.Dh);
  }
  void query_key_backward(const HookExample& e, int64_t, float* grad_qkv, const float* qkv) const override {
    pair_scale_backward(grad_qkv, qkv, 3 * s_.D, scale_of(e, 0), grad_of(e, 0), s_.T, s_.H, s_.Dh);
    pair_scale_backward(grad_qkv + s_.D, qkv + s_.D, 3 * s_.D, scale_of(e, 1), grad_of(e, 1), s_.T, s_.H, s_.Dh);
  }

 private:
  // which: 0 = q, 1 = k.
  const float* scale_of(const HookExample& e, int which) const {
    return e.positions ? e.work + which * s_.T * R_ : scale_.data() + which * P_ * R_;
  }
  float* grad_of(const HookExample& e, int which) const {
    if (!e.grad) return nullptr;
    return e.positions ? e.work + (2 + which) * s_.T * R_ : e.grad + which * P_ * R_;
  }

  Shape s_;
  int64_t R_, P_;
  bool gathers_, wants_grad_;
  std::vector<float> scale_;  // (2, P, R): exp of the table
};

}  // namespace
}  // namespace cpu

namespace {

class QkScaleHook : public Hook {
 public:
  std::string name() const override { return "qk_scale"; }
  HookSite site() const override { return HookSite::query_key; }
  std::vector<int64_t> table_shape(const EncoderShape& shape, int64_t positions) const override {
    return {2, positions, shape.head_dim() / 2};
  }
  bool reads_positions() const override { return true; }
  torch::Tensor gather(const torch::Tensor& stacked, const torch::Tensor& positions) const override {
    auto rows = gather_position_rows(stacked.permute({0, 2, 1, 3}), positions);  // (M, P, 2, R) -> (M, B, T, 2, R)
    return rows.permute({0, 1, 3, 2, 4});                                         // (M, B, 2, T, R)
  }
  void apply(const HookTable& table, SiteState& state) const override {
    // The q and k log-scales (M, 1|B, 1, T, R) -> scales per dimension (M, 1|B, 1, T, Dh).
    auto part = [&](int64_t which) {
      auto u = state.per_example ? table.stacked.select(2, which).unsqueeze(2)              // (M, B, 1, T, R)
                                 : table.stacked.select(1, which).unsqueeze(1).unsqueeze(1);  // (M, 1, 1, T, R)
      return u.exp().repeat_interleave(2, -1);                                               // (..., T, Dh)
    };
    state.q = state.q * part(0);
    state.k = state.k * part(1);
  }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<cpu::CpuQkScale>(making);
  }
  void describe(const HookDescription& member, nlohmann::json& out) const override {
    // scale of q_i . k_j per pair: exp(u_q[i] + u_k[j]), averaged over the pairs and over i - j = d.
    const auto u = member.table.to(torch::kFloat64);  // (2, T, R)
    const int64_t T = u.size(1);
    auto pair_scale = (u[0].unsqueeze(1) + u[1].unsqueeze(0)).exp().mean(-1);  // (T, T) [i][j]
    nlohmann::json distance = nlohmann::json::array(), scale = nlohmann::json::array();
    for (int64_t d = -(T - 1); d <= T - 1; ++d) {
      distance.push_back(d);
      scale.push_back(std::round(pair_scale.diagonal(-d).mean().item<double>() * 1e6) / 1e6);  // i - j = d
    }
    out["qk_scale"] = {{"distance", distance}, {"scale", scale}};
  }
};

}  // namespace

const Hook& qk_scale_hook() {
  static const QkScaleHook hook;
  return hook;
}

}  // namespace copytask
