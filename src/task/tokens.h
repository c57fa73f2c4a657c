#pragma once
// The token ids every task kind shares: 0 is padding, V-1 is <copy> (task/task_kind.h says
// which ids are content and which is the noise token).
#include <cstdint>

namespace copytask {

constexpr int64_t kPadToken = 0;
inline int64_t copy_token(int64_t vocab_size) { return vocab_size - 1; }

}  // namespace copytask
