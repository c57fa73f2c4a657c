// The content hook: a term added to each block's attention logits that the scheme computes
// from the content (model/hooks/content_score.h),
//   logits[h, i, j] += C_l[h, i, j](q, k, scores, bias, input; the scheme's parameters)
// after the score bias (a term may read it: DAPE). Each member's term is its own
// computation, so the LibTorch model runs it member by member and the tables do not stack:
// a member's table is its scheme's parameters as one vector. positional.json shows the term
// on the study's first probe, per block and head.
// Shapes: M members, B batch, H heads, T positions, D embed.
#include <torch/torch.h>

#include "model/hooks/content_score.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/positional_analysis.h"

namespace copytask {

torch::Tensor content_table(torch::nn::Module& module) {
  std::vector<torch::Tensor> flat;
  for (const auto& parameter : module.parameters(/*recurse=*/false)) flat.push_back(parameter.reshape({-1}));
  return torch::cat(flat);  // (n)
}

std::vector<torch::Tensor> content_pieces(torch::nn::Module& module, const torch::Tensor& table) {
  std::vector<torch::Tensor> pieces;
  int64_t offset = 0;
  for (const auto& parameter : module.parameters(/*recurse=*/false)) {
    pieces.push_back(table.narrow(0, offset, parameter.numel()).view(parameter.sizes()));
    offset += parameter.numel();
  }
  return pieces;
}

namespace {

class ContentHook : public Hook {
 public:
  std::string name() const override { return "content"; }
  HookSite site() const override { return HookSite::scores; }
  std::vector<int64_t> table_shape(const EncoderShape&, int64_t) const override { return {}; }
  bool reads_positions() const override { return false; }
  void apply(const HookTable& table, SiteState& state) const override {
    const int64_t M = state.logits.size(0);
    std::vector<torch::Tensor> logits, terms;
    for (int64_t m = 0; m < M; ++m) {
      if (!table.used[m]) {
        logits.push_back(state.logits[m]);
        if (state.content_out) terms.push_back(torch::zeros_like(state.logits[m]));
        continue;
      }
      ContentInputs in;
      in.block = state.block;
      in.input = state.input[m];
      in.q = state.q[m];
      in.k = state.k[m];
      in.scores = state.scores[m];
      if (state.bias.defined()) in.bias = state.bias[m];
      in.causal = (*state.causal)[m] != 0;
      auto term = table.owners[m]->content_score()->term(in, table.members[m]);  // (B, H, T, T)
      logits.push_back(state.logits[m] + term);
      if (state.content_out) terms.push_back(term.detach());
    }
    state.logits = torch::stack(logits);                             // (M, B, H, T, T)
    if (state.content_out) *state.content_out = torch::stack(terms);  // (M, B, H, T, T)
  }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return making.owner->content_score()->cpu(making);
  }
  void describe(const HookDescription& member, nlohmann::json& out) const override {
    if (member.probe_terms.empty()) return;
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto& term : member.probe_terms) {  // (H, T, T)
      nlohmann::json heads = nlohmann::json::array();
      for (int64_t h = 0; h < term.size(0); ++h) heads.push_back(matrix_json(term[h]));
      blocks.push_back(heads);
    }
    out["content_score"] = blocks;
  }
};

}  // namespace

const Hook& content_hook() {
  static const ContentHook hook;
  return hook;
}

}  // namespace copytask
