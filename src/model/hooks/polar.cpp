// The polar hook: each head's attention scores replaced by the polar score of PoPE
// (model/schemes/pope.cpp), magnitudes from the content and phases from the positions,
//   logits[h, i, j] = sum_c softplus(q_ic) softplus(k_jc) cos(phi_q[h, pos_i, c] - phi_k[h, pos_j, c]) / sqrt(Dh)
//                                                                  table phi (2, H, P, Dh)
// = Re(sum_c qtilde_ic conj(ktilde_jc)) / sqrt(Dh), qtilde_ic = softplus(q_ic) e^(i phi_q),
// where phi[0] holds the query's phases and phi[1] the key's (a scheme folds its phase bias
// into them, so the rows are gathered by position as any position table's and autograd
// carries the table's gradient to the bias). It replaces q.k / sqrt(Dh) rather than adding
// to it: in LibTorch it is the first hook of the scores site (model/hooks/registry.h), so
// the logits it replaces are still the plain scores; on the fused CPU step it replaces_scores(),
// so the member's staged attention skips the plain scores and their backward to q and k, and
// this hook sends the whole gradient at the logits to q and k itself. A member without it
// keeps its logits. positional.json shows each head's score of unit magnitudes by i - j.
// Shapes: M members, B batch, H heads, T positions, P table positions, Dh head dimension.
#include <cmath>

#include <torch/torch.h>

#include "model/hooks/cpu_hook.h"
#include "model/hooks/position_rows.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/positional_analysis.h"

namespace copytask {
namespace cpu {
namespace {

// softplus and its derivative as LibTorch's float kernels compute them (beta 1, threshold
// 20: the identity above it), so the fused step's magnitudes round as the model's.
COPYTASK_INLINE float softplus_of(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
COPYTASK_INLINE float softplus_slope(float x) {
  if (x > 20.0f) return 1.0f;
  const float z = std::exp(x);
  return z / (z + 1.0f);
}

// One member's polar score on the fused CPU step: the cos and sin of its phases, made once
// per step; under position IDs (model.position_ids) each example's rows of them, and their gradient.
class CpuPolar : public CpuHook {
 public:
  explicit CpuPolar(const CpuHookMaking& making)
      : s_(*making.shape), P_(making.positions), gathers_(making.gathers), wants_grad_(making.wants_grad) {
    // In LibTorch's float32 cos and sin, as the LibTorch model makes them.
    auto phases = torch::from_blob(const_cast<float*>(making.table), {2, s_.H, P_, s_.Dh}, torch::kFloat32);  // (2, H, P, Dh)
    auto cos = phases.cos().contiguous(), sin = phases.sin().contiguous();
    cos_.assign(cos.data_ptr<float>(), cos.data_ptr<float>() + cos.numel());
    sin_.assign(sin.data_ptr<float>(), sin.data_ptr<float>() + sin.numel());
  }
  // Per example: one head's qtilde and ktilde (T, 2Dh) each (the real parts, then the
  // imaginary parts) and their gradients (T, 2Dh) each; under position IDs also the
  // example's cos and sin (2, H, T, Dh) each and the phases' gradient (2, H, T, Dh).
  int64_t workspace_floats() const override { return 8 * s_.T * s_.Dh + (gathers_ ? 6 * s_.T * s_.D : 0); }
  int64_t grad_floats() const override { return wants_grad_ ? 2 * s_.H * P_ * s_.Dh : 0; }
  bool stages_attention() const override { return true; }
  bool replaces_scores() const override { return true; }

  void example_begin(const HookExample& e) const override {
    if (!e.positions) return;
    const int64_t rows = s_.T * s_.Dh, n = 2 * s_.H * rows;
    for (int64_t w = 0; w < 2 * s_.H; ++w) {  // w = side * H + h: the query's heads, then the key's
      position_rows_gather(cos_.data() + w * P_ * s_.Dh, e.positions, gathered(e) + w * rows, s_.T, s_.Dh);
      position_rows_gather(sin_.data() + w * P_ * s_.Dh, e.positions, gathered(e) + n + w * rows, s_.T, s_.Dh);
    }
    if (e.grad) std::fill(gathered(e) + 2 * n, gathered(e) + 3 * n, 0.0f);
  }
  void example_end(const HookExample& e) const override {
    if (!e.positions || !e.grad) return;
    const int64_t rows = s_.T * s_.Dh, n = 2 * s_.H * rows;
    for (int64_t w = 0; w < 2 * s_.H; ++w)
      position_rows_scatter(gathered(e) + 2 * n + w * rows, e.positions, e.grad + w * P_ * s_.Dh, s_.T, s_.Dh);
  }

  void scores_forward(const HookExample& e, int64_t, const ScoresSite& site) const override {
    on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
      const int64_t T = s_.T, Dh = s_.Dh, W = 2 * Dh;
      const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
      float *qt = e.work, *kt = e.work + T * W;
      for (int64_t h = 0; h < s_.H; ++h) {
        polar_rows(e, site.qkv, 0, h, qt);
        polar_rows(e, site.qkv, 1, h, kt);
        float* logits = site.logits + h * T * T;
        for (int64_t i = 0; i < T; ++i) {
          const int64_t seen = e.causal ? i + 1 : T;
          for (int64_t j = 0; j < seen; ++j) {
            float dot = 0;
            for (int64_t c = 0; c < W; ++c) dot += qt[i * W + c] * kt[j * W + c];
            logits[i * T + j] += dot * scale;
          }
        }
      }
    });
  }

