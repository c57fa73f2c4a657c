#pragma once
// The positional tables of a batch of members, one HookTable per registered hook
// (model/hooks/hook.h): what the LibTorch forward pass and the fused CPU step read
// (docs/design.md section 2). A stacking hook's tables are stacked on a leading member axis,
// zeros for members without it; a content hook's are each member's own. Tables of
// components without parameters are computed once per P and kept; the others are computed
// from the current parameters at every call, with autograd.
// Shapes: M members, P positions, D embed, H heads, Dh = D / H.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "model/positional.h"

namespace copytask {

struct PositionalTables {
  int64_t positions = 0;         // P
  std::vector<HookTable> hooks;  // one per hook of hook_registry(), in its order
  // Per example (position IDs, EncoderImpl::tables_at): each table of a hook that
  // reads positions has a batch axis after the member axis, and positions = T.
  bool per_example = false;
  const HookTable& of(const Hook& hook) const { return hooks[hook_index(hook)]; }
  HookTable& of(const Hook& hook) { return hooks[hook_index(hook)]; }
  bool any_learned() const;
};

// The positionals of the members of one batch (not owned: the encoder registers them).
class PositionalTableMaker {
 public:
  PositionalTableMaker(std::vector<std::shared_ptr<PositionalScheme>> schemes, const EncoderShape& shape,
                       const torch::Device& device);
  // The tables for P positions, on the device.
  PositionalTables make(int64_t positions);
  // Given the gradients of the loss with respect to the tables (the same shapes, defined
  // where the tables are learned), sets each scheme parameter's gradient (autograd through
  // the tables' computation).
  void backward(const PositionalTables& tables, const PositionalTables& table_grads);
  // The schemes' tables changed (RoPE's rescalings for evaluation): from now on the tables
  // kept under `variant` ("" for the trained form). Nothing kept is ever freed: a captured
  // CUDA graph reads the trained form's tables at their addresses, and an evaluation between
  // its replays must not give their memory back.
  void variant_use(const std::string& variant) { variant_ = variant; }
  // How many sets of kept tables there are (one per variant and P).
  size_t kept_count() const { return fixed_.size(); }

 private:
  std::vector<std::shared_ptr<PositionalScheme>> schemes_;
  EncoderShape shape_;
  torch::Device device_;
  std::string variant_;
  // per variant and P: the fixed tables (learned members' zero or empty)
  std::map<std::pair<std::string, int64_t>, PositionalTables> fixed_;
};

}  // namespace copytask
