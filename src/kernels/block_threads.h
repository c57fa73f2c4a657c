#pragma once
// A thread block as a kernel's body sees it (docs/gpu.md, "Adding a kernel"): how many
// threads it has, its index in the grid (`block`), and `each`, which runs one phase of the
// body (a function of the thread's index) on every thread and then waits for all of them. A
// body is written once, as a template on its threads:
//
//   template <class Threads> COPYTASK_HOST_DEVICE void body(Threads& threads, ...) {
//     block_items(threads, n, [&](int item) { ... });   // phase 1: items 0..n-1
//     block_items(threads, m, [&](int item) { ... });   // phase 2, after every item of phase 1
//   }
//
// On the GPU (DeviceThreads) each thread runs its own index and __syncthreads() ends the
// phase. On the CPU (EmulatedThreads) the phase runs for every index in a plain loop, in
// order or in a shuffled order drawn afresh for each phase: the same arithmetic, checkable
// where there is no GPU, and a race (an item that reads what another item of the same phase
// writes) shows as a difference between orders (tests/test_fused_gpu.cpp).
//
// The rule a body keeps: a value that differs between threads lives only inside a phase;
// what crosses a barrier is in shared or global memory. Variables outside a phase are the
// block's, the same on every thread.
#include <cstdint>
#include <numeric>
#include <vector>

#include "util/host_device.h"
#include "util/splitmix.h"

namespace copytask::kernels {

// The GPU's threads of the block that runs the body: kThreads of them, the count the kernel
// is launched with, known at compile time so that a phase's loop over its items and a body's
// sums over the threads (product_tile_rows) divide by a constant, not by blockDim.x (a
// division by a value known only at run time is some twenty instructions on a GPU, and the
// step's every thread made several each phase: 2.6% of its stall samples on an H200).
template <int kThreads>
struct DeviceThreads {
  COPYTASK_HOST_DEVICE static constexpr int count() { return kThreads; }
  // The block's index in the grid: read where it is used, it holds no register.
  COPYTASK_HOST_DEVICE int block() const {
#if defined(__CUDA_ARCH__)
    return static_cast<int>(blockIdx.x);
#else
    return 0;
#endif
  }
  template <class Phase>
  COPYTASK_HOST_DEVICE void each(const Phase& phase) {
#if defined(__CUDA_ARCH__)
    phase(static_cast<int>(threadIdx.x));
    __syncthreads();
#else
    (void)phase;
#endif
  }
};

// The same block on the CPU: `count` threads, each phase run thread after thread. With a
// shuffle seed (not 0) the threads of every phase run in an order drawn from it, a new one
// each phase.
class EmulatedThreads {
 public:
  explicit EmulatedThreads(int count, uint64_t shuffle_seed = 0, int block = 0)
      : order_(static_cast<size_t>(count)), seed_(shuffle_seed), block_(block) {
    std::iota(order_.begin(), order_.end(), 0);
  }
  int count() const { return static_cast<int>(order_.size()); }
  int block() const { return block_; }  // the emulated block's index in the grid
  template <class Phase>
  void each(const Phase& phase) {
    if (seed_ != 0) shuffle();
    for (int thread : order_) phase(thread);
  }

 private:
  // Fisher-Yates from the seed's stream: phase p of a block gets the same order in every run.
  void shuffle() {
    for (size_t i = order_.size(); i > 1; --i) {
      const uint64_t draw = splitmix64_mix(seed_ + (++draws_) * kSplitMixGamma);
      std::swap(order_[i - 1], order_[static_cast<size_t>(draw % i)]);
    }
  }
  std::vector<int> order_;
  uint64_t seed_, draws_ = 0;
  int block_;
};

// One phase whose work is `items` independent items: item i runs on thread i % count, the
// threads' items in order. An item writes only what no other item of the phase reads or
// writes.
template <class Threads, class Item>
COPYTASK_HOST_DEVICE inline void block_items(Threads& threads, int items, const Item& item) {
  threads.each([&](int thread) {
    for (int i = thread; i < items; i += threads.count()) item(i);
  });
}

}  // namespace copytask::kernels