  void scores_backward(const HookExample& e, int64_t, const ScoresSite& site, const ScoresGrad& grad) const override {
    on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
      const int64_t T = s_.T, Dh = s_.Dh, W = 2 * Dh;
      const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
      float *qt = e.work, *kt = e.work + T * W, *grad_qt = e.work + 2 * T * W, *grad_kt = e.work + 3 * T * W;
      for (int64_t h = 0; h < s_.H; ++h) {
        polar_rows(e, site.qkv, 0, h, qt);
        polar_rows(e, site.qkv, 1, h, kt);
        std::fill(grad_qt, grad_qt + 2 * T * W, 0.0f);  // and grad_kt after it
        const float* g = grad.grad_logits + h * T * T;
        for (int64_t i = 0; i < T; ++i) {
          const int64_t seen = e.causal ? i + 1 : T;
          for (int64_t j = 0; j < seen; ++j) {
            const float g_ij = g[i * T + j] * scale;
            for (int64_t c = 0; c < W; ++c) {
              grad_qt[i * W + c] += g_ij * kt[j * W + c];
              grad_kt[j * W + c] += g_ij * qt[i * W + c];
            }
          }
        }
        polar_rows_backward(e, site.qkv, 0, h, grad_qt, grad.grad_qkv);
        polar_rows_backward(e, site.qkv, 1, h, grad_kt, grad.grad_qkv);
      }
    });
  }

 private:
  // The cos and sin of side `side` (0: query, 1: key), head h, (T, Dh): the table's rows
  // 0..T-1 (P = T), or the example's gathered rows.
  float* gathered(const HookExample& e) const { return e.work + 8 * s_.T * s_.Dh; }
  const float* cos_of(const HookExample& e, int64_t side, int64_t h) const {
    const int64_t w = side * s_.H + h;
    return e.positions ? gathered(e) + w * s_.T * s_.Dh : cos_.data() + w * P_ * s_.Dh;
  }
  const float* sin_of(const HookExample& e, int64_t side, int64_t h) const {
    const int64_t w = side * s_.H + h;
    return e.positions ? gathered(e) + (2 * s_.H + w) * s_.T * s_.Dh : sin_.data() + w * P_ * s_.Dh;
  }
  // The phases' gradient rows of side and head (T, Dh), or null when none is wanted.
  float* phase_grad_of(const HookExample& e, int64_t side, int64_t h) const {
    if (!e.grad) return nullptr;
    const int64_t w = side * s_.H + h;
    return e.positions ? gathered(e) + (4 * s_.H + w) * s_.T * s_.Dh : e.grad + w * P_ * s_.Dh;
  }

  // out (T, 2Dh): softplus(x_tc) cos(phi_tc) | softplus(x_tc) sin(phi_tc) of q (side 0) or
  // k (side 1) of head h.
  COPYTASK_INLINE void polar_rows(const HookExample& e, const float* qkv, int64_t side, int64_t h, float* out) const {
    const int64_t T = s_.T, Dh = s_.Dh, W = 2 * Dh;
    const float *cos = cos_of(e, side, h), *sin = sin_of(e, side, h);
    for (int64_t t = 0; t < T; ++t) {
      const float* x = qkv + t * 3 * s_.D + side * s_.D + h * Dh;
      for (int64_t c = 0; c < Dh; ++c) {
        const float magnitude = softplus_of(x[c]);
        out[t * W + c] = magnitude * cos[t * Dh + c];
        out[t * W + Dh + c] = magnitude * sin[t * Dh + c];
      }
    }
  }

