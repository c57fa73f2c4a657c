#pragma once
// n / d and n % d for 0 <= n < 2^31 by a multiply and a shift, d fixed before a kernel runs.
// A GPU has no integer divide: n / d by a value known only at run time compiles to some twenty
// instructions (a float reciprocal and its corrections), and the fused step's items divide
// their index by the shape (a product's column tiles, T, D, F, H) at every element. With
// l = ceil(log2 d) and m = ceil(2^(31 + l) / d) (m < 2^32), floor(n m / 2^(31 + l)) =
// floor(n / d) for every 0 <= n < 2^31 (Granlund and Montgomery 1994, theorem 4.2: m d -
// 2^(31 + l) < d <= 2^l), so the quotient is exact: the same integers as n / d.
#include <cstdint>

#include "util/host_device.h"

namespace copytask::kernels {

struct Divisor {
  int d = 1;
  uint32_t magic = 1u << 31;  // m
  int shift = 31;             // 31 + l
  COPYTASK_HOST_DEVICE int div(int n) const {
    return static_cast<int>((static_cast<uint64_t>(static_cast<uint32_t>(n)) * magic) >> shift);
  }
  COPYTASK_HOST_DEVICE int mod(int n) const { return n - div(n) * d; }
};

// The divisor d (1 <= d < 2^31).
COPYTASK_HOST_DEVICE inline Divisor divisor_of(int d) {
  Divisor out;
  out.d = d;
  int l = 0;
  while ((int64_t{1} << l) < d) ++l;
  const uint64_t power = uint64_t{1} << (31 + l);
  out.magic = static_cast<uint32_t>((power + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d));
  out.shift = 31 + l;
  return out;
}

}  // namespace copytask::kernels
