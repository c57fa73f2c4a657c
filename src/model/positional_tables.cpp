#include "model/positional_tables.h"

#include <torch/autograd.h>
#include <torch/torch.h>

namespace copytask {

bool PositionalTables::any_learned() const {
  for (uint8_t l : learned)
    if (l) return true;
  return false;
}

PositionalTableMaker::PositionalTableMaker(std::vector<std::shared_ptr<PositionalScheme>> schemes, int64_t embed,
                                           int64_t heads, const torch::Device& device)
    : schemes_(std::move(schemes)), embed_(embed), heads_(heads), device_(device) {
  for (const auto& scheme : schemes_) learned_.push_back(scheme->learned() ? 1 : 0);
}

namespace {
// The shape of one member's table of a hook.
std::vector<int64_t> table_shape(PositionalHook hook, int64_t P, int64_t D, int64_t H) {
  switch (hook) {
    case PositionalHook::additive: return {P, D};
    case PositionalHook::rotation: return {P, D / H / 2};
    case PositionalHook::score_bias: return {H, P, P};
    default: return {};
  }
}

// Member m's table for P positions. A scheme with fewer rows than P (a learned table of a
// plain member batched beside randomized-position members, whose tables span L) gives all
// it has and zeros beyond: the member's own positions never reach those rows (the config
// checks a learned table covers its member's contexts and L), so the zeros are never read.
torch::Tensor member_table(PositionalScheme& scheme, PositionalHook hook, int64_t P) {
  const int64_t rows = std::min(P, scheme.position_limit());
  auto table = scheme.table(rows);
  if (rows == P) return table;
  if (hook == PositionalHook::score_bias)
    return torch::constant_pad_nd(table, {0, P - rows, 0, P - rows});  // (H, P, P)
  return torch::constant_pad_nd(table, {0, 0, 0, P - rows});          // (P, D) or (P, Dh/2)
}
}  // namespace

PositionalTables PositionalTableMaker::make(int64_t positions) {
  const int64_t M = static_cast<int64_t>(schemes_.size());
  const torch::Device device = device_;
  auto found = fixed_.find(positions);
  if (found == fixed_.end()) {
    // Every member's fixed table, zeros for members that learn theirs or lack the hook.
    PositionalTables fixed;
    fixed.positions = positions;
    fixed.learned = learned_;
    torch::NoGradGuard no_grad;
    for (PositionalHook hook : {PositionalHook::additive, PositionalHook::rotation, PositionalHook::score_bias}) {
      std::vector<torch::Tensor> rows;
      bool used = false;
      for (int64_t m = 0; m < M; ++m) {
        const bool has = schemes_[m]->hook() == hook;
        used = used || has;
        rows.push_back(has && !learned_[m] ? member_table(*schemes_[m], hook, positions).to(device, torch::kFloat32)
                                           : torch::zeros(table_shape(hook, positions, embed_, heads_),
                                                          torch::TensorOptions().device(device)));
      }
      if (!used) continue;
      auto stacked = torch::stack(rows);  // (M, ...)
      if (hook == PositionalHook::additive) fixed.additive = stacked;
      if (hook == PositionalHook::rotation) fixed.angles = stacked;
      if (hook == PositionalHook::score_bias) fixed.bias = stacked;
    }
    for (const auto& scheme : schemes_) fixed.hooks.push_back(scheme->hook());
    found = fixed_.insert_or_assign(positions, fixed).first;
  }
  const PositionalTables& fixed = found->second;
  if (!fixed.any_learned()) return fixed;

  // The learned members' tables, computed now (with autograd), in place of their zeros.
  PositionalTables tables = fixed;
  for (PositionalHook hook : {PositionalHook::additive, PositionalHook::rotation, PositionalHook::score_bias}) {
    torch::Tensor& stacked = hook == PositionalHook::additive   ? tables.additive
                             : hook == PositionalHook::rotation ? tables.angles
                                                                : tables.bias;
    if (!stacked.defined()) continue;  // no member has this hook
    std::vector<torch::Tensor> rows;
    bool any = false;
    for (int64_t m = 0; m < M; ++m) {
      const bool mine = learned_[m] && schemes_[m]->hook() == hook;
      any = any || mine;
      rows.push_back(mine ? member_table(*schemes_[m], hook, positions) : stacked[m]);
    }
    if (any) stacked = torch::stack(rows);  // (M, ...)
  }
  return tables;
}

void PositionalTableMaker::backward(const PositionalTables& tables, const PositionalTables& table_grads) {
  std::vector<torch::Tensor> outputs, grads;
  auto add = [&](const torch::Tensor& table, const torch::Tensor& grad) {
    if (table.defined() && table.requires_grad()) {
      TORCH_CHECK(grad.defined() && grad.sizes() == table.sizes(), "positional backward: a table without its gradient");
      outputs.push_back(table);
      grads.push_back(grad);
    }
  };
  add(tables.additive, table_grads.additive);
  add(tables.angles, table_grads.angles);
  add(tables.bias, table_grads.bias);
  if (outputs.empty()) return;
  for (const auto& scheme : schemes_)
    for (auto& parameter : scheme->parameters()) parameter.mutable_grad() = torch::Tensor();
  torch::autograd::backward(outputs, grads);
}

}  // namespace copytask
