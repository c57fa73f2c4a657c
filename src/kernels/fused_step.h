#pragma once
// The fused GPU step's kernels (docs/design.md section 3, docs/gpu.md): the encoder's whole
// training forward and backward, from the tokens to every parameter's gradient, in one
// kernel, and the partitions' gradients summed in a second. No LibTorch here: the model's
// glue (model/fused_gpu.h) fills FusedStepArgs from the encoder, and the same arguments run
// on a GPU (fused_step_launch, kernels/fused_step.cu) or on the CPU with the threads of each
// block emulated (fused_step_emulate, kernels/fused_step_emulated.cpp), the same body
// (kernels/fused_step_body.h) both ways.
//
// The work: one thread block per (member m, partition k), a partition being
// examples_per_partition consecutive examples of the batch (the last one fewer), so the
// partitions depend on B and the model's shape alone. A block runs its examples E at a time
// (a tile): the tile's activations live in the block's shared memory from the embedding to
// the loss and back; the member's weights are read from global memory (the L1 and L2 caches
// hold them); its gradients accumulate in the block's own slice of `partial`, each float owned by one item
// of a phase and summed row after row in the examples' order. So the numbers depend on
// neither the tile E (the GPU's shared memory) nor the threads nor the order in which blocks
// run, and there are no float atomics: two runs give the same bits. The sum kernel then adds
// the K partitions of each float in order.
//
// Positional tables: the hooks whose tables have a kernel form (model/hooks/hook.h,
// KernelTableForm): rows added to the embedding (P, D), the angles of q's and k's pairs
// (given as their cos and sin, (P, Dh/2) each), a score bias (H, P, P); each read at the
// example's position IDs, and its gradient returned where the member's table is learned.
//
// Shapes: M members, B examples per member, T positions, P table positions, D embed,
// H heads, Dh = D / H, F FF hidden, V vocab, L blocks, K partitions, E examples a tile,
// R = E T rows a tile.
#include <cstdint>

#include "kernels/divisor.h"
#include "util/host_device.h"

