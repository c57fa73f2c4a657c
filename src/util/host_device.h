#pragma once
// Functions the GPU's kernels share with the CPU: compiled by nvcc for both sides, and by
// g++ as plain functions (src/kernels/, docs/gpu.md "Adding a kernel").
#if defined(__CUDACC__)
#define COPYTASK_HOST_DEVICE __host__ __device__
#else
#define COPYTASK_HOST_DEVICE
#endif
// A function of a kernel's body that the GPU's compiler must inline: left to itself it may
// call it instead (it did, for the fused step's block backward once the body grew), and a
// call spills the caller's registers to the stack. Nothing on the CPU.
#if defined(__CUDACC__)
#define COPYTASK_DEVICE_INLINE __forceinline__
#else
#define COPYTASK_DEVICE_INLINE
#endif
