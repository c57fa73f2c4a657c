#pragma once
// The token ids every task kind shares: 0 is padding, V-1 is <copy> (task/task_kind.h says
// which ids are content and which is the noise token), and the target that marks a position
// out of the loss.
#include <cstdint>

namespace copytask {

constexpr int64_t kPadToken = 0;
// A target out of the loss (task.convention = cho: the prefix's echo and the padding): its
// position adds nothing to the loss or the gradient, and scoring skips it.
constexpr int64_t kOutOfLoss = -1;
inline int64_t copy_token(int64_t vocab_size) { return vocab_size - 1; }

}  // namespace copytask
