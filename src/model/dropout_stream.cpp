#include "model/dropout_stream.h"

#include <cmath>

namespace copytask {

DropoutStream::DropoutStream(const std::vector<uint64_t>& member_keys, uint64_t step, double rate)
    : threshold(static_cast<uint32_t>(std::llround(rate * 65536.0))),
      kept_value(static_cast<float>(65536.0 / static_cast<double>(65536 - static_cast<int64_t>(threshold)))) {
  // Each step's key: the member's key and the step number mixed, so steps do not overlap.
  for (uint64_t key : member_keys) step_keys.push_back(splitmix64_mix(key ^ splitmix64_mix((step + 1) * kSplitMixGamma)));
}

}  // namespace copytask
