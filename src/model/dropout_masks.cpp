#include "model/dropout_masks.h"

#include <vector>

#include <c10/util/Exception.h>

namespace copytask {

DropoutMasks DropoutMasks::chunk(int64_t start, int64_t count) const {
  DropoutMasks part(buffer_, layout_, stream_);
  part.start_ = start;
  part.count_ = count;
  return part;
}

torch::Tensor DropoutMasks::site(int64_t block, DropoutSite which) const {
  TORCH_CHECK(buffer_.defined(), "DropoutMasks: drawn without a buffer (dropout_masks(batch, false))");
  const int64_t B = layout_.batch(), size = layout_.example_size(which);
  std::vector<int64_t> whole_shape{buffer_.size(0), B};
  for (int64_t n : layout_.example_shape(which)) whole_shape.push_back(n);
  auto whole = buffer_.narrow(1, layout_.start(block, which), B * size).view(whole_shape);  // (M, B, example shape...)
  return count_ == B ? whole : whole.narrow(1, start_, count_);                           // (M, count, ...)
}

}  // namespace copytask
