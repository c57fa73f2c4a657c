// The fused GPU step on the CPU (kernels/fused_step.h): the step kernel's blocks one after
// another, each block's threads emulated (kernels/block_threads.h), then the sum kernel's
// items in a loop. The same body as the GPU's, so the tests check the kernel's arithmetic,
// and its independence of the threads' order, where there is no GPU.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/fused_step.h"
#include "kernels/fused_step_body.h"

namespace copytask::kernels {

void fused_step_emulate(const FusedStepArgs& args, const Emulation& emulation) {
  if (emulation.threads < 1) throw std::invalid_argument("fused_step_emulate: threads must be >= 1");
  if (args.tile.E < 1) throw std::invalid_argument("fused_step_emulate: a tile of no examples");
  if (!fused_step_args_complete(args))
    throw std::invalid_argument("fused_step_emulate: args.divisors are not step_divisors(args.s), the partitions do not cover the batch, "
                                "or args.kept does not match args.tile.kept_global");
  std::vector<float> shared(static_cast<size_t>(args.tile.floats));
  const float poison = std::numeric_limits<float>::quiet_NaN();
  for (int m = 0; m < args.members; ++m)
    for (int k = 0; k < args.partitions; ++k) {
      const int block = m * args.partitions + k;  // its index in the GPU's grid
      // Shared memory and a kept slot start with whatever was there, as on a GPU: poisoned
      // here, so that a part read before it is written shows.
      std::fill(shared.begin(), shared.end(), poison);
      const uint64_t seed = emulation.shuffle_seed == 0 ? 0 : emulation.shuffle_seed + m * 1000003ull + k;
      EmulatedThreads threads(emulation.threads, seed, block);
      if (args.kept) {
        float* slot = args.kept + static_cast<int64_t>(block) * args.tile.kept_floats;
        std::fill(slot, slot + args.tile.kept_floats, poison);
        FusedStepBlock<EmulatedThreads, true>(args, m, k, shared.data(), threads).run();
      } else {
        FusedStepBlock<EmulatedThreads>(args, m, k, shared.data(), threads).run();
      }
    }
  const int64_t items = static_cast<int64_t>(args.members) * args.flat + args.members;
  for (int64_t i = 0; i < items; ++i) fused_step_sum_item(args, i);
}

}  // namespace copytask::kernels
