#include "model/dropout_sites.h"

namespace copytask {

DropoutLayout::DropoutLayout(const EncoderShape& s, int64_t batch) : batch_(batch) {
  example_shape_ = {{s.heads, s.context, s.context}, {s.context, s.embed}, {s.context, s.hidden}, {s.context, s.embed}};
  for (const auto& shape : example_shape_) {
    int64_t size = 1;
    for (int64_t n : shape) size *= n;
    site_start_.push_back(per_block_);
    example_size_.push_back(size);
    per_block_ += batch * size;
  }
  row_ = s.blocks * per_block_;
}

}  // namespace copytask
