#pragma once
// A CUDA device's properties, read through ATen's (at::cuda::getDeviceProperties) in a file
// compiled with LibTorch's CUDA headers where LibTorch has CUDA (CMake defines
// COPYTASK_WITH_CUDA); elsewhere, and where no GPU is visible, all empty.
#include <string>

namespace copytask {

struct CudaDeviceProperties {
  std::string name;         // "NVIDIA H100 80GB HBM3"; empty when unknown
  int sm_count = 0;         // streaming multiprocessors
  double clock_mhz = 0;     // the SMs' peak clock
  int major = 0, minor = 0; // compute capability (9.0: Hopper)
};

CudaDeviceProperties cuda_device_properties(int index);

}  // namespace copytask
