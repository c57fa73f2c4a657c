#pragma once
// Which training steps can run a positional scheme, an option or a layer form
// (docs/design.md section 3). A study puts members that need different steps into
// different batches; a step refuses, before any work, a batch it cannot run.

namespace copytask {

// The fused GPU step is not among them: a scheme reaches it through its hooks' kernel table
// forms (model/hooks/hook.h), a layer form through LayerFormValue::fused_gpu (config/layer_form.h).
enum StepSupport : unsigned { kFusedCpuStep = 1, kAutogradStep = 2, kDeviceStep = 4, kEveryStep = 7 };

}  // namespace copytask
