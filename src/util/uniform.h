#pragma once
// Uniform integers that are the same on every standard library (std::uniform_int_distribution
// is not), so data and minibatch order depend only on the seed.
#include <cstdint>
#include <limits>
#include <random>

namespace copytask {

// Uniform in [0, bound), bound >= 1, by rejection of the top partial range.
inline uint64_t uniform_below(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t draw;
  do {
    draw = engine();
  } while (draw >= limit);
  return draw % bound;
}

}  // namespace copytask
