// The score_bias hook: a bias added to each head's attention scores, by the positions of
// the query and the key,
//   logits[h, i, j] = q_i . k_j / sqrt(Dh) + bias[h, pos_i, pos_j]     table (H, P, P)
// (alibi, t5, dynamic, kerple, fire). A member without it has zeros, which add nothing. The
// fused CPU step adds it where its attention makes the scores (cpu_layers.h's
// attention_forward), and its gradient is the gradient at the logits. positional.json shows
// each head's (T, T) bias and its mean against the signed distance i - j.
// Shapes: M members, B batch, H heads, T positions, P table positions.
#include <torch/torch.h>

#include "model/hooks/cpu_hook.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/positional_analysis.h"

namespace copytask {
namespace cpu {
namespace {

class CpuScoreBias : public CpuHook {
 public:
  explicit CpuScoreBias(const CpuHookMaking& making)
      : table_(making.table), s_(*making.shape), P_(making.positions), gathers_(making.gathers),
        wants_grad_(making.wants_grad) {}
  // Under position IDs other than 0..T-1: the example's bias (H, T, T), then its gradient (H, T, T).
  int64_t workspace_floats() const override { return gathers_ ? 2 * s_.H * s_.T * s_.T : 0; }
  int64_t grad_floats() const override { return wants_grad_ ? s_.H * P_ * P_ : 0; }

  void example_begin(const HookExample& e) const override {
    if (!e.positions) return;
    const int64_t T = s_.T, n = s_.H * T * T;
    const int64_t* pos = e.positions;
    for (int64_t h = 0; h < s_.H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) e.work[(h * T + i) * T + j] = table_[(h * P_ + pos[i]) * P_ + pos[j]];
    if (e.grad) std::fill(e.work + n, e.work + 2 * n, 0.0f);
  }
  void example_end(const HookExample& e) const override {
    if (!e.positions || !e.grad) return;
    const int64_t T = s_.T, n = s_.H * T * T;
    const int64_t* pos = e.positions;
    for (int64_t h = 0; h < s_.H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) e.grad[(h * P_ + pos[i]) * P_ + pos[j]] += e.work[n + (h * T + i) * T + j];
  }
  // With rows 0..T-1 the table covers exactly the example's T positions.
  const float* score_bias(const HookExample& e) const override { return e.positions ? e.work : table_; }
  float* score_bias_grad(const HookExample& e) const override {
    if (!e.grad) return nullptr;
    return e.positions ? e.work + s_.H * s_.T * s_.T : e.grad;
  }

 private:
  const float* table_;
  Shape s_;
  int64_t P_;
  bool gathers_, wants_grad_;
};

}  // namespace
}  // namespace cpu

namespace {

class ScoreBiasHook : public Hook {
 public:
  std::string name() const override { return "score_bias"; }
  HookSite site() const override { return HookSite::scores; }
  std::vector<int64_t> table_shape(const EncoderShape& shape, int64_t positions) const override {
    return {shape.heads, positions, positions};
  }
  bool reads_positions() const override { return true; }
  torch::Tensor gather(const torch::Tensor& stacked, const torch::Tensor& positions) const override {
    const int64_t M = positions.size(0), B = positions.size(1), T = positions.size(2);
    const int64_t H = stacked.size(1), P = stacked.size(2);
    // Entry (m, h, i, j) of (M, H, P, P) for example b: ((m H + h) P + pos_i) P + pos_j.
    auto heads = (torch::arange(M, positions.options()).view({M, 1, 1, 1, 1}) * H +
                  torch::arange(H, positions.options()).view({1, 1, H, 1, 1})) * (P * P);              // (M, 1, H, 1, 1)
    auto index = heads + positions.view({M, B, 1, T, 1}) * P + positions.view({M, B, 1, 1, T});        // (M, B, H, T, T)
    return stacked.reshape({-1}).index_select(0, index.reshape({-1})).view({M, B, H, T, T});
  }
  void apply(const HookTable& table, SiteState& state) const override {
    state.bias = state.per_example ? table.stacked : table.stacked.unsqueeze(1);  // (M, 1|B, H, T, T)
    state.logits = state.logits + state.bias;
  }
  KernelTableForm kernel_form() const override { return KernelTableForm::score_bias; }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<cpu::CpuScoreBias>(making);
  }
  void describe(const HookDescription& member, nlohmann::json& out) const override {
    nlohmann::json per_head = nlohmann::json::array();
    for (int64_t h = 0; h < member.table.size(0); ++h) per_head.push_back(matrix_json(member.table[h]));
    out["bias"] = per_head;
    out["bias_by_distance"] = bias_by_distance_json(member.table);
  }
};

}  // namespace

const Hook& score_bias_hook() {
  static const ScoreBiasHook hook;
  return hook;
}

}  // namespace copytask