namespace copytask::kernels {

inline constexpr int kMaxBlocks = 8;              // L: the most blocks the kernel holds parameters for
inline constexpr int kExamplesPerPartition = 32;  // the most examples of one thread block (examples_per_partition)
inline constexpr int kPartitionsOfASmallBatch = 16;  // about a member's blocks for a small batch (examples_per_partition)
inline constexpr int kFusedStepThreads = 256;     // threads of a block
// A tile gets at most half of a multiprocessor's shared memory (less the runtime's 1 KB a
// block), so that two blocks share a multiprocessor and one's barriers overlap the other's work.
inline constexpr int kBlocksPerMultiprocessor = 2;
inline constexpr int64_t kSharedReservedPerBlock = 1024;

struct StepShape {
  int B = 0, T = 0, D = 0, H = 0, Dh = 0, F = 0, V = 0, L = 0, P = 0;
};

// Where a tile's parts lie in the block's shared memory, in floats (integers take a float's
// four bytes). Rows: R = E T; block l's part at its offset + l * block_stride.
//
// The parts kept for the backward lie in shared memory too, or, with kept_global
// (train.gpu_kept_activations=global), in the block's slot of a buffer in global memory
// (FusedStepArgs::kept), kept_floats a slot, at the same offsets from the slot's start:
// they are 60% of an example's floats at the reference shape, so without them a tile holds
// 12 examples where it held 5, and a tile's fixed costs (its some 50 barriers, chains a row
// long) are paid half as often (a partition of 30: 3 tiles, not 6). The slots of the blocks
// running at once, about 42 MB at the reference shape, fit in a Hopper GPU's 50 MB L2 cache
// (a finished block's are written back to memory as others need the room). The same sums
// either way, so the same numbers.
struct TileLayout {
  int E = 0;
  // Kept per block for the backward:
  int n1 = 0, rstd1 = 0;    // ln1's normalized input (R, D) and 1/std (R)
  int qkv = 0;              // q | k | v after the query_key hooks (R, 3D)
  int weights = 0;          // the attention's softmax (E, H, T, T), before dropout
  int mixed = 0;            // weights @ v (R, D)
  int n2 = 0, rstd2 = 0;    // ln2's (R, D), (R)
  int pre = 0;              // fc1's output before the ReLU (R, F)
  int block_stride = 0;
  // The tile's:
  int x = 0;                // the residual stream (R, D)
  int nf = 0, rstdf = 0;    // ln_f's (R, D), (R); in the blocks' backward ln2's output made again
  int logits = 0;           // (R, V), then d(loss)/d(logits)
  int grad_x = 0;           // d(loss)/d(residual stream) (R, D)
  int grad_branch = 0;      // at a residual branch's output, through its dropout (R, D)
  int grad_wide = 0;        // the hidden layer (forward), then d(q|k|v) (R, 3D) or d(pre) (R, F)
  int grad_narrow = 0;      // at a layer norm's output or at mixed (R, D)
  int grad_scores = 0;      // d(logits) of the attention (E, H, T, T)
  int act = 0;              // a layer norm's output or the hidden layer, made again for a backward (R, max(D, F))
  int row_loss = 0;         // each row's cross-entropy (R)
  int tokens = 0, targets = 0, positions = 0;  // int32 (R) each
  // The tile's dropout masks, a bit an element, drawn once in the tile's first phase (every
  // mask is read two or three times, and a word of the stream gives four elements): uint32
  // words (L, E, W), an example's W words the four sites' of a block one after another,
  // site s's from mask_site_word[s] (kernels/fused_step_body.h, mask).
  int masks = 0;
  int mask_site_word[4] = {0, 0, 0, 0};
  int mask_words = 0;       // W
  int floats = 0;           // the whole tile in shared memory (the kept parts not, where kept_global)
  int kept_floats = 0;      // the kept parts' floats (all blocks'), where kept_global; else 0
  bool kept_global = false;
};

inline constexpr int kProductTile = 4;  // a product's tile: its columns, and its rows at most
// The columns of a head that the attention's sums hold in registers at once, and so an
// attention item's columns (kernels/fused_step_body.h).
inline constexpr int kHeadColumns = 4;

// The shape's numbers the items divide their indices by (kernels/divisor.h), made once on
// the host (step_divisors): T, D, F, H, a head's pairs (Dh / 2), a head's fours of columns
// (Dh / 4, rounded up), and a product's column tiles (its outputs O / 4, rounded up) for the
// four widths a product has, D, 3D, F and V.
struct StepDivisors {
  Divisor T, D, F, H, pairs, head_fours;
  Divisor tiles_of_D, tiles_of_3D, tiles_of_F, tiles_of_V;
};

// Member 0's values of a parameter (member m's at value + m * its floats) and where its
// gradient goes in a member's flat gradient.
struct ParameterSlot {
  const float* value = nullptr;
  int64_t grad = -1;
};
struct NormParameters {
  ParameterSlot weight, bias;  // (D) each
};
struct LinearParameters {
  ParameterSlot weight, bias;  // (I, O), (O); no bias: value null
};
struct BlockParameters {
  NormParameters ln1;
  LinearParameters qkv, proj;
  NormParameters ln2;
  LinearParameters fc1, fc2;
};
struct ModelParameters {
  ParameterSlot tok_emb;  // (V, D)
  BlockParameters block[kMaxBlocks];
  NormParameters ln_f;
  LinearParameters head;  // (D, V), (V)
};

// Where a table's gradient goes: `floats` at `grad` in a member's row of grads, made from
// `copies` runs of them at `partial` in each block's slice of partial: one per attention
// block for a table the blocks share (the pair angles, the score bias), each summed over its
// block's rows alone, so that no sum interleaves the blocks in an order the tile would set;
// the sum kernel adds partitions and copies in order. grad -1: no member learns the table.
struct TableGrad {
  int64_t grad = -1, partial = -1, floats = 0;
  int copies = 1;
};

// The tables of the hooks with a kernel form, stacked over the members (zeros, which change
// nothing, for a member without the hook), and their gradients.
struct KernelTables {
  const float* embedding_rows = nullptr;  // (M, P, D)
  const float* pair_cos = nullptr;        // (M, P, Dh/2): cos of the angles of q's and k's pairs
  const float* pair_sin = nullptr;        // (M, P, Dh/2)
  const float* score_bias = nullptr;      // (M, H, P, P)
  TableGrad embedding_rows_grad, pair_angles_grad, score_bias_grad;
};

// A member's flags (FusedStepArgs::member_flags).
enum MemberFlag : uint8_t {
  kMemberCausal = 1,
  kLearnsEmbeddingRows = 2,  // the member's table's gradient is wanted
  kLearnsPairAngles = 4,
  kLearnsScoreBias = 8,
};

// The dropout stream of the step (model/dropout_stream.h): element e of member m's row is
// dropout_mask_of(step_keys[m], e, threshold, kept_value); the row's layout is
// model/dropout_sites.h's: block l's site s of example b starts at
// l * block_floats + site_start[s] + b * example_floats[s].
struct DropoutArgs {
  const int64_t* step_keys = nullptr;  // (M), or null: no dropout
  uint32_t threshold = 0;
  float kept_value = 1.0f;
  int64_t block_floats = 0;
  int64_t site_start[4] = {0, 0, 0, 0};
  int64_t example_floats[4] = {0, 0, 0, 0};
};

struct FusedStepArgs {
  StepShape s;
  int members = 0, partitions = 0;  // M, K
  int partition_examples = 0;       // examples_per_partition
  // Tokens and targets (M, B, T) int64: element (m, b, t) at m * stride[0] + b * stride[1] +
  // t * stride[2] (a full batch's views may repeat one task's data for every member).
  const int64_t* tokens = nullptr;
  const int64_t* targets = nullptr;
  int64_t token_stride[3] = {0, 0, 0}, target_stride[3] = {0, 0, 0};
  const int64_t* positions = nullptr;  // (M, B, T) contiguous, each below P; null: 0..T-1
  const uint8_t* member_flags = nullptr;  // (M), MemberFlag bits
  ModelParameters parameters;
  KernelTables tables;
  DropoutArgs dropout;
  float loss_weight = 0;  // 1 / (B T): each member's loss is its mean over B T positions
  // Floats of a member's gradient (grads' rows): its parameters (parameter_floats, at the
  // offsets of ModelParameters), then its tables' (KernelTables); and of a block's slice of
  // partial: the same parameters, then the tables' copies.
  int64_t flat = 0, parameter_floats = 0, partial_flat = 0;
  // Outputs of the step kernel: each block's gradient (M, K, partial_flat) and summed loss
  // (M, K); of the sum kernel: grads (M, flat) and member_loss (M), the member's mean loss.
  float* partial = nullptr;
  double* partial_loss = nullptr;
  float* grads = nullptr;
  float* member_loss = nullptr;
  TileLayout tile;
  StepDivisors divisors;  // step_divisors(s)
  // The products' operands four floats a load where a whole tile's are aligned (the same sums
  // in the same order either way); false: every operand a float at a time (a test's check).
  bool vector_loads = true;
  // A product's items smaller than 4 x 4 where a phase has fewer of those than threads (the
  // same sums either way); false: always 4 x 4 (a test's check).
  bool small_items = true;
  // Where tile.kept_global: the kept parts, a slot of tile.kept_floats for each block, the
  // block of (member m, partition k) at m K + k (the GPU's blockIdx.x). A slot a block, not one
  // for each block the GPU holds at once taken in turn: a loop over a block's works cost the
  // kernel 5 registers it does not have (a spill). Null: the kept parts in shared memory.
  // (Last: between tile and divisors it moved the divisors in the kernel's constant
  // arguments, and the default kernel compiled to 96 instructions more; here it compiles to
  // the instructions it had, one for one.)
  float* kept = nullptr;
};

// A partition's examples (the last partition fewer), for a batch of B examples whose tile
// holds `tile` examples on a Hopper GPU: whole tiles, about B / 16, at most 32.
// A block runs its partition a tile after another, and a tile's time hardly depends on its
// examples (its phases are chains as long as one row's), so a block's time is its tiles:
// - about B / 16: with 32 examples a partition, a minibatch of 128 gave a member 4 blocks,
//   and a wide model (embed 64, a tile of one example) ran 32 tiles in a row on each, a few
//   dozen blocks on 132 multiprocessors; 16 partitions of 8 put four times the blocks to
//   work, each a quarter as long;
// - whole tiles: 32 examples in tiles of 5 (the reference shape) were 7 tiles, the last of
//   2; 30 are 6.
// The batch size and the model's shape alone decide (the tile on a Hopper GPU, whatever GPU
// runs it), so a member alone and in a batch, and on any GPU, sums the same partitions (the
// numbers depend on them: the order of the sums).
COPYTASK_HOST_DEVICE inline int examples_per_partition(int B, int tile) {
  const int whole = tile < 1 ? 1 : tile > kExamplesPerPartition ? kExamplesPerPartition : tile;
  const int most = kExamplesPerPartition / whole * whole;
  const int spread = (B + kPartitionsOfASmallBatch - 1) / kPartitionsOfASmallBatch;
  const int tiles = (spread + whole / 2) / whole;  // B / 16 to the nearest whole tiles, at least one
  const int per = (tiles < 1 ? 1 : tiles) * whole;
  return per < most ? per : most;
}
// The partitions of a batch of B examples, `per` a partition.
COPYTASK_HOST_DEVICE inline int partition_count(int B, int per) { return (B + per - 1) / per; }

// A tile of E examples' layout, the kept parts in shared memory or (kept_global) not.
TileLayout tile_layout(const StepShape& s, int E, bool kept_global = false);
// The shape's divisors (StepDivisors).
StepDivisors step_divisors(const StepShape& s);
// Whether args.divisors are args.s's, the partitions cover the batch and the kept parts have
// their slots where the tile says: the body takes them unchecked, so the launch and the
// emulation refuse arguments without them.
inline bool fused_step_args_complete(const FusedStepArgs& args) {
  const StepDivisors& v = args.divisors;
  return v.T.d == args.s.T && v.D.d == args.s.D && v.F.d == args.s.F && v.H.d == args.s.H &&
         v.head_fours.d == (args.s.Dh + kHeadColumns - 1) / kHeadColumns &&
         args.partition_examples >= 1 && partition_count(args.s.B, args.partition_examples) == args.partitions &&
         args.tile.kept_global == (args.kept != nullptr);
}
// The most examples a tile can hold when a multiprocessor has `multiprocessor_bytes` of
// shared memory: kBlocksPerMultiprocessor blocks' tiles, each with the runtime's reserve, at
// most kExamplesPerPartition examples; a shape too large for that gets one block's worth (one
// block a multiprocessor); 0 when not even one example fits. kept_global: the tile's parts
// without the kept ones (TileLayout).
int tile_examples(const StepShape& s, int64_t multiprocessor_bytes, bool kept_global = false);

// The step on a GPU: the step kernel on M K blocks, then the sum kernel, both on `stream` (a
// cudaStream_t); every pointer of args in device memory. Returns the first launch error
// (a cudaError_t; 0: none). Only in a build with copytask's CUDA kernels (kernels/cuda_switch.h).
int fused_step_launch(const FusedStepArgs& args, void* stream);
// The current GPU's shared memory a multiprocessor (cudaDevAttrMaxSharedMemoryPerMultiprocessor),
// in bytes; 0 when unknown.
int64_t fused_step_shared_memory_limit();

// The same two kernels on the CPU, every pointer in host memory: the blocks one after
// another, each block's `threads` threads emulated (kernels/block_threads.h), in a shuffled
// order when shuffle_seed is not 0.
struct Emulation {
  int threads = kFusedStepThreads;
  uint64_t shuffle_seed = 0;
};
void fused_step_emulate(const FusedStepArgs& args, const Emulation& emulation);

}  // namespace copytask::kernels