  // From the gradient at the rows (T, 2Dh) = (a | b), a = m cos(phi), b = m sin(phi):
  // d m = a' cos + b' sin, to q or k through softplus' slope (grad_qkv +=); d phi =
  // -a' b + b' a, to the phases' gradient rows.
  COPYTASK_INLINE void polar_rows_backward(const HookExample& e, const float* qkv, int64_t side, int64_t h,
                                           const float* grad_rows, float* grad_qkv) const {
    const int64_t T = s_.T, Dh = s_.Dh, W = 2 * Dh;
    const float *cos = cos_of(e, side, h), *sin = sin_of(e, side, h);
    float* grad_phase = phase_grad_of(e, side, h);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t at = t * 3 * s_.D + side * s_.D + h * Dh;
      for (int64_t c = 0; c < Dh; ++c) {
        const float ga = grad_rows[t * W + c], gb = grad_rows[t * W + Dh + c];
        const float co = cos[t * Dh + c], si = sin[t * Dh + c];
        grad_qkv[at + c] += (ga * co + gb * si) * softplus_slope(qkv[at + c]);
        if (grad_phase) grad_phase[t * Dh + c] += (gb * co - ga * si) * softplus_of(qkv[at + c]);
      }
    }
  }

  Shape s_;
  int64_t P_;
  bool gathers_, wants_grad_;
  std::vector<float> cos_, sin_;  // (2, H, P, Dh)
};

}  // namespace
}  // namespace cpu

namespace {

class PolarHook : public Hook {
 public:
  std::string name() const override { return "polar"; }
  HookSite site() const override { return HookSite::scores; }
  bool replaces_scores() const override { return true; }
  std::vector<int64_t> table_shape(const EncoderShape& shape, int64_t positions) const override {
    return {2, shape.heads, positions, shape.head_dim()};
  }
  bool reads_positions() const override { return true; }
  torch::Tensor gather(const torch::Tensor& stacked, const torch::Tensor& positions) const override {
    auto rows = gather_position_rows(stacked.permute({0, 3, 1, 2, 4}), positions);  // (M, P, 2, H, Dh) -> (M, B, T, 2, H, Dh)
    return rows.permute({0, 1, 3, 4, 2, 5});                                         // (M, B, 2, H, T, Dh)
  }
  void apply(const HookTable& table, SiteState& state) const override {
    const int64_t M = state.q.size(0), Dh = state.q.size(-1);
    // The phases (M, 1|B, H, T, Dh) of the query and of the key, broadcast over the batch
    // unless per example.
    auto phases = state.per_example ? table.stacked : table.stacked.unsqueeze(1);  // (M, 1|B, 2, H, T, Dh)
    auto q_phase = phases.select(2, 0), k_phase = phases.select(2, 1);
    auto q_magnitude = torch::softplus(state.q), k_magnitude = torch::softplus(state.k);  // (M, B, H, T, Dh)
    // qtilde and ktilde as (real | imaginary) halves: Re(qtilde . conj(ktilde)) is their dot product.
    auto q_tilde = torch::cat({q_magnitude * q_phase.cos(), q_magnitude * q_phase.sin()}, -1);  // (M, B, H, T, 2Dh)
    auto k_tilde = torch::cat({k_magnitude * k_phase.cos(), k_magnitude * k_phase.sin()}, -1);  // (M, B, H, T, 2Dh)
    auto polar = torch::matmul(q_tilde, k_tilde.transpose(-1, -2)) / std::sqrt(static_cast<double>(Dh));  // (M, B, H, T, T)
    // First at the scores site: state.logits are still the plain scores, which it replaces.
    state.logits = torch::where(table.used_flags.view({M, 1, 1, 1, 1}), polar, state.logits);  // (M, B, H, T, T)
  }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<cpu::CpuPolar>(making);
  }
  void describe(const HookDescription& member, nlohmann::json& out) const override {
    // Unit magnitudes: each head's score sum_c cos(phi_q[i, c] - phi_k[j, c]) / sqrt(Dh),
    // as a function of i - j (the phases' difference depends on it alone).
    const auto phases = member.table.to(torch::kFloat64);  // (2, H, T, Dh)
    const int64_t Dh = phases.size(-1);
    auto difference = phases[0].unsqueeze(2) - phases[1].unsqueeze(1);                        // (H, T, T, Dh)
    auto score = difference.cos().sum(-1) / std::sqrt(static_cast<double>(Dh));              // (H, T, T)
    out["polar_by_distance"] = bias_by_distance_json(score);
  }
};

}  // namespace

const Hook& polar_hook() {
  static const PolarHook hook;
  return hook;
}

}  // namespace copytask
