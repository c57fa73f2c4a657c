#include "kernels/dropout_stream_kernel.h"

#include <algorithm>

#include <cuda_runtime.h>

#include "kernels/dropout_bits.h"

namespace copytask {
namespace {

// One thread per mask element, grid-strided: member m = i / count, element first + i % count.
__global__ void dropout_masks_kernel(const int64_t* step_keys, int64_t members, int64_t first, int64_t count,
                                     uint32_t threshold, float kept_value, float* out) {
  const int64_t total = members * count;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t m = i / count, e = first + i % count;
    out[i] = dropout_mask_of(static_cast<uint64_t>(step_keys[m]), e, threshold, kept_value);
  }
}

}  // namespace

int dropout_stream_masks_launch(const int64_t* step_keys, int64_t members, int64_t first, int64_t count,
                                uint32_t threshold, float kept_value, float* out, void* stream) {
  const int64_t total = members * count;
  if (total == 0) return 0;
  constexpr int kThreads = 256;
  // Enough blocks to fill any GPU several times over; the loop covers the rest.
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 1 << 16);
  dropout_masks_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      step_keys, members, first, count, threshold, kept_value, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace copytask
