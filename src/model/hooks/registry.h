#pragma once
// The registry of hooks: one line per hook below, naming the function in its file
// (src/model/hooks/<name>.cpp) that returns it. The order is the order in which hooks at the
// same site apply (a content term reads the score bias, so it comes after it).
#include "model/hooks/hook.h"

#define COPYTASK_HOOKS(HOOK) \
  HOOK(additive)             \
  HOOK(rotation)             \
  HOOK(qk_scale)             \
  HOOK(score_bias)           \
  HOOK(content)              \
  HOOK(softmax_scale)

namespace copytask {

#define COPYTASK_DECLARE_HOOK(name) const Hook& name##_hook();
COPYTASK_HOOKS(COPYTASK_DECLARE_HOOK)
#undef COPYTASK_DECLARE_HOOK

}  // namespace copytask
