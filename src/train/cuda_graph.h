#pragma once
// A CUDA graph of one piece of work (the training step, train/device_step.h): captured once
// on a side stream, replayed as one launch. Compiled with CUDA only where LibTorch has it
// (CMake defines COPYTASK_WITH_CUDA); elsewhere cuda_graph_unavailable() says why and
// capture() refuses. Everything the work reads or writes must stay at the same addresses
// between replays (static tensors); its temporaries live in the graph's own memory pool.
#include <functional>
#include <memory>
#include <string>

namespace copytask {

// Why no CUDA graph can be captured here ("" when one can: a CUDA LibTorch and a GPU).
std::string cuda_graph_unavailable();

class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  // Records `work` (which launches device work only: no host reads of device values, no
  // copies from the host) into the graph; nothing runs. Throws, leaving no capture open,
  // where the work cannot be captured.
  void capture(const std::function<void()>& work);
  // Runs the captured work once on the current stream; returns without waiting for it.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace copytask
