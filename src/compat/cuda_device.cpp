#include "compat/cuda_device.h"

#ifdef COPYTASK_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <torch/cuda.h>
#endif

namespace copytask {

#ifdef COPYTASK_WITH_CUDA
CudaDeviceProperties cuda_device_properties(int index) {
  CudaDeviceProperties properties;
  // Asked first: on a CUDA build without a GPU every CUDA call throws.
  if (!torch::cuda::is_available() || index < 0 || index >= static_cast<int>(torch::cuda::device_count()))
    return properties;
  const cudaDeviceProp* device = at::cuda::getDeviceProperties(index);
  properties.name = device->name;
  properties.sm_count = device->multiProcessorCount;
  properties.major = device->major;
  properties.minor = device->minor;
  // CUDA 13 dropped cudaDeviceProp::clockRate; the attribute stays (kHz).
  int clock_khz = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, index) == cudaSuccess) properties.clock_mhz = clock_khz / 1e3;
  return properties;
}
#else
CudaDeviceProperties cuda_device_properties(int) { return {}; }
#endif

}  // namespace copytask
