#pragma once
// SplitMix64 (Steele, Lea and Flood 2014): the one mixing function behind every
// counter-based stream of copytask (dropout masks, position IDs, per-member seeds).
#include <cstdint>

#include "util/host_device.h"

namespace copytask {

// SplitMix64's output function: a well-mixed 64-bit value from any 64-bit counter.
COPYTASK_HOST_DEVICE inline uint64_t splitmix64_mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
// Its increment: the counter of stream element i is key + i * kSplitMixGamma.
inline constexpr uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ULL;

}  // namespace copytask
