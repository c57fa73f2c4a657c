#pragma once
// The positional tables of a batch of members, stacked on a leading member axis: what the
// LibTorch forward pass and the fused CPU step read (DESIGN.md section 2). A member
// without a hook has zeros in that hook's table (zero angles leave q and k unturned).
// Tables of schemes without parameters are computed once and kept; the others are
// computed from the current parameters at every call, with autograd.
// Shapes: M members, P positions, D embed, H heads, Dh = D / H.
#include <cstdint>
#include <map>
#include <vector>

#include <torch/types.h>

#include "model/positional.h"

namespace copytask {

struct PositionalTables {
  int64_t positions = 0;                // P
  torch::Tensor additive;               // (M, P, D), or undefined when no member adds rows
  torch::Tensor angles;                 // (M, P, Dh/2), or undefined when no member rotates
  torch::Tensor bias;                   // (M, H, P, P), or undefined when no member biases the scores
  std::vector<PositionalHook> hooks;    // per member
  std::vector<uint8_t> learned;         // per member: 1 when its table depends on parameters
  // Per example (randomized positions, EncoderImpl::tables_at): each table has a batch axis,
  // additive (M, B, T, D), angles (M, B, T, Dh/2), bias (M, B, H, T, T), and positions = T.
  bool per_example = false;
  bool any_learned() const;
};

// The schemes of the members of one batch (not owned: the encoder registers them).
class PositionalTableMaker {
 public:
  PositionalTableMaker(std::vector<std::shared_ptr<PositionalScheme>> schemes, int64_t embed, int64_t heads,
                       const torch::Device& device);
  // The tables for P positions, on the device.
  PositionalTables make(int64_t positions);
  // Given the gradients of the loss with respect to the tables (the same shapes, defined
  // where the tables are; rows of members without parameters are ignored), sets each
  // scheme parameter's gradient (autograd through the tables' computation).
  void backward(const PositionalTables& tables, const PositionalTables& table_grads);

 private:
  std::vector<std::shared_ptr<PositionalScheme>> schemes_;
  int64_t embed_, heads_;
  torch::Device device_;
  std::vector<uint8_t> learned_;
  std::map<int64_t, PositionalTables> fixed_;  // per P: the tables of the fixed schemes (learned rows zero)
};

}  // namespace copytask
