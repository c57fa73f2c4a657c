// The additive hook: rows added to the token embeddings at each token's position,
//   x[t] = tok_emb[token t] + table[position t]          table (P, D)
// (sinusoidal, learned). A member without it has zeros, which add nothing. positional.json
// shows the rows' dot products, cosine similarities and 2-D PCA, and a learned table's path
// over training. Shapes: M members, B batch, T positions, P table positions, D embed.
#include <torch/torch.h>

#include "model/hooks/cpu_hook.h"
#include "model/hooks/position_rows.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/positional_analysis.h"

namespace copytask {
namespace {

// One member's rows on the fused CPU step.
class CpuAdditive : public cpu::CpuHook {
 public:
  CpuAdditive(const CpuHookMaking& making)
      : table_(making.table), T_(making.shape->T), D_(making.shape->D), gathers_(making.gathers),
        wants_grad_(making.wants_grad), positions_(making.positions) {}
  // Under position IDs other than 0..T-1: the example's rows (T, D), then their gradient (T, D).
  int64_t workspace_floats() const override { return gathers_ ? 2 * T_ * D_ : 0; }
  int64_t grad_floats() const override { return wants_grad_ ? positions_ * D_ : 0; }

  void example_begin(const cpu::HookExample& e) const override {
    if (!e.positions) return;
    cpu::position_rows_gather(table_, e.positions, e.work, T_, D_);
    if (e.grad) std::fill(e.work + T_ * D_, e.work + 2 * T_ * D_, 0.0f);
  }
  void example_end(const cpu::HookExample& e) const override {
    if (e.positions && e.grad) cpu::position_rows_scatter(e.work + T_ * D_, e.positions, e.grad, T_, D_);
  }
  void embedding_forward(const cpu::HookExample& e, float* x) const override {
    const float* rows = e.positions ? e.work : table_;
    for (int64_t i = 0; i < T_ * D_; ++i) x[i] += rows[i];
  }
  void embedding_backward(const cpu::HookExample& e, const float* grad_x) const override {
    if (!e.grad) return;
    float* grad_rows = e.positions ? e.work + T_ * D_ : e.grad;
    for (int64_t i = 0; i < T_ * D_; ++i) grad_rows[i] += grad_x[i];
  }

 private:
  const float* table_;
  int64_t T_, D_;
  bool gathers_, wants_grad_;
  int64_t positions_;
};

class AdditiveHook : public Hook {
 public:
  std::string name() const override { return "additive"; }
  HookSite site() const override { return HookSite::embedding; }
  std::vector<int64_t> table_shape(const EncoderShape& shape, int64_t positions) const override {
    return {positions, shape.embed};
  }
  bool reads_positions() const override { return true; }
  torch::Tensor gather(const torch::Tensor& stacked, const torch::Tensor& positions) const override {
    return gather_position_rows(stacked, positions);  // (M, B, T, D)
  }
  void apply(const HookTable& table, SiteState& state) const override {
    // x (M, B, T, D) + (M, 1|B, T, D)
    state.x = state.x + (state.per_example ? table.stacked : table.stacked.unsqueeze(1));
  }
  KernelTableForm kernel_form() const override { return KernelTableForm::embedding_rows; }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<CpuAdditive>(making);
  }
  void describe(const HookDescription& member, nlohmann::json& out) const override {
    PositionPca pca;
    out["vectors"] = position_vectors_json(member.table, &pca);
    if (member.owner.learned()) {
      nlohmann::json path = nlohmann::json::array();
      for (const auto& [step, snapshot] : member.learned_path)
        path.push_back({{"step", step}, {"points", position_projection_json(snapshot.cpu(), pca)}});
      out["path"] = path;
    }
  }
};

}  // namespace

const Hook& additive_hook() {
  static const AdditiveHook hook;
  return hook;
}

}  // namespace copytask
