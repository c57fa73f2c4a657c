#pragma once
// The registry of hooks: one line per hook below, naming the function in its file
// (src/model/hooks/<name>.cpp) that returns it. The order is the order in which hooks at the
// same site apply (a content term reads the score bias, so it comes after it; a hook that
// replaces the plain scores, polar, comes first, so the logits it replaces are still them).
#include <cstddef>

#include "model/hooks/hook.h"

#define COPYTASK_HOOKS(HOOK) \
  HOOK(additive)             \
  HOOK(rotation)             \
  HOOK(qk_scale)             \
  HOOK(polar)                \
  HOOK(score_bias)           \
  HOOK(content)              \
  HOOK(softmax_scale)

namespace copytask {

#define COPYTASK_DECLARE_HOOK(name) const Hook& name##_hook();
COPYTASK_HOOKS(COPYTASK_DECLARE_HOOK)
#undef COPYTASK_DECLARE_HOOK

// How many hooks there are, known at compile time: a member has at most one table per hook
// (PositionalScheme::member_hooks lists each once), so this many per-hook slots hold any
// member's (the fused CPU step's HookExamples).
#define COPYTASK_COUNT_HOOK(name) +1
inline constexpr size_t kHookCount = 0 COPYTASK_HOOKS(COPYTASK_COUNT_HOOK);
#undef COPYTASK_COUNT_HOOK

}  // namespace copytask
