#include "model/positional_tables.h"

#include <torch/autograd.h>
#include <torch/torch.h>

#include "model/hooks/registry.h"

namespace copytask {

bool PositionalTables::any_learned() const {
  for (const auto& table : hooks)
    if (table.any_learned()) return true;
  return false;
}

PositionalTableMaker::PositionalTableMaker(std::vector<std::shared_ptr<PositionalScheme>> schemes,
                                           const EncoderShape& shape, const torch::Device& device)
    : schemes_(std::move(schemes)), shape_(shape), device_(device) {}

namespace {

// Member m's table of a hook for P positions. A component with fewer rows than P (a learned
// table of a sequential member batched beside members whose position IDs span L)
// gives all it has and zeros beyond: the member's own positions never reach those rows (the
// config checks a learned table covers its member's contexts and L), so the zeros are never
// read.
torch::Tensor member_table(PositionalScheme& owner, const Hook& hook, const EncoderShape& shape, int64_t P) {
  const int64_t rows = std::min(P, owner.position_limit());
  auto table = owner.table(hook, rows);
  if (rows == P || !hook.stacks()) return table;
  const std::vector<int64_t> full = hook.table_shape(shape, P);
  std::vector<int64_t> pad;  // last dimension first, as constant_pad_nd takes it
  for (int64_t d = table.dim() - 1; d >= 0; --d) {
    pad.push_back(0);
    pad.push_back(full[static_cast<size_t>(d)] - table.size(d));
  }
  return torch::constant_pad_nd(table, pad);
}

}  // namespace

PositionalTables PositionalTableMaker::make(int64_t positions) {
  const int64_t M = static_cast<int64_t>(schemes_.size());
  auto found = fixed_.find({variant_, positions});
  if (found == fixed_.end()) {
    // Every member's fixed tables; zeros (stacked) or nothing (per member) where a member
    // learns its table or lacks the hook.
    PositionalTables fixed;
    fixed.positions = positions;
    torch::NoGradGuard no_grad;
    for (const Hook* hook : hook_registry()) {
      HookTable table;
      std::vector<torch::Tensor> rows;
      for (int64_t m = 0; m < M; ++m) {
        PositionalScheme* owner = schemes_[m]->owner_of(*hook);
        table.owners.push_back(owner);
        table.used.push_back(owner ? 1 : 0);
        table.learned.push_back(owner && owner->learned() ? 1 : 0);
        const bool computed_now = owner && !owner->learned();
        torch::Tensor mine = computed_now ? member_table(*owner, *hook, shape_, positions).to(device_, torch::kFloat32)
                                          : torch::Tensor();
        if (hook->stacks())
          rows.push_back(mine.defined() ? mine
                                        : torch::zeros(hook->table_shape(shape_, positions),
                                                       torch::TensorOptions().device(device_)));
        else
          table.members.push_back(mine);
      }
      if (table.any_used() && hook->stacks()) table.stacked = torch::stack(rows);  // (M, ...)
      std::vector<int64_t> flags(table.used.begin(), table.used.end());
      table.used_flags = torch::tensor(flags, torch::kLong).to(device_).to(torch::kBool);  // (M)
      fixed.hooks.push_back(std::move(table));
    }
    found = fixed_.emplace(std::make_pair(variant_, positions), fixed).first;
  }
  const PositionalTables& fixed = found->second;
  if (!fixed.any_learned()) return fixed;

  // The learned members' tables, computed now (with autograd), in place of their zeros.
  PositionalTables tables = fixed;
  const auto& hooks = hook_registry();
  for (size_t index = 0; index < hooks.size(); ++index) {
    const Hook& hook = *hooks[index];
    HookTable& table = tables.hooks[index];
    if (!table.any_learned()) continue;
    if (!hook.stacks()) {
      for (int64_t m = 0; m < M; ++m)
        if (table.learned[m]) table.members[m] = member_table(*table.owners[m], hook, shape_, positions);
      continue;
    }
    std::vector<torch::Tensor> rows;
    for (int64_t m = 0; m < M; ++m)
      rows.push_back(table.learned[m] ? member_table(*table.owners[m], hook, shape_, positions) : table.stacked[m]);
    table.stacked = torch::stack(rows);  // (M, ...)
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
  for (size_t index = 0; index < tables.hooks.size(); ++index) {
    const HookTable& table = tables.hooks[index];
    const HookTable& grad = table_grads.hooks[index];
    add(table.stacked, grad.stacked);
    for (size_t m = 0; m < table.members.size(); ++m)
      if (table.members[m].defined() && table.members[m].requires_grad()) add(table.members[m], grad.members[m]);
  }
  if (outputs.empty()) return;
  for (const auto& scheme : schemes_)
    for (auto& parameter : scheme->parameters()) parameter.mutable_grad() = torch::Tensor();
  torch::autograd::backward(outputs, grads);
}

}  // namespace copytask
