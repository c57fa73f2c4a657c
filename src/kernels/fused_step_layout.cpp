// The fused GPU step's tile in shared memory (kernels/fused_step.h): each part's offset, and
// how many examples fit.
#include <algorithm>

#include "kernels/fused_step.h"

namespace copytask::kernels {

namespace {
// Parts start on 16-byte boundaries (four floats), so that a later kernel may read them as
// float4.
int aligned(int floats) { return (floats + 3) / 4 * 4; }
}  // namespace

TileLayout tile_layout(const StepShape& s, int E, bool kept_global) {
  TileLayout l;
  l.E = E;
  l.kept_global = kept_global;
  const int R = E * s.T, RD = R * s.D, attention = E * s.H * s.T * s.T;
  int at = 0;
  auto part = [&](int floats) {
    const int start = at;
    at += aligned(floats);
    return start;
  };
  // Block 0's kept parts; block l's at + l * block_stride.
  l.n1 = part(RD);
  l.rstd1 = part(R);
  l.qkv = part(3 * RD);
  l.weights = part(attention);
  l.mixed = part(RD);
  l.n2 = part(RD);
  l.rstd2 = part(R);
  l.pre = part(R * s.F);
  l.block_stride = at;
  at = l.block_stride * s.L;
  // In global memory the kept parts are a slot of their own, at the same offsets from its
  // start; the shared memory then starts with the tile's parts.
  if (kept_global) {
    l.kept_floats = at;
    at = 0;
  }
  l.x = part(RD);
  l.nf = part(RD);
  l.rstdf = part(R);
  l.logits = part(R * s.V);
  l.grad_x = part(RD);
  l.grad_branch = part(RD);
  l.grad_wide = part(R * std::max(3 * s.D, s.F));
  l.grad_narrow = part(RD);
  l.grad_scores = part(attention);
  l.act = part(R * std::max(s.D, s.F));
  l.row_loss = part(R);
  l.tokens = part(R);
  l.targets = part(R);
  l.positions = part(R);
  // An example's mask elements at each site of a block (model/dropout_sites.h's order):
  // the attention weights (H, T, T), its output (T, D), the hidden layer (T, F), the
  // feed-forward's output (T, D); 32 a word.
  const int site_floats[4] = {s.H * s.T * s.T, s.T * s.D, s.T * s.F, s.T * s.D};
  for (int site = 0; site < 4; ++site) {
    l.mask_site_word[site] = l.mask_words;
    l.mask_words += (site_floats[site] + 31) / 32;
  }
  l.masks = part(s.L * E * l.mask_words);
  l.floats = at;
  return l;
}

StepDivisors step_divisors(const StepShape& s) {
  auto tiles = [](int O) { return divisor_of((O + kProductTile - 1) / kProductTile); };
  StepDivisors out;
  out.T = divisor_of(s.T);
  out.D = divisor_of(s.D);
  out.F = divisor_of(s.F);
  out.H = divisor_of(s.H);
  out.pairs = divisor_of(std::max(1, s.Dh / 2));
  out.head_fours = divisor_of((s.Dh + kHeadColumns - 1) / kHeadColumns);
  out.tiles_of_D = tiles(s.D);
  out.tiles_of_3D = tiles(3 * s.D);
  out.tiles_of_F = tiles(s.F);
  out.tiles_of_V = tiles(s.V);
  return out;
}

int tile_examples(const StepShape& s, int64_t multiprocessor_bytes, bool kept_global) {
  const int64_t budget = multiprocessor_bytes / kBlocksPerMultiprocessor - kSharedReservedPerBlock;
  auto bytes = [&](int E) { return static_cast<int64_t>(tile_layout(s, E, kept_global).floats) * 4; };
  int E = 0;
  while (E < kExamplesPerPartition && bytes(E + 1) <= budget) ++E;
  // A shape too large for two blocks a multiprocessor may still run one.
  if (E == 0 && bytes(1) <= multiprocessor_bytes - kSharedReservedPerBlock) E = 1;
  return E;
}

}  // namespace copytask::kernels
