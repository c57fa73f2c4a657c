#pragma once
// Functions the GPU's kernels share with the CPU: compiled by nvcc for both sides, and by
// g++ as plain functions (src/kernels/, docs/gpu.md "Adding a kernel").
#if defined(__CUDACC__)
#define COPYTASK_HOST_DEVICE __host__ __device__
#else
#define COPYTASK_HOST_DEVICE
#endif
