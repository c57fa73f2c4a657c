#pragma once
// What a scheme on the content hook implements (model/hooks/content.cpp): a term added to
// each block's attention logits, computed from that block's q, k, scores, score bias or
// input and the scheme's own parameters (cope, fox, the dape option). The scheme computes it
// twice, each in its own file: in LibTorch ops (term(), autograd gives the backward), and by
// hand for the fused CPU step (cpu(), a cpu::CpuHook whose scores_forward adds the term and
// whose scores_backward sends its gradient on). Both read the parameters from the same flat
// vector, the scheme's content table (content_table below), so the fused step returns that
// vector's gradient and autograd carries it to the parameters, as for every other table.
//
// Shapes: B batch, H heads, T positions, D embed, Dh = D / H.
#include <cstdint>
#include <memory>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "model/hooks/cpu_hook.h"
#include "model/hooks/hook.h"

namespace copytask {

// One member's attention at one block, as a content term reads it.
struct ContentInputs {
  int64_t block = 0;
  torch::Tensor input;   // (B, T, D) the attention's input ln1(x)
  torch::Tensor q, k;    // (B, H, T, Dh) after the query_key hooks
  torch::Tensor scores;  // (B, H, T, T) q.k / sqrt(Dh)
  torch::Tensor bias;    // (1|B, H, T, T) the member's score bias, or undefined
  bool causal = false;
};

class ContentScore {
 public:
  virtual ~ContentScore() = default;
  // The term (B, H, T, T) added to the logits, from the parameters in `table` (the scheme's
  // content table, so that autograd reaches them through it). Entries of keys a causal
  // member does not see must be finite (the mask then drops them).
  virtual torch::Tensor term(const ContentInputs& in, const torch::Tensor& table) const = 0;
  // The fused CPU step's kernel of the term (making.table: the content table's floats).
  virtual std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const = 0;
};

// A module's parameters (its own, not its sub-modules'), flattened and concatenated in the
// order they were registered: (n). Differentiable.
torch::Tensor content_table(torch::nn::Module& module);
// The inverse view: the table's pieces in the parameters' shapes, in the same order.
std::vector<torch::Tensor> content_pieces(torch::nn::Module& module, const torch::Tensor& table);

}  // namespace copytask
