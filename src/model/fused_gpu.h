#pragma once
// The fused GPU step's glue (docs/design.md section 3, docs/gpu.md): the encoder's training
// forward and backward as copytask's own kernels (kernels/fused_step.h) instead of LibTorch's
// ops, one launch for the whole batch of members, one more to sum the partitions. This file
// fills the kernels' arguments from the encoder, its positional tables and the batch, keeps
// the buffers they write at fixed addresses (so a captured CUDA graph replays them), and hands
// the gradients back as the parameters' and the tables' gradients.
//
// The same arguments run on the model's GPU, or, for a model on the CPU, through the kernels'
// CPU emulation (the same body, each block's threads in a loop): what the tests check where
// there is no GPU (tests/test_fused_gpu.cpp).
//
// Shapes: M members, B examples per member, T positions, P table positions, V vocab.
#include <cstdint>
#include <string>

#include <torch/types.h>

#include "kernels/fused_step.h"
#include "model/encoder.h"

namespace copytask {

// How the kernels run. On a GPU: a multiprocessor's shared memory (0: the device's own). On
// the CPU, emulated: the threads of a block, the shuffle seed of their order (0: in order),
// and the multiprocessor's shared memory the tile is sized for (0: an H100's 228 KB). The numbers depend on none of
// them (tested). every_table_learned: return the gradient of every table a member uses, the
// fixed ones too (the tests compare them with autograd's). vector_loads, small_items: as the
// kernels' arguments of those names (false: a test's check that no number depends on them).
struct FusedGpuExecution {
  int threads = kernels::kFusedStepThreads;
  uint64_t shuffle_seed = 0;
  int64_t shared_bytes = 0;
  bool every_table_learned = false;
  bool vector_loads = true;  // kernels::FusedStepArgs::vector_loads
  bool small_items = true;   // kernels::FusedStepArgs::small_items
  int tile_examples = 0;     // at most this many examples a tile (train.gpu_tile_examples); 0 = what fits
  // The parts kept for the backward in global memory (train.gpu_kept_activations=global;
  // kernels::TileLayout::kept_global).
  bool kept_global = false;
};

// An H100's and H200's shared memory a multiprocessor (cudaDevAttrMaxSharedMemoryPerMultiprocessor).
inline constexpr int64_t kHopperSharedBytes = 233472;

// Why the fused GPU step's kernels cannot run a member of this scheme with these options
// ("" when they can): the hook it acts through that has no kernel form. The study's planner
// asks it to keep such members in batches of their own.
std::string fused_gpu_scheme_problem(const std::string& positional, const PositionalOptions& options,
                                     const EncoderShape& shape, bool causal);

// Why the fused GPU step cannot train this model at T positions ("" when it can): not
// float32; more blocks than the kernel holds; a member acting through a hook without a kernel
// form (model/hooks/hook.h, KernelTableForm); a tile of one example over the shared memory;
// on a GPU, a build without copytask's CUDA kernels.
std::string fused_gpu_unsupported(EncoderImpl& model, int64_t T, const FusedGpuExecution& execution = {});

// The kernels' side of one batch of members at B examples of T positions: its buffers, made
// once. Not copyable: a captured graph reads them at their addresses.
class FusedGpuKernels {
 public:
  FusedGpuKernels(EncoderImpl& model, int64_t B, int64_t T, const FusedGpuExecution& execution = {});
  FusedGpuKernels(const FusedGpuKernels&) = delete;
  FusedGpuKernels& operator=(const FusedGpuKernels&) = delete;

  // The training step's forward and backward: sets every stacked parameter's gradient to
  // d(sum over members of the member's mean cross-entropy over its B T positions)/d(it),
  // as member_losses(model.forward(inputs, masks), targets).sum().backward() would, and
  // returns each member's loss (M). tables: model.positional_tables(model.table_positions(T)).
  // table_grads, when given, receives the gradients of the tables that require them.
  // inputs, targets (M, B, T) int64 views; positions (M, B, T) int64 or undefined (0..T-1);
  // dropout_keys (M) int64, this step's key of each member's stream
  // (EncoderImpl::dropout_step_keys), or undefined for no dropout. Every tensor on the model's
  // device. Launches device work only: nothing is read back.
  torch::Tensor loss_backward(const PositionalTables& tables, const torch::Tensor& inputs, const torch::Tensor& targets,
                              const torch::Tensor& positions, const torch::Tensor& dropout_keys,
                              PositionalTables* table_grads);

  // The tile's examples (kernels/fused_step.h), for bench and the tests.
  int tile_examples() const { return tile_.E; }

 private:
  EncoderImpl& model_;
  int64_t B_, T_, P_;
  FusedGpuExecution execution_;
  kernels::TileLayout tile_;     // the tile the kernels run, made once: its examples, its parts, the kept slots' floats
  int partition_examples_ = 0;  // kernels::examples_per_partition
  std::vector<kernels::TableGrad> slot_;  // per registered hook: where its table's gradient goes (grad -1: none)
  int64_t parameter_floats_ = 0;  // floats of a member's parameters
  int64_t flat_ = 0;              // floats of a member's gradient: the parameters', the tables'
  int64_t partial_flat_ = 0;      // floats of a block's slice of partial: the parameters', the tables' copies
  torch::Tensor flags_;           // (M) uint8: kernels::MemberFlag bits
  torch::Tensor partial_;         // (M, K, partial_flat)
  torch::Tensor partial_loss_;    // (M, K) float64
  torch::Tensor grads_;           // (M, flat): the parameters', then the tables'
  torch::Tensor member_loss_;     // (M)
  torch::Tensor kept_;            // (M, K, kept floats), where execution.kept_global; else undefined
};

}  // namespace copytask
