#include "train/cuda_graph.h"

#include <stdexcept>

#include <torch/cuda.h>

#ifdef COPYTASK_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace copytask {

#ifdef COPYTASK_WITH_CUDA

std::string cuda_graph_unavailable() {
  return torch::cuda::is_available() ? "" : "no CUDA device is visible to this LibTorch";
}

struct CudaGraph::Impl {
  at::cuda::CUDAGraph graph;
};

// The graph is made at capture, not here: at::cuda::CUDAGraph's constructor asks the CUDA
// runtime for a stream, which throws ("driver version is insufficient") on a machine
// without a GPU; a CUDA build must run there as it does anywhere else.
CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;

void CudaGraph::capture(const std::function<void()>& work) {
  if (const std::string why = cuda_graph_unavailable(); !why.empty()) throw std::runtime_error(why);
  impl_ = std::make_unique<Impl>();
  // As torch.cuda.graph does: everything before finished and the cached blocks given back
  // (the graph's memory is a pool of its own: the warm-up's blocks would sit beside it),
  // then the capture on a stream of its own (the default stream cannot be captured).
  torch::cuda::synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
  const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  {
    const c10::cuda::CUDAStreamGuard on_stream(stream);
    impl_->graph.capture_begin();
    try {
      work();
    } catch (...) {
      // Close the capture (it fails too, the work having broken it) so the stream is usable.
      try {
        impl_->graph.capture_end();
      } catch (...) {
      }
      impl_.reset();
      throw;
    }
    impl_->graph.capture_end();
  }
  torch::cuda::synchronize();
}

void CudaGraph::replay() {
  if (!impl_) throw std::logic_error("CudaGraph::replay before a capture");
  impl_->graph.replay();
}

#else  // a LibTorch without CUDA (Debian's): nothing to capture

std::string cuda_graph_unavailable() { return "this LibTorch was built without CUDA"; }

struct CudaGraph::Impl {};
CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;
void CudaGraph::capture(const std::function<void()>&) { throw std::runtime_error(cuda_graph_unavailable()); }
void CudaGraph::replay() { throw std::runtime_error(cuda_graph_unavailable()); }

#endif

}  // namespace copytask
