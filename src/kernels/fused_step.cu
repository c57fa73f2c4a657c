// The fused GPU step on a GPU (kernels/fused_step.h): the step kernel, one thread block per
// (member, partition) with the tile in dynamic shared memory, and the sum kernel, one thread
// per float. Their bodies are kernels/fused_step_body.h's, which the CPU's emulation runs too.
#include <cuda_runtime.h>

#include "kernels/fused_step.h"
#include "kernels/fused_step_body.h"

namespace copytask::kernels {
namespace {

// At most kFusedStepThreads threads and two blocks a multiprocessor (the tile's shared
// memory is sized for two): ptxas may use up to 128 registers a thread. Arguments by value
// in the constant bank (FusedStepArgs is a few kilobytes, under the 32 KB parameter limit).
// kKeptGlobal: the kept parts in the block's slot of args.kept, else in shared memory.
template <bool kKeptGlobal>
__global__ void __launch_bounds__(kFusedStepThreads, kBlocksPerMultiprocessor)
    fused_step_kernel(const __grid_constant__ FusedStepArgs args) {
  extern __shared__ float4 shared_raw[];  // float4: 16-byte aligned
  using Threads = DeviceThreads<kFusedStepThreads>;  // the launch's blockDim.x (fused_step_launch)
  Threads threads;
  const int member = static_cast<int>(blockIdx.x) / args.partitions;
  const int partition = static_cast<int>(blockIdx.x) % args.partitions;
  FusedStepBlock<Threads, kKeptGlobal> block(args, member, partition, reinterpret_cast<float*>(shared_raw), threads);
  block.run();
}

__global__ void fused_step_sum_kernel(const __grid_constant__ FusedStepArgs args, int64_t items) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += stride)
    fused_step_sum_item(args, i);
}

}  // namespace

int fused_step_launch(const FusedStepArgs& args, void* stream_handle) {
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  if (!fused_step_args_complete(args)) return static_cast<int>(cudaErrorInvalidValue);
  const size_t shared = static_cast<size_t>(args.tile.floats) * sizeof(float);
  // Above 48 KB a kernel must ask for its dynamic shared memory: asked once for the largest
  // tile so far, at the first launch (the device step's uncaptured warm-up), so that a graph's
  // capture never meets the call.
  static size_t asked[2] = {0, 0};  // each form's
  const bool kept_global = args.kept != nullptr;
  const auto kernel = kept_global ? fused_step_kernel<true> : fused_step_kernel<false>;
  cudaError_t error = cudaSuccess;
  if (shared > asked[kept_global]) {
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    if (error != cudaSuccess) return static_cast<int>(error);
    asked[kept_global] = shared;
  }
  const unsigned blocks = static_cast<unsigned>(args.members) * static_cast<unsigned>(args.partitions);
  kernel<<<blocks, kFusedStepThreads, shared, stream>>>(args);
  error = cudaGetLastError();
  if (error != cudaSuccess) return static_cast<int>(error);
  const int64_t items = static_cast<int64_t>(args.members) * args.flat + args.members;
  constexpr int kSumThreads = 256;
  const int64_t sum_blocks = (items + kSumThreads - 1) / kSumThreads;
  fused_step_sum_kernel<<<static_cast<unsigned>(sum_blocks < 65536 ? sum_blocks : 65536), kSumThreads, 0, stream>>>(
      args, items);
  return static_cast<int>(cudaGetLastError());
}

int64_t fused_step_shared_memory_limit() {
  int device = 0, bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess) return 0;
  return bytes;
}

}  // namespace copytask::kernels
