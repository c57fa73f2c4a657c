#include "model/hooks/registry.h"

#include <stdexcept>

#include <torch/torch.h>

#include "model/positional.h"

namespace copytask {

const std::vector<const Hook*>& hook_registry() {
#define COPYTASK_LIST_HOOK(name) &name##_hook(),
  static const std::vector<const Hook*> hooks = [] {
    std::vector<const Hook*> out = {COPYTASK_HOOKS(COPYTASK_LIST_HOOK)};
    // A hook that replaces the plain scores must meet them: the first of the scores site.
    bool scores_seen = false;
    for (const Hook* hook : out) {
      if (hook->site() != HookSite::scores) continue;
      if (hook->replaces_scores() && scores_seen)
        throw std::logic_error("hook '" + hook->name() +
                               "' replaces the plain scores and must come first at the scores site (model/hooks/registry.h)");
      scores_seen = true;
    }
    return out;
  }();
#undef COPYTASK_LIST_HOOK
  return hooks;
}

size_t hook_index(const Hook& hook) {
  const auto& hooks = hook_registry();
  for (size_t i = 0; i < hooks.size(); ++i)
    if (hooks[i] == &hook) return i;
  throw std::logic_error("hook '" + hook.name() + "' is not in the registry (model/hooks/registry.h)");
}

bool HookTable::any_used() const {
  for (uint8_t u : used)
    if (u) return true;
  return false;
}

bool HookTable::any_learned() const {
  for (uint8_t l : learned)
    if (l) return true;
  return false;
}

torch::Tensor HookTable::of(int64_t m) const {
  if (!members.empty()) return members[static_cast<size_t>(m)];
  return stacked.defined() ? stacked[m] : torch::Tensor();
}

}  // namespace copytask
