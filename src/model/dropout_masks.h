#pragma once
// One step's dropout masks of every member (docs/design.md section 3). Shapes: M members, S the
// mask elements of one step (every site of every block for the whole batch).
#include <cstdint>
#include <utility>

#include <torch/types.h>

#include "model/dropout_sites.h"
#include "model/dropout_stream.h"

namespace copytask {

// Each member's dropout masks for one step, drawn from that member's own stream, so a
// member's randomness never depends on the members beside it. One buffer (M, S) holds
// every site's mask (0 or 1/(1-p)) for the step's whole batch of B examples, laid out as
// model/dropout_sites.h says. A chunk of the batch (a full-batch step on the autograd path
// runs in chunks) takes the masks its examples have in the whole batch. On the CPU the
// masks come from a counter-based stream (model/dropout_stream.h), which the fused step
// draws itself instead of reading the buffer.
class DropoutMasks {
 public:
  DropoutMasks(torch::Tensor buffer, DropoutLayout layout, DropoutStream stream = {})
      : buffer_(std::move(buffer)), layout_(std::move(layout)), count_(layout_.batch()), stream_(std::move(stream)) {}
  // The masks of examples start .. start+count-1.
  DropoutMasks chunk(int64_t start, int64_t count) const;
  // One site's mask of one block for this chunk's examples: (M, count, example shape...).
  torch::Tensor site(int64_t block, DropoutSite site) const;
  const DropoutLayout& layout() const { return layout_; }
  // The stream the masks come from (null when none was given): element e of member m's
  // row is stream()->fill(m, e, 1), on every device.
  const DropoutStream* stream() const { return stream_.step_keys.empty() ? nullptr : &stream_; }
  bool whole_batch() const { return start_ == 0 && count_ == layout_.batch(); }

 private:
  torch::Tensor buffer_;  // (M, S), or undefined when only the stream was drawn
  DropoutLayout layout_;
  int64_t start_ = 0, count_;
  DropoutStream stream_;
};

}  // namespace copytask
