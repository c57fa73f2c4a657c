#pragma once
// The dropout sites of the encoder, defined once (docs/design.md section 3): per block, in the
// order the forward pass meets them,
//   attention weights   (H, T, T)   after the softmax
//   attention output    (T, D)      after the attention projection, before the residual
//   hidden              (T, F)      after the feed-forward's ReLU
//   feed-forward output (T, D)      after its second layer, before the residual
// (PyTorch's nn.TransformerEncoderLayer; none on the embeddings). One step's masks of a
// member are one row of S floats: block by block, site by site, each site holding the
// whole batch's B examples one after another. The LibTorch model takes its masks from that
// row (model/encoder.h), the fused CPU step draws each example's own part of it from the
// stream (model/fused_cpu.h): both read this layout.
// Shapes: B batch, T positions, D embed, H heads, F FF hidden, L blocks, S = row.
#include <cstdint>
#include <vector>

#include "model/encoder_shape.h"

namespace copytask {

enum DropoutSite : int { kAttentionWeights, kAttentionOutput, kHidden, kFeedForwardOutput, kDropoutSites };

class DropoutLayout {
 public:
  DropoutLayout(const EncoderShape& shape, int64_t batch);
  // One example's mask shape at a site: {H, T, T}, {T, D}, {T, F} or {T, D}.
  const std::vector<int64_t>& example_shape(DropoutSite site) const { return example_shape_[site]; }
  // Floats of one example at a site.
  int64_t example_size(DropoutSite site) const { return example_size_[site]; }
  // Where example b's mask at a site of a block starts in the member's row.
  int64_t start(int64_t block, DropoutSite site, int64_t example = 0) const {
    return block * per_block_ + site_start_[site] + example * example_size_[site];
  }
  int64_t batch() const { return batch_; }
  int64_t row() const { return row_; }  // S

 private:
  int64_t batch_;
  std::vector<std::vector<int64_t>> example_shape_;
  std::vector<int64_t> example_size_, site_start_;  // per site; starts within a block
  int64_t per_block_ = 0, row_ = 0;
};

}  // namespace copytask
