#pragma once
// The GPU's dropout masks in one kernel (kernels/dropout_stream_kernel.cu), built only where
// LibTorch has CUDA and nvcc works (CMake's COPYTASK_CUDA_KERNELS). The integer tensor
// operations of dropout_stream_masks make each mask through a dozen int64 tensors; this
// writes it once. No LibTorch and no CUDA header here, so both sides include it.
#include <cstdint>

namespace copytask {

// out[m * count + i] = the mask of element first + i of member m's step (kernels/dropout_bits.h),
// for m < members: step_keys (members) and out (members x count) in device memory, launched
// on `stream` (a cudaStream_t). Returns the launch's cudaError_t (0: cudaSuccess).
int dropout_stream_masks_launch(const int64_t* step_keys, int64_t members, int64_t first, int64_t count,
                                uint32_t threshold, float kept_value, float* out, void* stream);

}  // namespace copytask
