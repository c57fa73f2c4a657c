#pragma once
// The one place where LibTorch versions (Debian's 1.13 CPU build, a PyTorch 2.x wheel's
// CUDA build) and devices differ. Everything else calls these.
#include <cstdint>
#include <string>

#include <c10/core/Device.h>

namespace at {
struct Generator;  // ATen/core/Generator.h, kept out of the command line's translation units
}

namespace copytask {

// A fresh random generator on `device`, seeded: one per member, so a member's random
// numbers never depend on which members train beside it.
at::Generator generator_make(const c10::Device& device, uint64_t seed);

// "auto" -> cuda when available, else cpu; "cuda" without a GPU is a ConfigError.
c10::Device device_resolve(const std::string& name);

// "1.13.1", "2.4.0+cu121", ...
std::string torch_version_string();

// Sets LibTorch's CPU threads (0 = one per core); returns the count in use.
int threads_configure(int64_t requested);

// Splits a 64-bit seed into independent streams: stream_seed(seed, 1), (seed, 2), ...
uint64_t stream_seed(uint64_t seed, uint64_t stream);

}  // namespace copytask
